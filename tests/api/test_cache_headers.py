"""API answers are not kept by caches unless their route says so (server/nostore.py,
docs/web.md#security): the account with its CSRF token, a token shown once, private pages."""

from __future__ import annotations

from tests.api.helpers import login, make_login_user


def test_api_answers_say_no_store_unless_their_route_chose_otherwise(http, committed, live_server):
    assert http.get("/api/auth/me").headers["cache-control"] == "no-store"  # an error too
    user = make_login_user(committed)
    with login(live_server, user.email) as c:
        me = c.get("/api/me")
        assert me.status_code == 200 and me.headers["cache-control"] == "no-store"
        token = c.post("/api/me/tokens", json={"name": "cli", "scopes": ["kb:read"]})
        assert token.status_code == 201 and token.headers["cache-control"] == "no-store"
    assert http.post("/retrieval", json={}).headers["cache-control"] == "no-store"
    # the web app's page sets its own (revalidate), and so do the docs page and the health check
    assert http.get("/").headers["cache-control"] == "no-cache"
    assert "no-store" not in http.get("/healthz").headers.get("cache-control", "")
