"""The OAuth-grant alternative to ``kbapp_`` (docs/apps.md#oauth), over HTTP on the live server:
an installation's own OAuth client, the authorization code + PKCE flow of the MCP authorization
server with ``resource=<base>/api/apps/v1`` and ``scope=apps``, consent by the installation's
user only, the ``kbat_`` token acting as the installation (switches, changes, quotas), tokens
that never cross between ``/mcp`` and the apps API, and revocation that applies at once."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlmodel import Session

from openkb.accounts.deletion import delete_user
from openkb.apps import oauth as app_oauth
from openkb.apps import quotas, registry
from openkb.apps.client import AppApiError, KnowledgeClient
from openkb.config import Settings
from openkb.errors import OAuthProtocolError, Unauthenticated
from openkb.models import Tenant
from openkb.oauth import grants
from openkb.permissions import Principal
from tests.api.helpers import PASSWORD, login, make_login_user
from tests.apps.conftest import SECRET
from tests.factories import make_tenant, make_user
from tests.oauth.conftest import OAuthClient, redirect_params, s256
from tests.test_cli import assert_one_line_error, db_env, run  # noqa: F401 - db_env is a fixture

APP_REDIRECT = "http://127.0.0.1:9/app-callback"


@dataclass
class AppOAuthClient(OAuthClient):
    """The scripted OAuth client of tests/oauth, asking for the apps API instead of /mcp."""

    redirect_uri: str = APP_REDIRECT

    @property
    def resource(self) -> str:
        return self.base + "/api/apps/v1"

    def authorize_params(self, verifier: str, **over: str) -> dict[str, str]:
        return super().authorize_params(verifier, **{"scope": "apps", **over})


@pytest.fixture(scope="module")
def mcommitted(engine):
    return lambda: Session(engine, expire_on_commit=False)


@pytest.fixture(scope="module")
def world(live_server, app_ctx, mcommitted):
    """APP_BASE_URL = the live server (the resource URLs are built from it), an owner with an
    installed app and its OAuth client, and a second user of the same tenant."""
    before = app_ctx.settings.app_base_url
    app_ctx.settings.app_base_url = live_server
    owner, other = make_login_user(mcommitted), make_login_user(mcommitted)
    user = login(live_server, owner.email)
    r = user.post(
        "/api/apps/v1/apps",
        json={"name": f"oauth-diary-{secrets.token_hex(3)}", "permissions": ["collections.write:diary"]},
    )
    assert r.status_code == 201, r.text
    r = user.post("/api/apps/v1/installations", json={"app": r.json()["id"]})
    assert r.status_code == 201, r.text
    inst = r.json()["installation"]
    r = user.put(f"/api/apps/v1/installations/{inst['id']}/oauth-client", json={"redirect_uris": [APP_REDIRECT]})
    assert r.status_code == 200, r.text
    yield {
        "base": live_server,
        "user": user,
        "owner": owner,
        "other": other,
        "inst": inst,
        "client": r.json(),
        "committed": mcommitted,
    }
    user.close()
    app_ctx.settings.app_base_url = before


def app_client(w: dict[str, Any]) -> AppOAuthClient:
    c = AppOAuthClient(w["base"])
    c.client_id = w["client"]["client_id"]
    return c


def app_tokens(w: dict[str, Any]) -> dict[str, Any]:
    c = app_client(w)
    try:
        return c.tokens(w["owner"].email, PASSWORD)
    finally:
        c.close()


def knowledge(w: dict[str, Any], token: str) -> KnowledgeClient:
    return KnowledgeClient(w["base"], token)


def collections_status(w: dict[str, Any], token: str) -> int:
    r = httpx.post(
        w["base"] + "/api/apps/v1/knowledge/collections.list",
        json={},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    if r.status_code == 401:  # RFC 9728: the challenge names the apps API's resource metadata
        prm = w["base"] + "/.well-known/oauth-protected-resource/api/apps/v1"
        assert r.headers["www-authenticate"] == f'Bearer resource_metadata="{prm}"', r.headers
    return r.status_code


def switch(w: dict[str, Any], permission: str, enabled: bool) -> None:
    r = w["user"].put(
        f"/api/apps/v1/installations/{w['inst']['id']}/grants", json={"permission": permission, "enabled": enabled}
    )
    assert r.status_code == 200, r.text


def test_the_installation_client_and_its_metadata(world) -> None:
    base, got = world["base"], world["client"]
    assert got["client_id"].startswith("kbcl_") and got["scope"] == "apps"
    assert got["resource"] == base + "/api/apps/v1" and got["token_endpoint_auth_method"] == "none"
    # setting the redirect URIs again keeps the client_id
    again = world["user"].put(
        f"/api/apps/v1/installations/{world['inst']['id']}/oauth-client",
        json={"redirect_uris": [APP_REDIRECT, "https://app.example/cb"]},
    )
    assert again.status_code == 200 and again.json()["client_id"] == got["client_id"]
    assert again.json()["redirect_uris"] == [APP_REDIRECT, "https://app.example/cb"]
    bad = world["user"].put(
        f"/api/apps/v1/installations/{world['inst']['id']}/oauth-client", json={"redirect_uris": ["http://evil/cb"]}
    )
    assert bad.status_code == 422, bad.text
    # someone else's installation is not found, for reading and for setting
    with login(base, world["other"].email) as other:
        path = f"/api/apps/v1/installations/{world['inst']['id']}/oauth-client"
        assert other.get(path).status_code == 404
        assert other.put(path, json={"redirect_uris": [APP_REDIRECT]}).status_code == 404
    prm = httpx.get(base + "/.well-known/oauth-protected-resource/api/apps/v1", timeout=30).json()
    assert prm["resource"] == base + "/api/apps/v1" and prm["scopes_supported"] == ["apps"]
    assert prm["authorization_servers"] == [base]


def test_a_token_acts_as_the_installation_with_its_switches_and_quota(world) -> None:
    tokens = app_tokens(world)
    assert tokens["access_token"].startswith("kbat_") and tokens["scope"] == "apps"
    with knowledge(world, tokens["access_token"]) as kb:
        assert kb.collections.list() == []  # every switch off: nothing seen
        with pytest.raises(AppApiError) as e:
            kb.documents.upsert(collection="diary", key="2026-10-01", title="2026-10-01", body="rain")
        assert e.value.status == 403 and "lacks knowledge permission collections.write:diary" in e.value.detail
        switch(world, "collections.write:diary", True)
        done = kb.documents.upsert(collection="diary", key="2026-10-01", title="2026-10-01", body="rain")
        assert done["status"] == "created"
        own = kb.changes.list()
        assert [c["op"] for c in own] == ["document.create"] and own[0]["own"]
        # the same daily quota as the kbapp_ credential: counted for the installation
        with world["committed"]() as s:
            assert quotas.usage(s, world["inst"]["id"])["writes"] == 1
            s.execute(
                text("UPDATE app_quota_usage SET writes = :w WHERE installation_id = :i"),
                {"w": quotas.WRITES_PER_DAY, "i": world["inst"]["id"]},
            )
            s.commit()
        try:
            with pytest.raises(AppApiError) as e:
                kb.documents.upsert(collection="diary", key="2026-10-02", title="2026-10-02", body="sun")
            assert e.value.status == 429 and "quota" in e.value.detail
        finally:
            with world["committed"]() as s:
                s.execute(text("DELETE FROM app_quota_usage WHERE installation_id = :i"), {"i": world["inst"]["id"]})
                s.commit()
        switch(world, "collections.write:diary", False)
        with pytest.raises(AppApiError) as e:
            kb.documents.upsert(collection="diary", key="2026-10-01", title="2026-10-01", body="rain again")
        assert "lacks knowledge permission collections.write:diary" in e.value.detail


def test_tokens_do_not_cross_between_mcp_and_the_apps_api(world) -> None:
    base = world["base"]
    app_access = app_tokens(world)["access_token"]
    mcp = OAuthClient(base)
    try:
        mcp.register()
        mcp_access = mcp.tokens(world["owner"].email, PASSWORD)["access_token"]
        # an /mcp token at the apps API, and an apps token at /mcp: 401
        assert collections_status(world, mcp_access) == 401
        r = httpx.post(
            base + "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": f"Bearer {app_access}", "Accept": "application/json, text/event-stream"},
            timeout=30,
        )
        assert r.status_code == 401, r.text
        assert collections_status(world, app_access) == 200
        # an MCP client can't ask for the apps API, nor for the apps scope
        verifier = secrets.token_urlsafe(48)
        q = redirect_params(mcp.start(verifier, resource=base + "/api/apps/v1"))
        assert q["error"] == "invalid_target", q
        q = redirect_params(mcp.start(verifier, scope="apps"))
        assert q["error"] == "invalid_scope", q
    finally:
        mcp.close()
    c = app_client(world)
    try:  # and the installation's client can't ask for /mcp, nor for MCP scopes
        # (errors are redirected to a client its user authorized: docs/oauth.md#the-authorize-page)
        c.tokens(world["owner"].email, PASSWORD)
        verifier = secrets.token_urlsafe(48)
        q = redirect_params(c.start(verifier, resource=base + "/mcp"))
        assert q["error"] == "invalid_target", q
        q = redirect_params(c.start(verifier, scope="kb:read"))
        assert q["error"] == "invalid_scope", q
    finally:
        c.close()


def test_only_the_installations_user_may_consent(world) -> None:
    c = app_client(world)
    try:
        verifier = secrets.token_urlsafe(48)
        page = c.start(verifier)
        assert page.status_code == 200 and 'name="password"' in page.text
        page = c.submit(page, email=world["other"].email, password=PASSWORD)
        assert page.status_code == 403, page.text[:500]
        assert "belongs to another account" in page.text and "location" not in page.headers
    finally:
        c.close()
    # a consent form posted anyway by the other user's signed-in browser (valid CSRF) is refused
    with login(world["base"], world["other"].email) as other:
        allow = other.post(
            c.authorize_path(),
            data={**c.authorize_params(verifier), "action": "allow", "csrf_token": other.headers["X-CSRF-Token"]},
        )
        assert allow.status_code == 403 and "location" not in allow.headers
        assert "belongs to another account" in allow.text
        grants = other.get("/api/me/oauth-grants").json()["items"]
        assert world["client"]["client_id"] not in {g["client_id"] for g in grants}


def test_revocation_and_uninstall_apply_at_once(world) -> None:
    tokens = app_tokens(world)
    c = app_client(world)
    try:
        assert collections_status(world, tokens["access_token"]) == 200
        assert c.revoke(tokens["access_token"]).status_code == 200
        assert collections_status(world, tokens["access_token"]) == 401
        # the refresh token still works: a new access token
        r = c.refresh(tokens["refresh_token"])
        assert r.status_code == 200, r.text
        fresh = r.json()
        assert collections_status(world, fresh["access_token"]) == 200
        # the user revokes the connected application: 401 on the next call
        grants = world["user"].get("/api/me/oauth-grants").json()["items"]
        mine = [g for g in grants if g["client_id"] == world["client"]["client_id"]]
        assert len(mine) == 1 and mine[0]["registration"] == "app" and mine[0]["scopes"] == ["apps"]
        assert world["user"].delete(f"/api/me/oauth-grants/{mine[0]['id']}").status_code == 204
        assert collections_status(world, fresh["access_token"]) == 401
    finally:
        c.close()
    # uninstall: live tokens die, refresh is refused, and no new authorization is possible
    late = app_tokens(world)
    assert collections_status(world, late["access_token"]) == 200
    r = world["user"].post(f"/api/apps/v1/installations/{world['inst']['id']}/uninstall", json={"mode": "keep"})
    assert r.status_code == 200, r.text
    assert collections_status(world, late["access_token"]) == 401
    listed = world["user"].get("/api/me/oauth-grants").json()["items"]
    assert world["client"]["client_id"] not in {g["client_id"] for g in listed}  # its grant was revoked
    c = app_client(world)
    try:
        r = c.refresh(late["refresh_token"])
        assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
        page = c.start(secrets.token_urlsafe(48))
        if page.status_code == 200 and 'name="password"' in page.text:
            page = c.submit(page, email=world["owner"].email, password=PASSWORD)
        assert page.status_code == 403 and "no longer installed" in page.text
    finally:
        c.close()


# --- in process: the same services, without HTTP --------------------------------------------------

RESOURCE = "https://kb.example.org/api/apps/v1"


def _service_token(aw) -> str:
    """The authorization code + PKCE flow through the services the routes call."""
    client = app_oauth.set_oauth_client(aw.db, aw.user, aw.installation_id, redirect_uris=[APP_REDIRECT])
    grant = grants.consent(aw.db, aw.user, client, ["apps"], redirect_uri=APP_REDIRECT)
    verifier = secrets.token_urlsafe(48)
    code = grants.issue_code(
        aw.db, grant, redirect_uri=APP_REDIRECT, scopes=["apps"], code_challenge=s256(verifier), resource=RESOURCE
    )
    return grants.exchange_code(
        aw.db,
        Settings(),
        code=code,
        client_id=client.client_id,
        redirect_uri=APP_REDIRECT,
        code_verifier=verifier,
        resource=RESOURCE,
    ).access_token


def test_deleting_the_user_ends_the_oauth_token(aw) -> None:
    token = _service_token(aw)
    caller = app_oauth.resolve_oauth_caller(aw.db, token, resource=RESOURCE, secret=SECRET)
    assert caller.installation_id == aw.installation_id and caller.user_id == aw.user.user_id
    # the same refs as the kbapp_ credential's caller: one installation, one ref space
    assert caller.ref("kb", aw.tenant_id) == aw.caller().ref("kb", aw.tenant_id)
    heir = make_user(aw.db, aw.db.get(Tenant, aw.tenant_id))
    delete_user(aw.db, Principal.system(), aw.user.user_id, successor_id=heir.id)
    with pytest.raises(Unauthenticated):
        app_oauth.resolve_oauth_caller(aw.db, token, resource=RESOURCE, secret=SECRET)


def test_consent_service_refuses_another_user(aw) -> None:
    client = app_oauth.set_oauth_client(aw.db, aw.user, aw.installation_id, redirect_uris=[APP_REDIRECT])
    stranger = make_user(aw.db, aw.db.get(Tenant, aw.tenant_id))
    with pytest.raises(OAuthProtocolError) as e:
        grants.consent(aw.db, Principal.user(stranger.id, aw.tenant_id), client, ["apps"], redirect_uri=APP_REDIRECT)
    assert e.value.oauth_error == "access_denied" and e.value.http_status == 403


def test_cli_sets_and_shows_the_installation_client(db_env, committed) -> None:  # noqa: F811 - the fixture
    with committed() as s:
        t = make_tenant(s)
        u = make_user(s, t)
        who = Principal.user(u.id, t.id)
        app = registry.register_app(s, who, name="cli-oauth", permissions=["collections.read:diary"])
        inst = registry.install_app(s, who, app.id).installation
        s.commit()
        email, inst_id = u.email, str(inst.id)
    base = ["app", "oauth-client", inst_id, "--user", email]
    p = run([*base, "--redirect-uri", APP_REDIRECT, "--json"], env=db_env)
    assert p.returncode == 0, (p.stdout, p.stderr)
    out = json.loads(p.stdout)
    assert out["client_id"].startswith("kbcl_") and out["scope"] == "apps"
    assert out["redirect_uris"] == [APP_REDIRECT] and out["resource"].endswith("/api/apps/v1")
    shown = run([*base, "--json"], env=db_env)
    assert shown.returncode == 0 and json.loads(shown.stdout)["client_id"] == out["client_id"], shown.stderr
    assert_one_line_error(run([*base, "--redirect-uri", "http://evil.example/cb"], env=db_env), 2, "loopback")


_MINE = "client_id IN (SELECT id FROM mcp_oauth_clients WHERE installation_id = :i)"


def _set_grants(aw, assignment: str, **params) -> None:
    aw.db.execute(text(f"UPDATE mcp_oauth_grants SET {assignment} WHERE {_MINE}"), {"i": aw.installation_id, **params})


def _grant_stamp(aw):
    return aw.db.execute(
        text(
            "SELECT g.last_used_at FROM mcp_oauth_grants g JOIN mcp_oauth_clients c ON c.id = g.client_id "
            "WHERE c.installation_id = :i"
        ),
        {"i": aw.installation_id},
    ).scalar_one()


def test_an_oauth_call_is_one_statement_and_stamps_its_grant_once_a_minute(aw, count_queries) -> None:
    """As ``kbapp_``: the token's checks, the installation and the touch of ``last_used_at`` are
    one statement (the keyed write's document and key lock too), and the touch writes only when
    the stamp is a minute old. ``now()`` is the test transaction's start: instants are set."""
    token = _service_token(aw)
    _set_grants(aw, "last_used_at = NULL")
    inst = registry.access_installation(aw.db, aw.user, aw.installation_id)
    aw.db.execute(text("UPDATE app_credentials SET last_used_at = NULL WHERE installation_id = :i"), {"i": inst.id})
    assert registry.installation_out(aw.db, inst)["last_used_at"] is None
    now = aw.db.execute(text("SELECT now()")).scalar_one()
    with count_queries() as n:
        caller = app_oauth.resolve_oauth_caller(aw.db, token, resource=RESOURCE, secret=SECRET)
    assert n["n"] == 1 and caller.installation_id == aw.installation_id
    assert _grant_stamp(aw) == now
    assert registry.installation_out(aw.db, inst)["last_used_at"] == now  # the installation shows it
    for ago, stamped in (("30 seconds", False), ("61 seconds", True)):
        _set_grants(aw, "last_used_at = now() - CAST(:a AS interval)", a=ago)
        before = _grant_stamp(aw)
        with count_queries() as n:
            keyed = app_oauth.resolve_oauth_caller(
                aw.db, token, resource=RESOURCE, secret=SECRET, keyed=("diary", "2026-05-01")
            )
        assert n["n"] == 1 and keyed.keyed == ("diary", "2026-05-01", None)
        assert _grant_stamp(aw) == (now if stamped else before)
    # a refused token stamps nothing: another resource, and a revoked grant
    _set_grants(aw, "last_used_at = NULL")
    with pytest.raises(Unauthenticated, match="another resource"):
        with aw.db.begin_nested():
            app_oauth.resolve_oauth_caller(aw.db, token, resource="https://kb.example.org/mcp", secret=SECRET)
    _set_grants(aw, "status = 'revoked'")
    with pytest.raises(Unauthenticated, match="revoked"):
        app_oauth.resolve_oauth_caller(aw.db, token, resource=RESOURCE, secret=SECRET)
    assert _grant_stamp(aw) is None
