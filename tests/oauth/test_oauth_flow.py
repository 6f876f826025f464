"""The OAuth 2.1 authorization server, driven over HTTP like an MCP client and a browser would
(docs/oauth.md): discovery, DCR with Cursor's redirect set, sign in + consent, code + PKCE S256,
refresh rotation and reuse detection, revocation, resource binding, and the token check /mcp uses."""

from __future__ import annotations

import secrets
import uuid
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import text
from sqlmodel import select

from openkb.errors import Unauthenticated
from openkb.models import AuditLog, McpOAuthGrant
from openkb.models._base import utcnow
from openkb.oauth.tokens import verify_access_token
from tests.api.helpers import login, make_login_user
from tests.oauth.conftest import CURSOR_REDIRECTS, hidden_fields, redirect_params


@pytest.fixture()
def user(committed):
    return make_login_user(committed)


def check(committed, token: str, resource: str):
    with committed() as s:
        return verify_access_token(s, token, resource=resource)


def audit_actions(committed, grant_id) -> list[str]:
    with committed() as s:
        return [
            a.action
            for a in s.exec(select(AuditLog).where(AuditLog.object_id == grant_id).order_by(AuditLog.created_at)).all()
        ]


def test_discovery_metadata_and_cors(oauth_client, base):
    prm, meta = oauth_client.meta["prm"], oauth_client.meta["as"]
    assert prm["resource"] == base + "/mcp"
    assert prm["authorization_servers"] == [base]
    assert set(prm["scopes_supported"]) == {"kb:read", "kb:search", "doc:read", "doc:write", "facts:read"}
    assert prm["bearer_methods_supported"] == ["header"]
    root = httpx.get(base + "/.well-known/oauth-protected-resource")
    assert root.json() == prm
    assert meta["issuer"] == base and not meta["issuer"].endswith("/")
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert {"authorization_code", "refresh_token"} <= set(meta["grant_types_supported"])
    assert meta["response_types_supported"] == ["code"]
    assert "none" in meta["token_endpoint_auth_methods_supported"]
    assert meta["client_id_metadata_document_supported"] is True
    for k in ("authorization_endpoint", "token_endpoint", "registration_endpoint", "revocation_endpoint"):
        assert meta[k].startswith(base + "/oauth/")
    # CORS for browser-based clients, on metadata and on the token endpoint's preflight and errors
    r = httpx.get(base + "/.well-known/oauth-authorization-server", headers={"Origin": "https://app.example"})
    assert r.headers["access-control-allow-origin"] == "*"
    pre = httpx.options(
        base + "/oauth/token", headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
    )
    assert pre.status_code == 204 and pre.headers["access-control-allow-origin"] == "*"
    bad = httpx.post(base + "/oauth/token", data={"grant_type": "password"})
    assert bad.status_code == 400 and bad.json()["error"] == "unsupported_grant_type"
    assert bad.headers["access-control-allow-origin"] == "*"


def test_dcr_accepts_what_cursor_sends_and_refuses_bad_redirects(oauth_client):
    got = oauth_client.register(CURSOR_REDIRECTS, client_name="Cursor")
    assert got["redirect_uris"] == CURSOR_REDIRECTS
    assert got["token_endpoint_auth_method"] == "none" and got["client_id"].startswith("kbcl_")
    for bad in (["javascript:alert(1)"], ["http://evil.example/cb"], ["https://x.example/cb#frag"], []):
        r = httpx.post(oauth_client.meta["as"]["registration_endpoint"], json={"redirect_uris": bad})
        assert r.status_code == 400, (bad, r.text)
        assert r.json()["error"] == "invalid_redirect_uri", r.json()
    r = httpx.post(
        oauth_client.meta["as"]["registration_endpoint"], content=b"{nope", headers={"content-type": "application/json"}
    )
    assert r.json()["error"] == "invalid_client_metadata"


