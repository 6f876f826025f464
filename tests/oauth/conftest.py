"""A scripted OAuth client for the tests: discovery, registration, the authorize pages driven as a
browser would (forms parsed from the HTML), code + PKCE, refresh, revocation."""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

CURSOR_REDIRECTS = [
    "cursor://anysphere.cursor-mcp/oauth/callback",
    "https://www.cursor.com/agents/mcp/oauth/callback",
    "http://localhost:8787/callback",
]
_INPUT = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def hidden_fields(page: str) -> dict[str, str]:
    return {html.unescape(k): html.unescape(v) for k, v in _INPUT.findall(page)}


def redirect_params(resp: httpx.Response) -> dict[str, str]:
    assert resp.status_code in (302, 303), (resp.status_code, resp.text[:500])
    return {k: v[0] for k, v in parse_qs(urlsplit(resp.headers["location"]).query).items()}


@dataclass
class OAuthClient:
    """One MCP client's view of the server, plus a browser (cookie jar) for the authorize pages."""

    base: str
    client_id: str = ""
    redirect_uri: str = "http://127.0.0.1:9/callback"
    meta: dict[str, Any] = field(default_factory=dict)
    browser: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.browser = httpx.Client(base_url=self.base, timeout=30, follow_redirects=False)
        self.meta = discover(self.base)

    @property
    def resource(self) -> str:
        return self.meta["prm"]["resource"]

    def register(self, redirect_uris: list[str] | None = None, **extra: Any) -> dict[str, Any]:
        r = httpx.post(
            self.meta["as"]["registration_endpoint"],
            json={
                "client_name": "Test IDE",
                "redirect_uris": redirect_uris or [self.redirect_uri],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
                **extra,
            },
            timeout=30,
        )
        assert r.status_code == 201, r.text
        self.client_id = r.json()["client_id"]
        return r.json()

    def authorize_params(self, verifier: str, **over: str) -> dict[str, str]:
        p = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "scope": "kb:read kb:search doc:read",
            "state": secrets.token_urlsafe(8),
            "code_challenge": s256(verifier),
            "code_challenge_method": "S256",
            "resource": self.resource,
        }
        p.update(over)
        return {k: v for k, v in p.items() if v is not None}

    def authorize_path(self) -> str:
        return urlsplit(self.meta["as"]["authorization_endpoint"]).path

    def start(self, verifier: str, **over: str) -> httpx.Response:
        return self.browser.get(self.authorize_path(), params=self.authorize_params(verifier, **over))

    def submit(self, page: httpx.Response, **fields: str) -> httpx.Response:
        return self.browser.post(self.authorize_path(), data={**hidden_fields(page.text), **fields})

    def get_code(self, email: str, password: str, verifier: str, **over: str) -> dict[str, str]:
        """The whole browser part: sign in if asked, allow if asked; returns the redirect's query."""
        page = self.start(verifier, **over)
        if page.status_code == 200 and 'name="password"' in page.text:
            page = self.submit(page, email=email, password=password)
        if page.status_code == 200 and 'value="allow"' in page.text:
            page = self.submit(page, action="allow")
        return redirect_params(page)

    def token(self, **form: str) -> httpx.Response:
        return httpx.post(self.meta["as"]["token_endpoint"], data={"client_id": self.client_id, **form}, timeout=30)

    def exchange(self, code: str, verifier: str, **over: str) -> httpx.Response:
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "code_verifier": verifier,
            "redirect_uri": self.redirect_uri,
            "resource": self.resource,
            **over,
        }
        return self.token(**form)

    def refresh(self, refresh_token: str) -> httpx.Response:
        return self.token(grant_type="refresh_token", refresh_token=refresh_token)

    def revoke(self, token: str) -> httpx.Response:
        return httpx.post(
            self.meta["as"]["revocation_endpoint"], data={"token": token, "client_id": self.client_id}, timeout=30
        )

    def tokens(self, email: str, password: str) -> dict[str, Any]:
        verifier = secrets.token_urlsafe(48)
        q = self.get_code(email, password, verifier)
        r = self.exchange(q["code"], verifier)
        assert r.status_code == 200, r.text
        return r.json()

    def close(self) -> None:
        self.browser.close()


def discover(base: str) -> dict[str, Any]:
    """What an MCP client does after the 401: PRM, then the AS metadata of the server it names."""
    prm = httpx.get(base + "/.well-known/oauth-protected-resource/mcp", timeout=30)
    assert prm.status_code == 200, prm.text
    issuer = prm.json()["authorization_servers"][0]
    # RFC 8414 §3.1: the metadata of issuer https://host is at https://host/.well-known/oauth-authorization-server
    as_meta = httpx.get(issuer + "/.well-known/oauth-authorization-server", timeout=30)
    assert as_meta.status_code == 200, as_meta.text
    meta = as_meta.json()
    assert meta["issuer"] == issuer  # RFC 8414 §3.3, exactly (no trailing slash)
    return {"prm": prm.json(), "as": meta, "issuer": issuer}


@pytest.fixture(scope="module")
def base(live_server, app_ctx):
    """APP_BASE_URL = the live server's address for this module, so discovery, the issuer and the
    resource are the URLs a client really reaches (restored afterwards)."""
    before = app_ctx.settings.app_base_url
    app_ctx.settings.app_base_url = live_server
    yield live_server
    app_ctx.settings.app_base_url = before


@pytest.fixture()
def oauth_client(base):
    c = OAuthClient(base)
    yield c
    c.close()
