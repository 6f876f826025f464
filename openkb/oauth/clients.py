"""OAuth clients of the MCP authorization server: Dynamic Client Registration (RFC 7591) and
Client ID Metadata Documents (docs/oauth.md#clients).

* DCR: an unauthenticated ``POST /oauth/register`` gets a random ``kbcl_...`` client_id.
  Accept what real clients send: Cursor registers ``cursor://anysphere.cursor-mcp/oauth/callback``
  together with an https and a loopback URI in one request (refusing the custom scheme fails
  its whole connection); claude.ai asks for ``client_secret_basic`` and a scope of its own.
  Clients are public (``none``, PKCE) unless they ask for a secret method; PKCE is required
  either way.
* CIMD: the client_id IS an https URL (Claude Code, VS Code, Codex). The document is fetched
  with a size and time limit, no redirects, and must name the same URL as its ``client_id``.
  In production (``OPENKB_ENV=production``) only https URLs whose host resolves to public
  addresses are fetched (no SSRF into the private network); outside production loopback http
  is allowed so tests can serve a document. Cached per ``Cache-Control: max-age`` (clamped),
  else ``CIMD_DEFAULT_TTL``.

Loopback redirect URIs match on any port (RFC 8252 §7.3): native clients pick a free port per run.
The one outbound HTTP call of the package is ``fetch_document``; services take ``fetch=`` so
tests can inject another.
"""

from __future__ import annotations

import ipaddress
import json
import re
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from openkb.errors import OAuthProtocolError
from openkb.models import McpOAuthClient
from openkb.models._base import utcnow
from openkb.security import hash_token, new_token, tokens_equal

SCOPES = ("kb:read", "kb:search", "doc:read", "doc:write", "facts:read")  # facts:read: docs/facts.md#mcp
DEFAULT_SCOPES = ("kb:read", "kb:search", "doc:read")  # doc:write only when asked for (docs/oauth.md#scopes)
CLIENT_ID_PREFIX = "kbcl"
CLIENT_SECRET_PREFIX = "kbcs"
SECRET_METHODS = ("client_secret_basic", "client_secret_post")
AUTH_METHODS = ("none", *SECRET_METHODS)
IGNORED_SCOPES = frozenset({"offline_access"})
MAX_REDIRECT_URIS = 20
MAX_URI_CHARS = 2000
MAX_NAME_CHARS = 200
CIMD_MAX_BYTES = 16 * 1024
CIMD_TIMEOUT_SECONDS = 5.0
CIMD_DEFAULT_TTL = timedelta(minutes=10)
CIMD_MIN_TTL = timedelta(minutes=1)
CIMD_MAX_TTL = timedelta(hours=24)
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")
# Schemes that can run code or read files in a browser or OS: never a redirect target.
FORBIDDEN_SCHEMES = frozenset({"javascript", "data", "file", "vbscript", "about", "blob", "ftp", "ws", "wss"})
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*$")
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class FetchedDocument:
    """What the CIMD fetch returned: the parsed body and its max-age (None = no caching header)."""

    body: Any
    max_age: int | None


Fetcher = Callable[[str], FetchedDocument]