def test_full_flow_login_consent_pkce_refresh_reuse(oauth_client, user, committed):
    oauth_client.redirect_uri = "http://127.0.0.1:53682/callback"
    oauth_client.register(["http://127.0.0.1:8787/callback", *CURSOR_REDIRECTS])  # loopback: any port
    verifier = secrets.token_urlsafe(48)

    page = oauth_client.start(verifier)
    assert page.status_code == 200 and 'name="password"' in page.text
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    # signing in may redirect to the client at once (consent remembered): the form may go there
    assert "form-action 'self' http://127.0.0.1:53682;" in csp
    for loads in ("<script", "<link", "src=", "href=", "url("):  # the page loads nothing, from anywhere
        assert loads not in page.text
    forged = oauth_client.browser.post(
        oauth_client.authorize_path(),
        data={**hidden_fields(page.text), "csrf_token": "forged", "email": user.email, "password": user.password},
    )
    assert forged.status_code == 403 and "consent" not in forged.text.lower()
    wrong = oauth_client.submit(page, email=user.email, password="wrong password")
    assert wrong.status_code == 401 and 'name="password"' in wrong.text

    consent = oauth_client.submit(page, email=user.email, password=user.password)
    assert consent.status_code == 200, consent.text
    assert "Test IDE" in consent.text and "127.0.0.1:53682" in consent.text and user.email in consent.text
    for scope in ("kb:read", "kb:search", "doc:read"):
        assert scope in consent.text
    assert "doc:write" not in consent.text  # never granted unless asked for
    assert "form-action 'self' http://127.0.0.1:53682" in consent.headers["content-security-policy"]
    no_csrf = oauth_client.browser.post(
        oauth_client.authorize_path(), data={**hidden_fields(consent.text), "csrf_token": "x", "action": "allow"}
    )
    assert no_csrf.status_code == 403
    q = redirect_params(oauth_client.submit(consent, action="allow"))
    params = oauth_client.authorize_params(verifier)
    assert q["iss"] == oauth_client.meta["issuer"] and set(q) == {"code", "state", "iss"}

    # PKCE: a wrong verifier is refused, the right one works once
    bad = oauth_client.exchange(q["code"], secrets.token_urlsafe(48))
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_grant"
    r = oauth_client.exchange(q["code"], verifier)
    assert r.status_code == 200, r.text
    assert r.headers["cache-control"] == "no-store"
    first = r.json()
    assert first["token_type"] == "Bearer" and first["expires_in"] == 3600
    assert first["scope"] == "doc:read kb:read kb:search"
    g = check(committed, first["access_token"], oauth_client.resource)
    assert g.user_id == user.user_id and g.client_id == oauth_client.client_id
    assert g.scopes == frozenset({"kb:read", "kb:search", "doc:read"})
    assert g.principal().scopes == g.scopes
    with pytest.raises(Unauthenticated):  # RFC 8707: minted for /mcp, not for anything else
        check(committed, first["access_token"], "http://127.0.0.1:1/other")
    with pytest.raises(Unauthenticated):
        check(committed, "kbat_" + secrets.token_urlsafe(32), oauth_client.resource)

    # consent is remembered: the next authorization of the same scopes redirects straight back
    v2 = secrets.token_urlsafe(48)
    again = oauth_client.start(v2)
    assert again.status_code == 302 and "code" in redirect_params(again)
    assert params["state"] != redirect_params(again)["state"]  # each request carries its own state

    # rotation: a new refresh token each time; the old access token stays valid until it expires
    r2 = oauth_client.refresh(first["refresh_token"])
    assert r2.status_code == 200, r2.text
    second = r2.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert check(committed, second["access_token"], oauth_client.resource).grant_id == g.grant_id

    # reuse of the rotated token: the whole grant is revoked, the newest tokens die with it
    reuse = oauth_client.refresh(first["refresh_token"])
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    assert oauth_client.refresh(second["refresh_token"]).json()["error"] == "invalid_grant"
    with pytest.raises(Unauthenticated):
        check(committed, second["access_token"], oauth_client.resource)
    actions = audit_actions(committed, g.grant_id)
    assert "oauth.grant_issued" in actions and "oauth.token_refreshed" in actions
    assert "oauth.refresh_reuse_detected" in actions


def test_pkce_and_request_errors_redirect_back(oauth_client, user):
    """To a client the user authorized (an active grant); anyone else's get a page with a link
    (tests/oauth/test_oauth_redirect_trust.py)."""
    oauth_client.register()
    oauth_client.tokens(user.email, user.password)
    v = secrets.token_urlsafe(48)
    plain = redirect_params(oauth_client.start(v, code_challenge=v, code_challenge_method="plain"))
    assert plain["error"] == "invalid_request" and "S256" in plain["error_description"]
    missing = redirect_params(oauth_client.start(v, code_challenge=None, code_challenge_method=None))
    assert missing["error"] == "invalid_request"
    other = redirect_params(oauth_client.start(v, resource="https://elsewhere.example/mcp"))
    assert other["error"] == "invalid_target"
    other = redirect_params(oauth_client.start(v, resource="https://elsewhere.example/"))
    assert other["error"] == "invalid_target"
    scope = redirect_params(oauth_client.start(v, scope="kb:read admin"))
    assert scope["error"] == "invalid_scope"
    # an unregistered redirect URI or an unknown client is an error page, never a redirect
    page = oauth_client.start(v, redirect_uri="https://attacker.example/cb")
    assert page.status_code == 400 and "not registered" in page.text
    page = oauth_client.start(v, client_id="kbcl_unknown")
    assert page.status_code == 400
    # deny (a new scope: consent is asked again)
    consent = oauth_client.start(v, scope="kb:read doc:write")
    denied = redirect_params(oauth_client.submit(consent, action="deny"))
    assert denied["error"] == "access_denied"


