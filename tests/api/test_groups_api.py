"""/api/admin/groups: tenant admins manage their tenant's groups; every change audited; deleting a
group takes its collaborator grants with it; nothing crosses tenants."""

from __future__ import annotations

import pytest
from sqlmodel import select

from openkb.models import AuditLog, Collaborator, GroupMember
from tests.api.helpers import ALL_SCOPES, make_user_with_pat
from tests.content.http_world import HttpWorld, recording_queue

ADMIN_SCOPES = ALL_SCOPES


@pytest.fixture()
def w(live_server, committed):
    world = HttpWorld(live_server, committed)
    world.add_user("tadmin", scopes=ADMIN_SCOPES)
    with committed() as s:  # make it a tenant admin
        from openkb.models import TenantMembership

        tm = s.exec(select(TenantMembership).where(TenantMembership.user_id == world.users["tadmin"])).one()
        tm.role = "tenant_admin"
        s.add(tm)
        s.commit()
    user, token = make_user_with_pat(committed, world.other_tenant, scopes=ADMIN_SCOPES, role="tenant_admin")
    world.users["other_admin"] = user.id
    world.c["other_admin"] = world.client(token)
    user, token = make_user_with_pat(committed, world.tenant, scopes=("kb:read", "kb:write"), role="tenant_admin")
    world.c["tadmin_no_scope"] = world.client(token)
    yield world
    world.close()


def _audit(committed, object_id, action=None):
    with committed() as s:
        q = select(AuditLog).where(AuditLog.object_id == object_id)
        if action:
            q = q.where(AuditLog.action == action)
        return list(s.exec(q.order_by(AuditLog.created_at)).all())


def test_group_lifecycle_and_audit(w, committed):
    a = w.c["tadmin"]
    r = a.post("/api/admin/groups", json={"name": "  Writers "})
    assert r.status_code == 201, r.text
    g = r.json()
    assert g["name"] == "Writers" and g["member_count"] == 0 and g["tenant_id"] == str(w.tenant.id)
    assert a.post("/api/admin/groups", json={"name": "Writers"}).json()["error"] == "ALREADY_EXISTS"
    assert a.post("/api/admin/groups", json={"name": "Writers"}).status_code == 409
    assert a.post("/api/admin/groups", json={"name": ""}).status_code == 422
    assert a.post("/api/admin/groups", json={"name": "   "}).status_code == 422
    assert a.post("/api/admin/groups", json={"name": "x\u0000"}).status_code == 422
    other = a.post("/api/admin/groups", json={"name": "Readers"}).json()
    assert [x["name"] for x in a.get("/api/admin/groups").json()["items"]] == ["Readers", "Writers"]

    r = a.put(f"/api/admin/groups/{g['id']}", json={"name": "Authors"})
    assert r.status_code == 200 and r.json()["name"] == "Authors"
    r = a.put(f"/api/admin/groups/{g['id']}", json={"name": "Readers"})
    assert r.status_code == 409 and r.json()["error"] == "ALREADY_EXISTS"
    assert a.get(f"/api/admin/groups/{g['id']}").json()["name"] == "Authors"

    base = f"/api/admin/groups/{g['id']}/members"
    r = a.post(base, json={"user_id": str(w.users["member"])})
    assert r.status_code == 201 and r.json()["user_id"] == str(w.users["member"])
    assert a.post(base, json={"user_id": str(w.users["member"])}).status_code == 200  # already a member
    with committed() as s:
        from openkb.models import User

        guest_email = s.get(User, w.users["guest"]).email
    r = a.post(base, json={"email": guest_email.upper()})
    assert r.status_code == 201 and r.json()["email"] == guest_email
    assert a.post(base, json={}).status_code == 422
    assert a.post(base, json={"user_id": str(w.users["member"]), "email": guest_email}).status_code == 422
    # never across tenants: another tenant's user is not found
    r = a.post(base, json={"user_id": str(w.users["other_tenant"])})
    assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND"
    assert a.post(base, json={"email": "nobody-here@example.com"}).status_code == 404
    members = a.get(base).json()["items"]
    assert {m["user_id"] for m in members} == {str(w.users["member"]), str(w.users["guest"])}
    assert a.get(f"/api/admin/groups/{g['id']}").json()["member_count"] == 2

    assert a.delete(f"{base}/{w.users['guest']}").status_code == 204
    r = a.delete(f"{base}/{w.users['guest']}")
    assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND"
    assert [m["user_id"] for m in a.get(base).json()["items"]] == [str(w.users["member"])]

    actions = [(x.action, x.meta.get("before"), x.meta.get("after")) for x in _audit(committed, g["id"])]
    assert ("group.create", None, {"name": "Writers"}) in actions
    assert ("group.rename", {"name": "Writers"}, {"name": "Authors"}) in actions
    adds = [x for x in _audit(committed, g["id"], "group_member.add")]
    assert len(adds) == 2 and all(x.actor_user_id == w.users["tadmin"] for x in adds)
    removed = _audit(committed, g["id"], "group_member.remove")
    assert [x.meta["user_id"] for x in removed] == [str(w.users["guest"])]
    assert removed[0].meta["before"] == {"member": True} and removed[0].meta["after"] == {"member": False}

    assert a.delete(f"/api/admin/groups/{other['id']}").status_code == 204
    assert a.get(f"/api/admin/groups/{other['id']}").status_code == 404
    assert a.delete(f"/api/admin/groups/{other['id']}").status_code == 404


