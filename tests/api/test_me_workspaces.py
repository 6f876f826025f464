"""``GET /api/auth/me`` (also ``/api/me``) lists the caller's workspaces with its role there."""

from __future__ import annotations

from tests.api.helpers import login, make_login_user


def test_me_lists_workspaces_with_roles(w, committed, live_server):
    second = w.c["member"].post("/api/workspaces", json={"name": "Member's own"}).json()
    for path in ("/api/auth/me", "/api/me"):
        r = w.c["member"].get(path)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["user"]["id"] == str(w.users["member"]) and body["tenant_roles"]  # what was there stays
        assert body["workspaces"] == [
            {"id": w.ws["id"], "name": "Team space", "slug": w.ws["slug"], "role": "member"},
            {"id": second["id"], "name": "Member's own", "slug": second["slug"], "role": "owner"},
        ]
    assert [x["role"] for x in w.c["guest"].get("/api/me").json()["workspaces"]] == ["guest"]
    assert w.c["owner"].get("/api/me").json()["workspaces"][0]["role"] == "owner"
    for name in ("outsider", "other_tenant"):  # in no workspace of theirs
        assert w.c[name].get("/api/me").json()["workspaces"] == [], name
    for path in ("/api/auth/me", "/api/me"):
        r = w.anon.get(path)
        assert r.status_code == 401 and r.json()["error"] == "UNAUTHENTICATED"
    acct = make_login_user(committed)  # a cookie session answers the same
    with login(live_server, acct.email) as c:
        me = c.get("/api/me").json()
        assert me["auth_method"] == "session" and me["workspaces"] == [] and me["csrf_token"]