def is_loopback_uri(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and (parts.hostname or "") in ("127.0.0.1", "localhost", "::1")


def same_origin(a: str, b: str) -> bool:
    """Whether two http(s) URLs share scheme, host and port (RFC 6454), default ports filled in."""
    pa, pb = urlsplit(a), urlsplit(b)
    if pa.scheme.lower() not in ("http", "https") or not pa.hostname or not pb.hostname:
        return False
    try:
        ports = (pa.port or _DEFAULT_PORTS[pa.scheme.lower()], pb.port or _DEFAULT_PORTS.get(pb.scheme.lower()))
    except ValueError:  # a malformed port
        return False
    return pa.scheme.lower() == pb.scheme.lower() and pa.hostname == pb.hostname and ports[0] == ports[1]


def validate_redirect_uri(uri: Any) -> str:
    """One redirect URI a client may register: https anywhere, http only on loopback, or a
    private-use scheme (``cursor://``, ``vscode://``, ``com.example.app:/cb``); never a fragment."""
    if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_CHARS or any(c.isspace() for c in uri):
        raise OAuthProtocolError("invalid_redirect_uri", f"redirect URI {str(uri)[:200]!r} is not a URI")
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if not scheme or not _SCHEME.match(scheme):
        raise OAuthProtocolError("invalid_redirect_uri", f"redirect URI {uri!r} has no scheme")
    if parts.fragment or "#" in uri:
        raise OAuthProtocolError("invalid_redirect_uri", f"redirect URI {uri!r} must not have a fragment")
    if scheme in FORBIDDEN_SCHEMES:
        raise OAuthProtocolError("invalid_redirect_uri", f"redirect URI scheme {scheme!r} is not allowed")
    if scheme == "http" and not is_loopback_uri(uri):
        raise OAuthProtocolError(
            "invalid_redirect_uri",
            f"redirect URI {uri!r}: http is allowed only on loopback (127.0.0.1, [::1], localhost); use https",
        )
    if scheme == "https" and not parts.hostname:
        raise OAuthProtocolError("invalid_redirect_uri", f"redirect URI {uri!r} has no host")
    return uri


def validate_redirect_uris(uris: Any) -> list[str]:
    if not isinstance(uris, list) or not uris:
        raise OAuthProtocolError("invalid_redirect_uri", "redirect_uris must be a non-empty list")
    if len(uris) > MAX_REDIRECT_URIS:
        raise OAuthProtocolError("invalid_redirect_uri", f"at most {MAX_REDIRECT_URIS} redirect_uris")
    out: list[str] = []
    for u in uris:
        u = validate_redirect_uri(u)
        if u not in out:
            out.append(u)
    return out


def redirect_uri_allowed(registered: list[str], uri: str) -> bool:
    """Exact match, except that a loopback http URI matches on any port (RFC 8252 §7.3), and an
    empty loopback path equals ``/``: VS Code's metadata document lists ``http://127.0.0.1:33418``
    and then redirects to ``http://127.0.0.1:<free port>/``."""
    if uri in registered:
        return True
    if not is_loopback_uri(uri):
        return False
    asked = urlsplit(uri)
    for r in registered:
        reg = urlsplit(r)
        if (
            is_loopback_uri(r)
            and reg.hostname == asked.hostname
            and (reg.path or "/") == (asked.path or "/")
            and reg.query == asked.query
        ):
            return True
    return False


def parse_scopes(scope: Any, *, default: tuple[str, ...] = DEFAULT_SCOPES) -> list[str]:
    """A space-separated scope string -> sorted known scopes; unknown ones are ``invalid_scope``.

    ``offline_access`` is dropped silently: some clients add it to ask for a refresh token, which
    every grant here gets anyway; refusing it would fail their whole connection."""
    if scope is None or (isinstance(scope, str) and not scope.strip()):
        return sorted(default)
    if not isinstance(scope, str):
        raise OAuthProtocolError("invalid_scope", "scope must be a space-separated string")
    asked = set(scope.split()) - IGNORED_SCOPES
    unknown = sorted(asked - set(SCOPES))
    if unknown:
        raise OAuthProtocolError("invalid_scope", f"unknown scope(s) {' '.join(unknown)}; known: {' '.join(SCOPES)}")
    return sorted(asked) if asked else sorted(default)


def registered_scopes(scope: Any) -> list[str]:
    """The scopes a registering client may later ask for: the known ones it names, else all.
    Lenient on purpose (RFC 7591 §2 lets the server replace values): clients register scopes
    of their own (claude.ai sends ``claudeai``) and must not fail registration for it."""
    named = set(scope.split()) if isinstance(scope, str) else set()
    return sorted(named & set(SCOPES)) or list(SCOPES)


def _name(value: Any, fallback: str) -> str:
    if isinstance(value, str) and value.strip():
        return value.strip()[:MAX_NAME_CHARS]
    return fallback


def _common_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """Check grant/response types and auth method; keep the descriptive fields worth showing."""
    grant_types = meta.get("grant_types", ["authorization_code"])
    if not isinstance(grant_types, list) or not set(grant_types) <= {"authorization_code", "refresh_token"}:
        raise OAuthProtocolError(
            "invalid_client_metadata", "grant_types may only hold authorization_code and refresh_token"
        )
    response_types = meta.get("response_types", ["code"])
    if not isinstance(response_types, list) or not set(response_types) <= {"code"}:
        raise OAuthProtocolError("invalid_client_metadata", "response_types may only hold code")
    kept = {
        k: meta[k]
        for k in ("client_uri", "logo_uri", "software_id", "software_version")
        if isinstance(meta.get(k), str) and len(meta[k]) <= MAX_URI_CHARS
    }
    kept["grant_types"] = sorted(set(grant_types) | {"authorization_code", "refresh_token"})
    return kept


def register_client(session: Session, meta: Any, *, tenant_id: Any) -> tuple[McpOAuthClient, str | None]:
    """RFC 7591 registration; returns ``(row, client_secret or None)``.

    Public clients (``token_endpoint_auth_method: none``, the default) use PKCE alone. A client
    asking for ``client_secret_basic`` or ``client_secret_post`` (claude.ai asks for the former
    and fails without it) gets a secret, shown once, stored as SHA-256; PKCE is still required.
    Any other method is answered ``none`` (RFC 7591 §3.2.1 lets the server replace values)."""
    if not isinstance(meta, dict):
        raise OAuthProtocolError("invalid_client_metadata", "the body must be a JSON object")
    redirect_uris = validate_redirect_uris(meta.get("redirect_uris"))
    kept = _common_metadata(meta)
    method = meta.get("token_endpoint_auth_method")
    method = method if method in SECRET_METHODS else "none"
    kept["token_endpoint_auth_method"] = method
    secret = None
    if method != "none":
        secret, kept["client_secret_sha256"] = new_token(CLIENT_SECRET_PREFIX)
    row = McpOAuthClient(
        tenant_id=tenant_id,
        client_id=f"{CLIENT_ID_PREFIX}_{secrets.token_urlsafe(24)}",
        client_name=_name(meta.get("client_name"), "MCP client"),
        redirect_uris=redirect_uris,
        allowed_scopes=registered_scopes(meta.get("scope")),
        status="active",
        registration="dcr",
        meta=kept,
    )
    session.add(row)
    session.flush()
    return row, secret


def registration_response(row: McpOAuthClient, secret: str | None = None) -> dict[str, Any]:
    out = {
        "client_id": row.client_id,
        "client_id_issued_at": int(row.created_at.timestamp()),
        "client_name": row.client_name,
        "redirect_uris": list(row.redirect_uris),
        "grant_types": row.meta.get("grant_types", ["authorization_code", "refresh_token"]),
        "response_types": ["code"],
        "token_endpoint_auth_method": auth_method(row),
        "scope": " ".join(row.allowed_scopes),
        **{k: row.meta[k] for k in ("client_uri", "logo_uri", "software_id", "software_version") if k in row.meta},
    }
    if secret is not None:
        out.update(client_secret=secret, client_secret_expires_at=0)
    return out


def auth_method(row: McpOAuthClient) -> str:
    return str(row.meta.get("token_endpoint_auth_method") or "none")


def authenticate_client(session: Session, client_id: str | None, secret: str | None) -> McpOAuthClient:
    """The client calling the token or revocation endpoint: a public client names itself; a
    confidential one must also prove its secret (``invalid_client``, 401, otherwise)."""
    if not client_id:
        raise OAuthProtocolError("invalid_client", "client_id is required (in the form, or HTTP Basic)", status=401)
    row = session.exec(select(McpOAuthClient).where(McpOAuthClient.client_id == client_id)).first()
    if row is None or row.status != "active":
        raise OAuthProtocolError("invalid_client", "unknown or disabled client", status=401)
    if auth_method(row) != "none":
        expected = str(row.meta.get("client_secret_sha256") or "")
        if not secret or not expected or not tokens_equal(hash_token(secret), expected):
            raise OAuthProtocolError("invalid_client", "client authentication failed", status=401)
    return row


# --- Client ID Metadata Documents ----------------------------------------------------------------


def is_metadata_url(client_id: str) -> bool:
    return client_id.startswith(("https://", "http://"))


def check_metadata_url(url: str, *, production: bool, resolve: Callable[[str], list[str]] | None = None) -> None:
    """Refuse a client_id URL that must not be fetched: not https (outside production, loopback
    http is allowed for tests), a fragment, credentials, no path, or — in production — a host
    resolving to a private, loopback, link-local or reserved address (SSRF).

    Trap: the check resolves the name, the fetch resolves it again; a DNS answer that changes in
    between (rebinding) is not caught here. Production deployments that care should also
    restrict egress at the network level (docs/oauth.md#clients).
    """
    if len(url) > MAX_URI_CHARS:
        raise OAuthProtocolError("invalid_client", "client_id URL is too long")
    parts = urlsplit(url)
    if parts.fragment or parts.username or parts.password or not parts.hostname:
        raise OAuthProtocolError("invalid_client", "client_id URL must have a host and no fragment or credentials")
    if parts.path in ("", "/") or "/./" in parts.path or "/../" in parts.path:
        raise OAuthProtocolError("invalid_client", "client_id URL must have a path (and no dot segments)")
    if parts.scheme == "http":
        if production or not is_loopback_uri(url):
            raise OAuthProtocolError("invalid_client", "client_id URL must use https")
        return
    if parts.scheme != "https":
        raise OAuthProtocolError("invalid_client", "client_id URL must use https")
    if not production:
        return
    addresses = (resolve or _resolve)(parts.hostname)
    if not addresses:
        raise OAuthProtocolError("invalid_client", f"client_id host {parts.hostname} does not resolve")
    for a in addresses:
        ip = ipaddress.ip_address(a.split("%", 1)[0])
        if not ip.is_global or ip.is_multicast:
            raise OAuthProtocolError(
                "invalid_client", f"client_id host {parts.hostname} resolves to a non-public address; refused"
            )


def _resolve(host: str) -> list[str]:
    try:
        return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, 443, proto=socket.IPPROTO_TCP)})
    except (OSError, UnicodeError):
        return []