def test_deleting_a_group_removes_its_grants(w, committed):
    a, o = w.c["tadmin"], w.c["owner"]
    g = a.post("/api/admin/groups", json={"name": "Editors"}).json()
    a.post(f"/api/admin/groups/{g['id']}/members", json={"user_id": str(w.users["outsider"])})
    kb = w.new_kb(visibility="private")
    page = w.doc("Grant me", kb=kb, markdown="g\n")
    r = o.post(
        f"/api/objects/knowledge_base/{kb['id']}/collaborators",
        json={"subject_type": "group", "subject_id": g["id"], "role": "editor"},
    )
    assert r.status_code == 201, r.text
    grant = r.json()
    assert w.c["outsider"].get(f"/api/documents/{page['id']}").status_code == 200  # through the group
    # another tenant's group can't be granted here
    og = w.c["other_admin"].post("/api/admin/groups", json={"name": "Theirs"}).json()
    r = o.post(
        f"/api/objects/knowledge_base/{kb['id']}/collaborators",
        json={"subject_type": "group", "subject_id": og["id"], "role": "viewer"},
    )
    assert r.status_code == 404

    with recording_queue() as q:
        assert a.delete(f"/api/admin/groups/{g['id']}").status_code == 204
    assert q.jobs == []  # chunks name objects, not groups: like removing a collaborator, no re-index
    assert w.c["outsider"].get(f"/api/documents/{page['id']}").status_code == 404
    with committed() as s:
        assert s.exec(select(Collaborator).where(Collaborator.subject_id == g["id"])).all() == []
        assert s.exec(select(GroupMember).where(GroupMember.group_id == g["id"])).all() == []
    [removed] = _audit(committed, kb["id"], "collaborator.remove")
    assert removed.meta["collaborator_id"] == grant["id"] and removed.meta["reason"] == "group.delete"
    assert removed.meta["before"] == {"role": "editor"} and removed.meta["after"] == {"role": None}
    [deleted] = _audit(committed, g["id"], "group.delete")
    assert deleted.meta["before"]["name"] == "Editors"
    assert deleted.meta["before"]["members"] == [str(w.users["outsider"])]
    assert deleted.meta["before"]["grants"] == [
        {"object_type": "knowledge_base", "object_id": kb["id"], "role": "editor"}
    ]
    assert deleted.meta["after"] is None
    assert {
        c["subject_type"] for c in o.get(f"/api/objects/knowledge_base/{kb['id']}/collaborators").json()["items"]
    } == {"user"}