def test_code_is_single_use_and_bound_to_resource_and_redirect(oauth_client, user, committed):
    oauth_client.register()
    v = secrets.token_urlsafe(48)
    code = oauth_client.get_code(user.email, user.password, v)["code"]
    wrong_res = oauth_client.exchange(code, v, resource="https://elsewhere.example/mcp")
    assert wrong_res.status_code == 400 and wrong_res.json()["error"] == "invalid_target"
    wrong_redirect = oauth_client.token(
        grant_type="authorization_code", code=code, code_verifier=v, redirect_uri="http://127.0.0.1:9/other"
    )
    assert wrong_redirect.json()["error"] == "invalid_grant"
    ok = oauth_client.exchange(code, v)
    assert ok.status_code == 200
    replay = oauth_client.exchange(code, v)
    assert replay.json()["error"] == "invalid_grant"
    with pytest.raises(Unauthenticated):  # a replayed code revokes what it granted
        check(committed, ok.json()["access_token"], oauth_client.resource)


def test_revocation(oauth_client, user, committed):
    oauth_client.register()
    t = oauth_client.tokens(user.email, user.password)
    assert oauth_client.revoke(t["access_token"]).status_code == 200
    with pytest.raises(Unauthenticated):
        check(committed, t["access_token"], oauth_client.resource)
    t2 = oauth_client.refresh(t["refresh_token"]).json()  # revoking an access token leaves the grant
    g = check(committed, t2["access_token"], oauth_client.resource)
    assert oauth_client.revoke(t2["refresh_token"]).status_code == 200
    with pytest.raises(Unauthenticated):
        check(committed, t2["access_token"], oauth_client.resource)
    assert "oauth.grant_revoked" in audit_actions(committed, g.grant_id)
    assert oauth_client.revoke("kbrt_unknown").status_code == 200  # RFC 7009 §2.2


def test_expired_token_and_suspended_user_are_refused(oauth_client, user, committed):
    oauth_client.register()
    t = oauth_client.tokens(user.email, user.password)
    assert check(committed, t["access_token"], oauth_client.resource).user_id == user.user_id
    with committed() as s:
        s.execute(text("UPDATE users SET status = 'suspended' WHERE id = :id"), {"id": user.user_id})
        s.commit()
    with pytest.raises(Unauthenticated):
        check(committed, t["access_token"], oauth_client.resource)
    assert oauth_client.refresh(t["refresh_token"]).json()["error"] == "invalid_grant"
    with committed() as s:
        s.execute(text("UPDATE users SET status = 'active' WHERE id = :id"), {"id": user.user_id})
        s.execute(
            text("UPDATE mcp_oauth_access_tokens SET expires_at = :t WHERE token_hash = encode(sha256(:tok), 'hex')"),
            {"t": utcnow() - timedelta(seconds=1), "tok": t["access_token"].encode()},
        )
        s.commit()
    with pytest.raises(Unauthenticated, match="expired"):
        check(committed, t["access_token"], oauth_client.resource)


def test_user_lists_and_revokes_their_grants(oauth_client, user, committed, base):
    oauth_client.register()
    t = oauth_client.tokens(user.email, user.password)
    other = make_login_user(committed)
    with login(base, user.email) as me, login(base, other.email) as them:
        items = me.get("/api/me/oauth-grants").json()["items"]
        assert [i["client_name"] for i in items] == ["Test IDE"]
        assert items[0]["scopes"] == ["doc:read", "kb:read", "kb:search"]
        gid = items[0]["id"]
        assert them.get("/api/me/oauth-grants").json()["items"] == []
        assert them.delete(f"/api/me/oauth-grants/{gid}").status_code == 404
        assert me.delete(f"/api/me/oauth-grants/{uuid.uuid4()}").status_code == 404
        assert me.delete(f"/api/me/oauth-grants/{gid}").status_code == 204
        assert me.get("/api/me/oauth-grants").json()["items"] == []
    with pytest.raises(Unauthenticated):
        check(committed, t["access_token"], oauth_client.resource)
    with committed() as s:
        grant = s.get(McpOAuthGrant, uuid.UUID(gid))
        assert grant is not None and grant.status == "revoked" and grant.revoked_at is not None
    assert "oauth.grant_revoked" in audit_actions(committed, uuid.UUID(gid))
    # revoked: consent is asked again
    page = oauth_client.start(secrets.token_urlsafe(48))
    assert page.status_code == 200