def _max_age(cache_control: str | None) -> int | None:
    if not cache_control:
        return None
    directives = [d.strip().lower() for d in cache_control.split(",")]
    if "no-store" in directives or "no-cache" in directives:
        return 0
    for d in directives:
        if d.startswith("max-age="):
            try:
                return int(d.split("=", 1)[1])
            except ValueError:
                return None
    return None


def fetch_document(url: str) -> FetchedDocument:
    """GET the metadata document: no redirects, ``CIMD_TIMEOUT_SECONDS`` in all, at most
    ``CIMD_MAX_BYTES`` read (the body is streamed and cut off, never buffered whole)."""
    try:
        with (
            httpx.Client(timeout=CIMD_TIMEOUT_SECONDS, follow_redirects=False, trust_env=False) as client,
            client.stream("GET", url, headers={"Accept": "application/json"}) as resp,
        ):
            if resp.status_code != 200:
                raise OAuthProtocolError("invalid_client", f"client metadata document answered HTTP {resp.status_code}")
            chunks: list[bytes] = []
            size = 0
            deadline = time.monotonic() + CIMD_TIMEOUT_SECONDS  # httpx's timeout is per read: bound the total
            for chunk in resp.iter_bytes():
                if time.monotonic() > deadline:
                    raise OAuthProtocolError("invalid_client", "client metadata document took too long")
                size += len(chunk)
                if size > CIMD_MAX_BYTES:
                    raise OAuthProtocolError(
                        "invalid_client", f"client metadata document exceeds {CIMD_MAX_BYTES} bytes"
                    )
                chunks.append(chunk)
            cache_control = resp.headers.get("cache-control")
    except httpx.HTTPError as exc:
        raise OAuthProtocolError(
            "invalid_client", f"client metadata document could not be fetched: {type(exc).__name__}"
        ) from None
    try:
        body = json.loads(b"".join(chunks))
    except ValueError:
        raise OAuthProtocolError("invalid_client", "client metadata document is not JSON") from None
    return FetchedDocument(body=body, max_age=_max_age(cache_control))


