"""Personal access tokens over HTTP: create/list/revoke, Bearer auth, scopes, expiry."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import text
from sqlmodel import select

from openkb.models import McpPersonalAccessToken
from openkb.security import hash_token
from tests.api.helpers import bearer_client, login, make_login_user, make_user_with_pat


@pytest.fixture()
def user_client(http, committed):
    a = make_login_user(committed)
    with login(http, a.email) as c:
        yield a, c


def test_create_list_revoke(live_server, user_client, committed):
    a, c = user_client
    r = c.post("/api/me/tokens", json={"name": "ci script", "scopes": ["kb:read", "doc:read"]})
    assert r.status_code == 201, r.text
    body = r.json()
    token = body["token"]
    assert token.startswith("kbpat_") and body["scopes"] == ["doc:read", "kb:read"]
    with committed() as s:
        row = s.get(McpPersonalAccessToken, body["id"])
        assert row.token_hash == hash_token(token) and token not in str(row.model_dump())

    listed = c.get("/api/me/tokens").json()["items"]
    assert [t["id"] for t in listed] == [body["id"]]
    assert "token" not in listed[0] and "token_hash" not in listed[0] and listed[0]["status"] == "active"

    with bearer_client(live_server, token) as b:
        me = b.get("/api/auth/me").json()
        assert me["user"]["id"] == str(a.user_id) and me["auth_method"] == "token"
        assert me["scopes"] == ["doc:read", "kb:read"] and me["csrf_token"] is None
        assert c.delete(f"/api/me/tokens/{body['id']}").status_code == 204
        r = b.get("/api/auth/me")  # revoked: fails on its next use
        assert r.status_code == 401 and r.json()["error"] == "UNAUTHENTICATED"
        assert r.headers["www-authenticate"] == "Bearer"
    assert c.get("/api/me/tokens").json()["items"][0]["status"] == "revoked"
    with committed() as s:
        from openkb.models import AuditLog

        acts = [
            r.action
            for r in s.exec(
                select(AuditLog).where(AuditLog.object_id == uuid.UUID(body["id"])).order_by(AuditLog.created_at)
            )
        ]
    assert acts == ["pat.created", "pat.revoked"]


def test_bearer_needs_no_csrf_and_wins_over_cookie(live_server, committed):
    user, token = make_user_with_pat(committed, scopes=["kb:read"])
    with bearer_client(live_server, token) as b:
        tid = b.get("/api/me/tokens").json()["items"][0]["id"]
        # an unsafe method with a Bearer token needs no X-CSRF-Token
        assert b.delete(f"/api/me/tokens/{tid}").status_code == 204


def test_token_cannot_mint_tokens(live_server, committed):
    _, token = make_user_with_pat(committed, scopes=["kb:read", "admin"])
    with bearer_client(live_server, token) as b:
        r = b.post("/api/me/tokens", json={"name": "escalate", "scopes": ["doc:write"]})
    assert r.status_code == 403 and r.json()["error"] == "INSUFFICIENT_SCOPE"


def test_other_users_token_is_not_found(user_client, committed):
    _, c = user_client
    other, _ = make_user_with_pat(committed)
    with committed() as s:
        tid = s.exec(select(McpPersonalAccessToken.id).where(McpPersonalAccessToken.user_id == other.id)).one()
    r = c.delete(f"/api/me/tokens/{tid}")
    assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND"
    r = c.delete("/api/me/tokens/not-a-uuid")
    assert r.status_code == 422 and r.json()["error"] == "VALIDATION_ERROR"


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "scopes": ["kb:everything"]},
        {"name": "x", "scopes": []},
        {"name": "", "scopes": ["kb:read"]},
        {"name": "n" * 1001, "scopes": ["kb:read"]},
        {"scopes": ["kb:read"]},
        {"name": "x", "scopes": ["kb:read"], "expires_at": "2001-01-01T00:00:00Z"},
        {"name": "x", "scopes": ["kb:read"], "expires_at": "2099-01-01T00:00:00"},  # no timezone
        {"name": "x", "scopes": ["kb:read"], "expires_at": "soon"},
        {"name": "x", "scopes": ["kb:read"], "surprise": 1},
    ],
)
def test_bad_token_requests_are_422(user_client, body):
    _, c = user_client
    r = c.post("/api/me/tokens", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "VALIDATION_ERROR"


def test_expired_token_fails(live_server, user_client, committed):
    _, c = user_client
    soon = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    body = c.post("/api/me/tokens", json={"name": "short", "scopes": ["kb:read"], "expires_at": soon}).json()
    with bearer_client(live_server, body["token"]) as b:
        assert b.get("/api/auth/me").status_code == 200
        with committed() as s:
            s.execute(
                text("UPDATE mcp_personal_access_tokens SET expires_at = now() - interval '1 second' WHERE id = :i"),
                {"i": body["id"]},
            )
            s.commit()
        assert b.get("/api/auth/me").status_code == 401
    assert c.get("/api/me/tokens").json()["items"][0]["status"] == "expired"


def test_malformed_authorization_is_401(live_server):
    for header in (
        "Bearer kbpat_doesnotexist",
        "Bearer",
        "Bearer " + "x" * 500,
        "Basic dXNlcjpwdw==",
        "kbpat_noscheme",
    ):
        with httpx.Client(base_url=live_server, headers={"Authorization": header}) as c:
            r = c.get("/api/auth/me")
        assert r.status_code == 401, header
        assert r.json()["error"] == "UNAUTHENTICATED" and r.headers["www-authenticate"] == "Bearer"


def test_bad_bearer_is_401_even_on_public_routes(live_server):
    """A broken token must not silently degrade to anonymous."""
    with httpx.Client(base_url=live_server, headers={"Authorization": "Bearer kbpat_nope"}) as c:
        r = c.post("/api/auth/logout")
    assert r.status_code == 401


def test_suspended_owner_token_fails(live_server, committed):
    user, token = make_user_with_pat(committed, scopes=["kb:read"])
    with bearer_client(live_server, token) as b:
        assert b.get("/api/auth/me").status_code == 200
        with committed() as s:
            s.execute(text("UPDATE users SET status = 'suspended' WHERE id = :i"), {"i": user.id})
            s.commit()
        assert b.get("/api/auth/me").status_code == 401


def test_last_used_at_recorded(live_server, committed):
    user, token = make_user_with_pat(committed, scopes=["kb:read"])
    with bearer_client(live_server, token) as b:
        b.get("/api/auth/me")
    with committed() as s:
        row = s.exec(select(McpPersonalAccessToken).where(McpPersonalAccessToken.user_id == user.id)).one()
        assert row.last_used_at is not None


def test_admin_routes_need_admin_scope(live_server, committed):
    """``require_scopes``: an admin's token without ``admin`` can't use admin routes."""
    admin, narrow = make_user_with_pat(committed, role="tenant_admin", scopes=["kb:read"])
    _, wide = make_user_with_pat(committed, user=admin, scopes=["kb:read", "admin"])
    with bearer_client(live_server, narrow) as b:
        r = b.get("/api/admin/users")
        assert r.status_code == 403 and r.json()["error"] == "INSUFFICIENT_SCOPE"
    with bearer_client(live_server, wide) as b:
        assert b.get("/api/admin/users").status_code == 200