def test_expired_rows_of_a_grant_are_dropped_when_it_is_used(oauth_client, user, committed):
    """No sweeper job: using a grant removes its expired access tokens, refresh tokens and codes."""
    oauth_client.register()
    t = oauth_client.tokens(user.email, user.password)
    gid = check(committed, t["access_token"], oauth_client.resource).grant_id
    past = utcnow() - timedelta(days=1)
    with committed() as s:
        for table in ("mcp_oauth_access_tokens", "mcp_oauth_refresh_tokens", "mcp_oauth_authorization_codes"):
            s.execute(text(f"UPDATE {table} SET expires_at = :t WHERE grant_id = :g"), {"t": past, "g": gid})
        s.commit()
    assert oauth_client.refresh(t["refresh_token"]).json()["error"] == "invalid_grant"  # expired
    oauth_client.get_code(user.email, user.password, secrets.token_urlsafe(48))  # consent remembered: a new code
    t2 = oauth_client.tokens(user.email, user.password)
    assert check(committed, t2["access_token"], oauth_client.resource).grant_id == gid
    with committed() as s:
        counts = {
            table: s.execute(
                text(f"SELECT count(*) FROM {table} WHERE grant_id = :g AND expires_at <= now()"), {"g": gid}
            ).scalar_one()
            for table in ("mcp_oauth_access_tokens", "mcp_oauth_refresh_tokens", "mcp_oauth_authorization_codes")
        }
    assert counts == {"mcp_oauth_access_tokens": 0, "mcp_oauth_refresh_tokens": 0, "mcp_oauth_authorization_codes": 0}


def test_claude_style_confidential_client_and_its_own_scope(oauth_client, user):
    """claude.ai registers with client_secret_basic and a scope of its own ("claudeai"); a server
    that refuses either fails the whole connection. PKCE stays required for it too."""
    oauth_client.redirect_uri = "https://claude.ai/api/mcp/auth_callback"
    got = oauth_client.register(
        [oauth_client.redirect_uri],
        token_endpoint_auth_method="client_secret_basic",
        scope="claudeai",
        client_name="Claude",
    )
    assert got["token_endpoint_auth_method"] == "client_secret_basic" and got["client_secret"].startswith("kbcs_")
    assert set(got["scope"].split()) == {"kb:read", "kb:search", "doc:read", "doc:write", "facts:read"}
    secret = got["client_secret"]
    v = secrets.token_urlsafe(48)
    q = oauth_client.get_code(user.email, user.password, v, scope="kb:read kb:search offline_access")
    form = {
        "grant_type": "authorization_code",
        "code": q["code"],
        "code_verifier": v,
        "redirect_uri": oauth_client.redirect_uri,
        "resource": oauth_client.resource,
    }
    token_url = oauth_client.meta["as"]["token_endpoint"]
    no_secret = httpx.post(token_url, data={**form, "client_id": oauth_client.client_id})
    assert no_secret.status_code == 401 and no_secret.json()["error"] == "invalid_client"
    assert no_secret.headers["www-authenticate"].startswith("Basic")
    wrong = httpx.post(token_url, data=form, auth=(oauth_client.client_id, "kbcs_wrong"))
    assert wrong.status_code == 401
    ok = httpx.post(token_url, data=form, auth=(oauth_client.client_id, secret))
    assert ok.status_code == 200, ok.text
    assert ok.json()["scope"] == "kb:read kb:search"  # offline_access dropped, refresh token issued anyway
    post = httpx.post(
        token_url,
        data={
            "grant_type": "refresh_token",
            "refresh_token": ok.json()["refresh_token"],
            "client_id": oauth_client.client_id,
            "client_secret": secret,
        },
    )
    assert post.status_code == 200, post.text  # client_secret_post works as well
    revoke = httpx.post(
        oauth_client.meta["as"]["revocation_endpoint"],
        data={"token": post.json()["refresh_token"]},
        auth=(oauth_client.client_id, "kbcs_wrong"),
    )
    assert revoke.status_code == 401


def test_a_client_that_omits_resource_gets_tokens_bound_to_mcp(oauth_client, user, committed):
    """RFC 8707 §2 default: a client that sends no ``resource`` (Codex did) still connects, and
    its tokens are bound to /mcp like everyone's (refused for any other resource)."""
    oauth_client.register()
    v = secrets.token_urlsafe(48)
    q = oauth_client.get_code(user.email, user.password, v, resource=None)
    r = oauth_client.token(
        grant_type="authorization_code", code=q["code"], code_verifier=v, redirect_uri=oauth_client.redirect_uri
    )
    assert r.status_code == 200, r.text
    g = check(committed, r.json()["access_token"], oauth_client.resource)
    assert g.resource == oauth_client.resource
    same = oauth_client.resource.replace("http://", "HTTP://") + "/"  # canonical form: case of scheme, slash
    assert check(committed, r.json()["access_token"], same).grant_id == g.grant_id
    with pytest.raises(Unauthenticated):
        check(committed, r.json()["access_token"], "https://elsewhere.example/mcp")