def resolve_client(
    session: Session, client_id: Any, *, tenant_id: Any, production: bool, fetch: Fetcher | None = None
) -> McpOAuthClient:
    """The active client for ``client_id``: a registered one, or a metadata document fetched (or
    taken from the cache while fresh). Unknown or disabled -> ``invalid_client``."""
    if not isinstance(client_id, str) or not client_id or len(client_id) > MAX_URI_CHARS:
        raise OAuthProtocolError("invalid_client", "client_id is missing")
    row = session.exec(select(McpOAuthClient).where(McpOAuthClient.client_id == client_id)).first()
    if row is not None and row.status != "active":
        raise OAuthProtocolError("invalid_client", "this client is disabled")
    if not is_metadata_url(client_id):
        if row is None:
            raise OAuthProtocolError("invalid_client", "unknown client_id; register the client first")
        return row
    if (
        row is not None
        and row.registration == "cimd"
        and row.metadata_expires_at is not None
        and row.metadata_expires_at > utcnow()
    ):
        return row
    check_metadata_url(client_id, production=production)
    doc = (fetch or fetch_document)(client_id)
    meta = doc.body
    if not isinstance(meta, dict):
        raise OAuthProtocolError("invalid_client", "client metadata document must be a JSON object")
    if meta.get("client_id") != client_id:
        raise OAuthProtocolError("invalid_client", "client metadata document's client_id differs from its URL")
    method = meta.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise OAuthProtocolError(
            "invalid_client", f"token_endpoint_auth_method {method!r} is not supported; use none (PKCE)"
        )
    try:
        redirect_uris = validate_redirect_uris(meta.get("redirect_uris"))
        kept = _common_metadata(meta)
        scopes = registered_scopes(meta.get("scope"))
    except OAuthProtocolError as exc:
        raise OAuthProtocolError("invalid_client", f"client metadata document: {exc.detail}") from None
    ttl = CIMD_DEFAULT_TTL if doc.max_age is None else timedelta(seconds=doc.max_age)
    ttl = min(max(ttl, CIMD_MIN_TTL), CIMD_MAX_TTL)
    now = utcnow()
    name = _name(meta.get("client_name"), urlsplit(client_id).hostname or client_id)
    if row is None:
        # Two first authorizations of one client at once both insert: the loser reads the winner's row.
        new = McpOAuthClient(
            tenant_id=tenant_id,
            client_id=client_id,
            client_name=name,
            status="active",
            registration="cimd",
            redirect_uris=redirect_uris,
            allowed_scopes=scopes,
            meta=kept,
            metadata_expires_at=now + ttl,
        )
        try:
            with session.begin_nested():
                session.add(new)
                session.flush()
            return new
        except IntegrityError:
            row = session.exec(select(McpOAuthClient).where(McpOAuthClient.client_id == client_id)).one()
            if row.status != "active":
                raise OAuthProtocolError("invalid_client", "this client is disabled") from None
    row.client_name, row.redirect_uris, row.allowed_scopes, row.meta = name, redirect_uris, scopes, kept
    row.registration, row.metadata_expires_at, row.updated_at = "cimd", now + ttl, now
    session.add(row)
    session.flush()
    return row
