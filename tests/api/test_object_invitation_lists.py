"""Listing an object's invitations and share links: only for those who may create them, never a
token or token hash, and nothing for outsiders."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.content.http_world import OUTSIDERS


def test_list_knowledge_base_invitations(w):
    o = w.c["owner"]
    kb = w.new_kb(visibility="private")
    base = f"/api/objects/knowledge_base/{kb['id']}/invitations"
    expires = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    link = o.post(base, json={"role": "viewer", "max_uses": 5, "expires_at": expires}).json()
    gated = o.post(base, json={"role": "editor", "require_approval": True}).json()
    targeted = o.post(base, json={"role": "manager", "user_id": str(w.users["member"])}).json()
    assert w.c["guest"].post(f"/api/invitations/{gated['token']}/accept").json()["status"] == "awaiting_approval"
    assert o.post(f"/api/invitations/{targeted['id']}/revoke").status_code == 200

    r = o.get(base)
    assert r.status_code == 200, r.text
    items = {i["id"]: i for i in r.json()["items"]}
    assert list(items) == [link["id"], gated["id"], targeted["id"]]  # oldest first
    assert items[link["id"]]["max_uses"] == 5 and items[link["id"]]["used_count"] == 0
    assert items[link["id"]]["role"] == "viewer" and items[link["id"]]["status"] == "pending"
    assert datetime.fromisoformat(items[link["id"]]["expires_at"]) == datetime.fromisoformat(expires)
    assert items[link["id"]]["expired"] is False
    assert items[gated["id"]]["require_approval"] is True and items[gated["id"]]["pending_requests"] == 1
    assert items[gated["id"]]["used_count"] == 1
    assert items[targeted["id"]]["status"] == "revoked" and items[targeted["id"]]["invited_user_id"] == str(
        w.users["member"]
    )
    for i in items.values():
        assert i["created_by"] == str(w.users["owner"]) and i["created_at"]
        assert "token" not in i and "token_hash" not in i and "url" not in i
    for secret in (link["token"], gated["token"], targeted["token"]):
        assert secret not in r.text
    assert "token_hash" not in r.text

    only = o.get(base, params={"status": "revoked"}).json()["items"]
    assert [i["id"] for i in only] == [targeted["id"]]
    r = o.get(base, params={"status": "bogus"})
    assert r.status_code == 422 and r.json()["error"] == "VALIDATION_ERROR"
    r = o.get(f"/api/objects/folder/{kb['id']}/invitations")
    assert r.status_code == 422 and r.json()["error"] == "VALIDATION_ERROR"

    # an editor sees the knowledge base but may not invite: 403; outsiders: 404
    o.post(
        f"/api/objects/knowledge_base/{kb['id']}/collaborators",
        json={"subject_id": str(w.users["member"]), "role": "editor"},
    )
    r = w.c["member"].get(base)
    assert r.status_code == 403 and r.json()["error"] == "PERMISSION_DENIED"
    for name in OUTSIDERS + ("admin",):  # a workspace admin gets no private content either
        r = w.by_name(name).get(base)
        assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND", (name, r.text)
        assert link["id"] not in r.text
    r = o.get(f"/api/objects/knowledge_base/{w.other_tenant.id}/invitations")
    assert r.status_code == 404


def test_list_workspace_and_document_invitations(w):
    o = w.c["owner"]
    ws_base = f"/api/objects/workspace/{w.ws['id']}/invitations"
    inv = o.post(ws_base, json={"role": "member"}).json()
    assert [i["id"] for i in o.get(ws_base).json()["items"]] == [inv["id"]]
    assert [i["id"] for i in w.c["admin"].get(ws_base).json()["items"]] == [inv["id"]]  # workspace admin
    # a member or guest is in the workspace, so it exists for them, but they may not invite
    for name in ("member", "guest"):
        r = w.c[name].get(ws_base)
        assert r.status_code == 403 and r.json()["error"] == "PERMISSION_DENIED", name
    for name in ("other_tenant", "outsider", "anon"):
        r = w.by_name(name).get(ws_base)
        assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND", (name, r.text)

    page = w.doc("Custom page", markdown="x\n")
    o.put(f"/api/documents/{page['id']}", json={"permission_mode": "custom", "visibility": "private"})
    doc_base = f"/api/objects/document/{page['id']}/invitations"
    dinv = o.post(doc_base, json={"role": "viewer"}).json()
    assert [i["id"] for i in o.get(doc_base).json()["items"]] == [dinv["id"]]
    for name in OUTSIDERS + ("member",):
        r = w.by_name(name).get(doc_base)
        assert r.status_code == 404, (name, r.text)


def test_list_share_links(w):
    o = w.c["owner"]
    page = w.doc("Shared", markdown="s\n")
    base = f"/api/objects/document/{page['id']}/share-links"
    a = o.post(base, json={"password": "pw-123456"}).json()
    b = o.post(base, json={"require_login": True}).json()
    o.post(f"/api/share-links/{b['id']}/revoke")
    r = o.get(base)
    assert r.status_code == 200
    items = r.json()["items"]
    assert [i["id"] for i in items] == [a["id"], b["id"]]
    assert items[0]["has_password"] is True and items[1]["revoked_at"] is not None
    assert a["token"] not in r.text and b["token"] not in r.text
    assert "token_hash" not in r.text and "password_hash" not in r.text
    r = w.c["member"].get(base)  # a workspace member reads the page but may not share it
    assert r.status_code == 403 and r.json()["error"] == "PERMISSION_DENIED"
    for name in ("other_tenant", "guest", "outsider"):
        assert w.c[name].get(base).status_code == 404, name
    assert w.anon.get(base).status_code == 401  # signing in comes first; nothing is revealed
