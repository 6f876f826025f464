"""The share panel's picker (``GET /api/objects/<type>/<id>/collaborator-candidates``) reveals
only people the caller may already see: the object's managers get the members of its workspace
(never a tenant user outside it, never another tenant's) and the tenant's groups; a manager who
is a workspace guest gets nothing; a reader is refused, an outsider gets 404."""

from __future__ import annotations

from openkb.models import Group, User


def _candidates(client, kb_id: str, q: str = "", object_type: str = "knowledge_base") -> list[dict]:
    r = client.get(f"/api/objects/{object_type}/{kb_id}/collaborator-candidates", params={"q": q})
    assert r.status_code == 200, r.text
    return r.json()["items"]


def test_candidates_are_the_workspace_members_and_the_tenant_groups(w):
    with w.committed() as s:
        users = {name: s.get(User, uid) for name, uid in w.users.items()}
        mine = Group(tenant_id=w.tenant.id, name="Reviewers 100%", created_by=w.users["owner"])
        theirs = Group(tenant_id=w.other_tenant.id, name="Reviewers elsewhere", created_by=w.users["other_tenant"])
        s.add_all([mine, theirs])
        s.commit()
        mine_id = str(mine.id)
    kb = w.kb["id"]
    owner = w.c["owner"]

    got = _candidates(owner, kb)
    users_found = {c["subject_id"]: c for c in got if c["subject_type"] == "user"}
    assert set(users_found) == {str(w.users[n]) for n in ("owner", "admin", "member", "guest")}
    m = users_found[str(w.users["member"])]
    assert (m["name"], m["email"]) == (users["member"].display_name, users["member"].email)
    groups_found = [(c["subject_id"], c["name"], c["email"]) for c in got if c["subject_type"] == "group"]
    assert groups_found == [(mine_id, "Reviewers 100%", None)]  # never another tenant's group

    # by a part of the email or the name, case-insensitively; LIKE wildcards are literal
    part = users["member"].email.split("@")[0][-6:].upper()
    assert [c["subject_id"] for c in _candidates(owner, kb, part)] == [str(w.users["member"])]
    assert [c["subject_id"] for c in _candidates(owner, kb, "100%")] == [mine_id]
    assert _candidates(owner, kb, "_%") == []
    assert _candidates(owner, kb, users["outsider"].email) == []  # in the tenant, not in the workspace

    # a document's managers too (the same rule)
    doc = w.doc("Picked")
    assert str(w.users["member"]) in {c["subject_id"] for c in _candidates(owner, doc["id"], object_type="document")}


def test_only_managers_who_may_list_members_see_candidates(w):
    kb = w.kb["id"]
    url = f"/api/objects/knowledge_base/{kb}/collaborator-candidates"
    assert w.c["member"].get(url).status_code == 403  # reads the knowledge base, may not manage it
    assert w.c["outsider"].get(url).status_code == 404  # cannot see it at all
    assert w.c["other_tenant"].get(url).status_code == 404
    assert w.anon.get(url).status_code in (401, 404)

    # a guest made manager of the knowledge base may manage it, but not list the workspace's members
    r = w.c["owner"].post(
        f"/api/objects/knowledge_base/{kb}/collaborators",
        json={"subject_type": "user", "subject_id": str(w.users["guest"]), "role": "manager"},
    )
    assert r.status_code == 201, r.text
    assert w.c["guest"].get(f"/api/workspaces/{w.ws['id']}/members").status_code == 403
    assert _candidates(w.c["guest"], kb) == []