def test_who_may_manage_groups(w):
    g = w.c["tadmin"].post("/api/admin/groups", json={"name": "Team"}).json()
    routes = [
        ("get", "/api/admin/groups", None),
        ("post", "/api/admin/groups", {"name": "N"}),
        ("get", f"/api/admin/groups/{g['id']}", None),
        ("put", f"/api/admin/groups/{g['id']}", {"name": "M"}),
        ("delete", f"/api/admin/groups/{g['id']}", None),
        ("get", f"/api/admin/groups/{g['id']}/members", None),
        ("post", f"/api/admin/groups/{g['id']}/members", {"user_id": str(w.users["member"])}),
        ("delete", f"/api/admin/groups/{g['id']}/members/{w.users['member']}", None),
    ]

    def call(c, method, path, body):
        return c.request(method.upper(), path, json=body) if body is not None else c.request(method.upper(), path)

    for method, path, body in routes:
        r = call(w.anon, method, path, body)
        assert r.status_code == 401 and r.json()["error"] == "UNAUTHENTICATED", (method, path)
        for name in ("owner", "admin", "member", "guest", "outsider", "other_tenant"):  # not tenant admins
            r = call(w.c[name], method, path, body)
            assert r.status_code == 403 and r.json()["error"] in ("PERMISSION_DENIED", "INSUFFICIENT_SCOPE"), (
                name,
                method,
                path,
                r.text,
            )
        r = call(w.c["tadmin_no_scope"], method, path, body)
        assert r.status_code == 403 and r.json()["error"] == "INSUFFICIENT_SCOPE", (method, path)
    # another tenant's admin: the group does not exist for them, and their list is their own
    other = w.c["other_admin"]
    for method, path, body in routes[2:]:
        r = call(other, method, path, body)
        assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND", (method, path, r.text)
    assert g["id"] not in other.get("/api/admin/groups").text
    assert w.c["tadmin"].get(f"/api/admin/groups/{g['id']}").json()["name"] == "Team"  # untouched


def test_a_system_admin_manages_the_groups_of_the_tenant_they_act_in(w, committed):
    """docs/permissions.md#administrators: a system_admin administers any tenant, as on the other
    admin routes; signed into a tenant where they are a plain member, its groups are theirs to
    manage (they got 403 there while /api/admin/users answered them)."""
    from openkb.models import TenantMembership

    sysadmin, _ = make_user_with_pat(committed, w.other_tenant, scopes=ADMIN_SCOPES, role="system_admin")
    with committed() as s:
        s.add(TenantMembership(tenant_id=w.tenant.id, user_id=sysadmin.id, role="member"))
        s.commit()
    _, token = make_user_with_pat(committed, w.tenant, scopes=ADMIN_SCOPES, user=sysadmin)
    c = w.client(token)
    assert c.get("/api/admin/users").status_code == 200  # the other admin routes already did
    r = c.post("/api/admin/groups", json={"name": "Ops"})
    assert r.status_code == 201, r.text
    g = r.json()
    assert g["tenant_id"] == str(w.tenant.id)  # the tenant they act in
    assert c.post(f"/api/admin/groups/{g['id']}/members", json={"user_id": str(w.users["member"])}).status_code in (
        200,
        201,
    )
    assert [x["name"] for x in w.c["tadmin"].get("/api/admin/groups").json()["items"]] == ["Ops"]
    # the tenant's own admin sees the change; a group of a tenant they do not act in stays 404
    other = w.c["other_admin"].post("/api/admin/groups", json={"name": "Elsewhere"}).json()
    assert c.get(f"/api/admin/groups/{other['id']}").status_code == 404


def test_group_routes_document_their_errors(http):
    spec = http.get("/api/openapi.json").json()
    ops = [
        (p, m, op) for p, item in spec["paths"].items() if p.startswith("/api/admin/groups") for m, op in item.items()
    ]
    assert len(ops) == 8
    for path, method, op in ops:
        for code in ("401", "403", "404", "422"):
            assert op["responses"][code]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody"), (
                method,
                path,
                code,
            )
