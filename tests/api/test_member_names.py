"""Workspace members and collaborators come with names (the settings page and share dialog show
people, not ids): ``email``/``display_name`` on members, ``subject_name``/``subject_email`` on
collaborators, for users and groups alike."""

from __future__ import annotations

from openkb.models import Group, GroupMember, User


def test_members_and_collaborators_carry_names(w):
    with w.committed() as s:
        users = {name: s.get(User, uid) for name, uid in w.users.items()}
        g = Group(tenant_id=w.tenant.id, name="Reviewers", created_by=w.users["owner"])
        s.add(g)
        s.flush()
        s.add(GroupMember(tenant_id=w.tenant.id, group_id=g.id, user_id=w.users["member"]))
        s.commit()
        group_id = g.id
    owner = w.c["owner"]

    r = owner.get(f"/api/workspaces/{w.ws['id']}/members")
    assert r.status_code == 200, r.text
    by_user = {m["user_id"]: m for m in r.json()["items"]}
    for name in ("owner", "admin", "member", "guest"):
        m = by_user[str(w.users[name])]
        assert (m["email"], m["display_name"]) == (users[name].email, users[name].display_name)

    # add and role change answer with the names too
    r = owner.post(f"/api/workspaces/{w.ws['id']}/members", json={"user_id": str(w.users["outsider"]), "role": "guest"})
    assert r.status_code == 201 and r.json()["email"] == users["outsider"].email, r.text
    r = owner.put(f"/api/workspaces/{w.ws['id']}/members/{w.users['outsider']}", json={"role": "member"})
    assert r.status_code == 200 and r.json()["display_name"] == users["outsider"].display_name, r.text

    kb = w.kb["id"]
    r = owner.post(
        f"/api/objects/knowledge_base/{kb}/collaborators",
        json={"subject_type": "user", "subject_id": str(w.users["guest"]), "role": "viewer"},
    )
    assert r.status_code == 201, r.text
    assert (r.json()["subject_name"], r.json()["subject_email"]) == (users["guest"].display_name, users["guest"].email)
    r = owner.post(
        f"/api/objects/knowledge_base/{kb}/collaborators",
        json={"subject_type": "group", "subject_id": str(group_id), "role": "editor"},
    )
    assert r.status_code == 201, r.text
    r = owner.put(f"/api/collaborators/{r.json()['id']}", json={"role": "viewer"})
    assert (r.json()["subject_name"], r.json()["subject_email"]) == ("Reviewers", None), r.text

    r = owner.get(f"/api/objects/knowledge_base/{kb}/collaborators")
    assert r.status_code == 200, r.text
    labels = {(c["subject_type"], c["subject_id"]): (c["subject_name"], c["subject_email"]) for c in r.json()["items"]}
    assert labels[("user", str(w.users["owner"]))] == (users["owner"].display_name, users["owner"].email)
    assert labels[("user", str(w.users["guest"]))] == (users["guest"].display_name, users["guest"].email)
    assert labels[("group", str(group_id))] == ("Reviewers", None)
