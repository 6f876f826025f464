"""Client ID Metadata Documents (docs/oauth.md#clients): the client_id is a URL whose JSON
document the server fetches. Served here on loopback by the test (allowed outside production);
in production private and loopback addresses are never fetched."""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from sqlmodel import select

from openkb.errors import OAuthProtocolError
from openkb.models import McpOAuthClient
from openkb.oauth import clients
from tests.api.helpers import make_login_user
from tests.oauth.conftest import redirect_params

REDIRECT = "http://127.0.0.1:33418/callback"


class DocServer:
    """path -> (body bytes, headers); counts GETs per path."""

    def __init__(self) -> None:
        self.docs: dict[str, tuple[bytes, dict[str, str]]] = {}
        self.hits: dict[str, int] = {}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.hits[self.path] = owner.hits.get(self.path, 0) + 1
                body, headers = owner.docs.get(self.path, (b"", {}))
                self.send_response(200 if self.path in owner.docs else 404)
                self.send_header("Content-Type", "application/json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_a: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def serve(self, path: str, doc: object, **headers: str) -> str:
        body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        self.docs[path] = (body, headers)
        return self.base + path


@pytest.fixture(scope="module")
def docs() -> Iterator[DocServer]:
    d = DocServer()
    yield d
    d.httpd.shutdown()


def test_cimd_client_completes_the_flow_and_is_cached(oauth_client, docs, committed):
    url = docs.base + "/oauth/client-metadata.json"
    docs.serve(
        "/oauth/client-metadata.json",
        {
            "client_id": url,
            "client_name": "Loopback Code",
            "redirect_uris": ["http://127.0.0.1/callback"],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        },
        **{"Cache-Control": "max-age=300"},
    )
    user = make_login_user(committed)
    oauth_client.client_id, oauth_client.redirect_uri = url, REDIRECT  # loopback: any port matches
    verifier = secrets.token_urlsafe(48)
    page = oauth_client.start(verifier)
    assert page.status_code == 200 and "Loopback Code" in page.text
    consent = oauth_client.submit(page, email=user.email, password=user.password)
    assert "Loopback Code" in consent.text and url in consent.text
    code = redirect_params(oauth_client.submit(consent, action="allow"))["code"]
    r = oauth_client.exchange(code, verifier)
    assert r.status_code == 200, r.text
    assert docs.hits["/oauth/client-metadata.json"] == 1  # fetched once, then cached (max-age=300)
    with committed() as s:
        row = s.exec(select(McpOAuthClient).where(McpOAuthClient.client_id == url)).one()
        assert row.registration == "cimd" and row.client_name == "Loopback Code"
    # refresh works for a CIMD client as for any other
    assert oauth_client.refresh(r.json()["refresh_token"]).status_code == 200


@pytest.mark.parametrize(
    "doc, words",
    [
        ({"client_id": "https://someone-else.example/c.json", "redirect_uris": [REDIRECT]}, "differs from its URL"),
        ({"redirect_uris": ["javascript:alert(1)"]}, "not allowed"),
        ({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic"}, "not supported"),
        (b"x" * (clients.CIMD_MAX_BYTES + 10), "exceeds"),
        (b"<html>not json</html>", "not JSON"),
    ],
)
def test_bad_metadata_documents_are_refused_on_the_page(oauth_client, docs, doc, words):
    path = f"/bad-{secrets.token_hex(4)}.json"
    url = docs.base + path
    if isinstance(doc, dict):
        doc = {"client_id": url, **doc}
    docs.serve(path, doc)
    oauth_client.client_id, oauth_client.redirect_uri = url, REDIRECT
    page = oauth_client.start(secrets.token_urlsafe(48))
    assert page.status_code == 400 and "location" not in page.headers  # never a redirect to an untrusted URI
    assert words in page.text


def test_production_never_fetches_private_or_loopback_addresses(db):
    fetched: list[str] = []

    def fetch(url: str) -> clients.FetchedDocument:
        fetched.append(url)
        return clients.FetchedDocument(body={"client_id": url, "redirect_uris": [REDIRECT]}, max_age=None)

    tenant_id = db.exec(select(McpOAuthClient.tenant_id)).first()  # any tenant will do for a refusal
    for url in ("http://127.0.0.1:8080/c.json", "https://127.0.0.1/c.json", "https://[::1]/c.json"):
        with pytest.raises(OAuthProtocolError, match="https|non-public"):
            clients.resolve_client(db, url, tenant_id=tenant_id, production=True, fetch=fetch)
    for addresses in (["10.1.2.3"], ["192.168.0.7"], ["169.254.169.254"], ["93.184.216.34", "172.16.0.1"]):
        with pytest.raises(OAuthProtocolError, match="non-public"):
            clients.check_metadata_url(
                "https://client.example/c.json", production=True, resolve=lambda _h, a=addresses: a
            )
    assert fetched == []
    clients.check_metadata_url("https://client.example/c.json", production=True, resolve=lambda _h: ["93.184.216.34"])
    # outside production, loopback http is fetchable (how these tests serve documents)
    clients.check_metadata_url("http://127.0.0.1:8080/c.json", production=False)
    for bad in ("https://client.example/", "https://u:p@client.example/c.json", "https://client.example/c#x"):
        with pytest.raises(OAuthProtocolError):
            clients.check_metadata_url(bad, production=True, resolve=lambda _h: ["93.184.216.34"])


def test_injected_fetcher_and_default_cache_lifetime(db):
    from openkb.bootstrap import default_tenant
    from openkb.models._base import utcnow

    url = f"https://tool-{secrets.token_hex(4)}.example/oauth/meta.json"
    calls: list[str] = []

    def fetch(u: str) -> clients.FetchedDocument:
        calls.append(u)
        return clients.FetchedDocument(
            body={"client_id": u, "client_name": "Tool", "redirect_uris": [REDIRECT]}, max_age=None
        )

    tid = default_tenant(db).id
    row = clients.resolve_client(db, url, tenant_id=tid, production=False, fetch=fetch)
    assert row.registration == "cimd" and row.redirect_uris == [REDIRECT]
    left = (row.metadata_expires_at - utcnow()).total_seconds()
    assert 0 < left <= clients.CIMD_DEFAULT_TTL.total_seconds()
    assert clients.resolve_client(db, url, tenant_id=tid, production=False, fetch=fetch).id == row.id
    assert calls == [url]


def test_two_first_authorizations_of_one_client_share_its_row(db, committed):
    """The row appears between our lookup and our insert (another replica fetched the same
    document): the unique violation is absorbed and the existing row is used, not a 500."""
    from openkb.bootstrap import default_tenant

    url = f"https://race-{secrets.token_hex(4)}.example/meta.json"
    tid = default_tenant(db).id

    def fetch(u: str) -> clients.FetchedDocument:
        with committed() as other:
            other.add(
                McpOAuthClient(
                    tenant_id=tid,
                    client_id=u,
                    client_name="Other replica",
                    status="active",
                    registration="cimd",
                    redirect_uris=[REDIRECT],
                )
            )
            other.commit()
        return clients.FetchedDocument(
            body={"client_id": u, "client_name": "Racer", "redirect_uris": [REDIRECT]}, max_age=60
        )

    row = clients.resolve_client(db, url, tenant_id=tid, production=False, fetch=fetch)
    assert row.client_name == "Racer" and row.metadata_expires_at is not None
    assert len(db.exec(select(McpOAuthClient).where(McpOAuthClient.client_id == url)).all()) == 1


def test_loopback_redirects_match_any_port_as_real_clients_send_them():
    """RFC 8252 §7.3 and what clients really register: VS Code's document lists
    ``http://127.0.0.1:33418`` (no path) and its DCR ``http://127.0.0.1/``, then redirects to
    ``http://127.0.0.1:<free port>/``; Claude Code lists no port at all."""
    vscode = ["http://127.0.0.1:33418", "https://vscode.dev/redirect"]
    assert clients.redirect_uri_allowed(vscode, "http://127.0.0.1:59656/")
    assert clients.redirect_uri_allowed(["http://127.0.0.1/", "http://127.0.0.1:33418/"], "http://127.0.0.1:59656/")
    assert clients.redirect_uri_allowed(["http://localhost/callback"], "http://localhost:41234/callback")
    assert clients.redirect_uri_allowed(vscode, "https://vscode.dev/redirect")
    refused = [
        ("http://127.0.0.1:59656/other", vscode),
        ("https://vscode.dev/redirect/x", vscode),
        ("http://localhost:41234/callback", ["http://127.0.0.1/callback"]),  # host is part of the match
        ("https://vscode.dev:444/redirect", vscode),
        ("http://evil.example:33418/", vscode),
    ]
    for uri, registered in refused:
        assert not clients.redirect_uri_allowed(registered, uri), uri
