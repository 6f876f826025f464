"""DELETE /api/workspaces/{id} and /api/knowledge-bases/{id}: the owner deletes an emptied one (docs/web.md#settings);
while pages remain (trashed ones too) it is 409 with counts; others are refused; audited."""

from __future__ import annotations

import uuid

from sqlmodel import select

from openkb.models import AuditLog, Collaborator, Invitation


def test_owner_deletes_an_emptied_workspace(w):
    ws, kb = w.ws["id"], w.kb
    page = w.doc("Last page")
    r = w.c["owner"].post(f"/api/objects/workspace/{ws}/invitations", json={"role": "member"})
    assert r.status_code == 201, r.text

    assert w.c["admin"].delete(f"/api/workspaces/{ws}").status_code == 403
    assert w.c["outsider"].delete(f"/api/workspaces/{ws}").status_code == 404
    r = w.c["owner"].delete(f"/api/workspaces/{ws}")
    assert r.status_code == 409, r.text
    assert (r.json()["reason"], r.json()["knowledge_bases"], r.json()["documents"]) == ("not_empty", 1, 1)
    assert w.c["owner"].delete(f"/api/documents/{page['id']}").status_code in (200, 204)
    r = w.c["owner"].delete(f"/api/workspaces/{ws}")
    assert r.status_code == 409 and r.json()["documents"] == 1, r.text  # the trash counts
    assert w.c["owner"].delete(f"/api/trash/{page['id']}").status_code == 200

    r = w.c["owner"].delete(f"/api/workspaces/{ws}")
    assert r.status_code == 200, r.text
    assert r.json()["knowledge_bases"] == 1 and r.json()["members"] == 4
    for who in ("owner", "member"):
        assert w.c[who].get(f"/api/workspaces/{ws}").status_code == 404
        assert w.c[who].get(f"/api/knowledge-bases/{kb['id']}").status_code == 404
    assert ws not in {x["id"] for x in w.c["member"].get("/api/workspaces").json()["items"]}
    with w.committed() as s:
        assert s.exec(select(Collaborator).where(Collaborator.object_id == uuid.UUID(kb["id"]))).all() == []
        assert s.exec(select(Invitation).where(Invitation.object_id == uuid.UUID(ws))).all() == []
        row = s.exec(select(AuditLog).where(AuditLog.action == "workspace.deleted")).all()
        mine = [a for a in row if str(a.object_id) == ws]
        assert len(mine) == 1 and mine[0].actor_user_id == w.users["owner"] and mine[0].meta["knowledge_bases"] == 1


def test_owner_deletes_an_emptied_knowledge_base(w):
    kb = w.new_kb(visibility="workspace")
    page = w.doc("Only page", kb=kb)
    r = w.c["owner"].post(
        f"/api/objects/knowledge_base/{kb['id']}/collaborators",
        json={"subject_type": "user", "subject_id": str(w.users["admin"]), "role": "manager"},
    )
    assert r.status_code == 201, r.text
    assert w.c["admin"].delete(f"/api/knowledge-bases/{kb['id']}").status_code == 403  # a manager
    r = w.c["owner"].delete(f"/api/knowledge-bases/{kb['id']}")
    assert r.status_code == 409 and (r.json()["reason"], r.json()["documents"]) == ("not_empty", 1), r.text
    assert w.c["owner"].delete(f"/api/documents/{page['id']}").status_code in (200, 204)
    assert w.c["owner"].delete(f"/api/trash/{page['id']}").status_code == 200
    r = w.c["owner"].delete(f"/api/knowledge-bases/{kb['id']}")
    assert r.status_code == 200 and r.json()["title"] == kb["title"], r.text
    assert w.c["member"].get(f"/api/knowledge-bases/{kb['id']}").status_code == 404
    assert w.c["owner"].get(f"/api/knowledge-bases/{w.kb['id']}").status_code == 200  # the other one stays
    with w.committed() as s:
        assert s.exec(select(Collaborator).where(Collaborator.object_id == uuid.UUID(kb["id"]))).all() == []
        row = s.exec(
            select(AuditLog).where(
                AuditLog.action == "knowledge_base.deleted", AuditLog.object_id == uuid.UUID(kb["id"])
            )
        ).one()
        assert row.actor_user_id == w.users["owner"]
