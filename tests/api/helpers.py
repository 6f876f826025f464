"""Helpers for API tests: accounts, signed-in clients, tokens, the mail outbox, auth settings.

The slow-but-real path goes over HTTP (``register_user(http, ...)``, ``login``); the fast path
writes rows directly (``make_user_with_pat``, ``make_login_user``) for tests that are about
something else and just need a caller.
"""

from __future__ import annotations

import contextlib
import email
import re
import socketserver
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email import policy
from pathlib import Path
from typing import Any

import httpx
from sqlmodel import Session, select

from openkb.accounts.tokens import issue_pat
from openkb.bootstrap import default_tenant
from openkb.mail import Mailer
from openkb.models import AuthSettings, Tenant, TenantMembership, User
from openkb.security import hash_password

PASSWORD = "correct horse battery staple"
ALL_SCOPES = ("kb:read", "kb:search", "doc:read", "doc:write", "kb:write", "admin")
_HASH_CACHE: dict[str, str] = {}


def unique_email(prefix: str = "user", domain: str = "example.com") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}@{domain}"


def _password_hash(password: str) -> str:
    # argon2id is deliberately slow; fast-path users share one hash per password.
    if password not in _HASH_CACHE:
        _HASH_CACHE[password] = hash_password(password)
    return _HASH_CACHE[password]


@dataclass
class Account:
    email: str
    password: str
    user_id: uuid.UUID | None
    status: str | None
    response: httpx.Response | None = None


def register_user(
    target: httpx.Client | Session,
    email: str | None = None,
    password: str = PASSWORD,
    display_name: str | None = None,
    *,
    expect: int | None = 201,
    **extra: Any,
) -> Account:
    """Register over HTTP (``target`` an httpx client) or insert an active user directly
    (``target`` a Session; it is committed). ``expect`` asserts the HTTP status (None: don't)."""
    email = email or unique_email()
    if isinstance(target, Session):
        user = _insert_user(target, default_tenant(target), email=email, password=password, display_name=display_name)
        target.commit()
        return Account(email=email, password=password, user_id=user.id, status=user.status)
    body: dict[str, Any] = {"email": email, "password": password, **extra}
    if display_name is not None:
        body["display_name"] = display_name
    r = target.post("/api/auth/register", json=body)
    if expect is not None:
        assert r.status_code == expect, r.text
    user = r.json().get("user") if r.status_code == 201 else None
    return Account(
        email=email,
        password=password,
        user_id=uuid.UUID(user["id"]) if user else None,
        status=user["status"] if user else None,
        response=r,
    )


def login(
    http: httpx.Client | str, email: str, password: str = PASSWORD, *, user_agent: str | None = None
) -> httpx.Client:
    """A new client signed in with a session cookie that sends ``X-CSRF-Token`` on every call
    (its session records ``user_agent`` when given). Close it (or use it as a context manager)
    when done."""
    base = (http if isinstance(http, str) else str(http.base_url)).rstrip("/")
    headers = {"User-Agent": user_agent} if user_agent else {}
    r = httpx.post(base + "/api/auth/login", json={"email": email, "password": password}, headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    # A fresh, unopened client so callers may use it as a context manager.
    return httpx.Client(base_url=base, timeout=30, cookies=r.cookies, headers={"X-CSRF-Token": r.json()["csrf_token"]})


def bearer_client(base_url: str | httpx.Client, token: str) -> httpx.Client:
    base = base_url if isinstance(base_url, str) else str(base_url.base_url)
    return httpx.Client(base_url=base, timeout=30, headers={"Authorization": f"Bearer {token}"})


def _insert_user(
    s: Session,
    tenant: Tenant,
    *,
    email: str | None = None,
    password: str | None = PASSWORD,
    display_name: str | None = None,
    role: str = "member",
    status: str = "active",
) -> User:
    email = email or unique_email()
    u = User(
        email=email.lower(),
        display_name=display_name or email.split("@")[0],
        status=status,
        password_hash=_password_hash(password) if password else None,
    )
    s.add(u)
    s.flush()
    s.add(TenantMembership(tenant_id=tenant.id, user_id=u.id, role=role))
    s.flush()
    return u


def make_login_user(
    committed: Callable[[], Session],
    tenant: Tenant | None = None,
    *,
    role: str = "member",
    status: str = "active",
    password: str = PASSWORD,
    email: str | None = None,
) -> Account:
    """Fast path: a committed user (with password) in ``tenant`` (default: the default tenant)."""
    with committed() as s:
        t = tenant or default_tenant(s)
        u = _insert_user(s, t, email=email, password=password, role=role, status=status)
        s.commit()
        return Account(email=u.email, password=password, user_id=u.id, status=u.status)


def make_user_with_pat(
    committed: Callable[[], Session],
    tenant: Tenant | None = None,
    *,
    scopes: tuple[str, ...] | list[str] = ("kb:read", "kb:search", "doc:read", "doc:write"),
    role: str = "member",
    status: str = "active",
    user: User | None = None,
    password: str | None = PASSWORD,
) -> tuple[User, str]:
    """Fast path: a committed user in ``tenant`` (default: the default tenant) and a PAT for them.
    Pass ``user`` to mint a token for an existing user (its membership in ``tenant`` must exist).
    Returns (user, plaintext token) — use with ``bearer_client(live_server, token)``."""
    with committed() as s:
        t = tenant or default_tenant(s)
        u = user or _insert_user(s, t, password=password, role=role, status=status)
        _, token = issue_pat(s, tenant_id=t.id, user_id=u.id, name="test token", scopes=list(scopes))
        s.commit()
        return u, token


# --- outbox -------------------------------------------------------------------------------------


def outbox_messages(home: Path, to: str) -> list[email.message.EmailMessage]:
    out = []
    box = home / "outbox"
    if not box.exists():
        return []
    for p in sorted(box.glob("*.eml")):
        msg = email.message_from_bytes(p.read_bytes(), policy=policy.default)
        if str(msg["To"]).strip().lower() == to.lower():
            out.append(msg)
    return out  # type: ignore[return-value]


def mailed_token(home: Path, to: str, path: str = "/verify-email", timeout: float = 5.0) -> str:
    """The token of the newest mail to ``to`` linking ``{APP_BASE_URL}{path}?token=...``."""
    pat = re.compile(re.escape(path) + r"\?token=([A-Za-z0-9_\-]+)")
    deadline = time.monotonic() + timeout
    while True:
        for msg in reversed(outbox_messages(home, to)):
            m = pat.search(msg.get_content())
            if m:
                return m.group(1)
        if time.monotonic() > deadline:
            raise AssertionError(f"no mail to {to} with a {path} link in {home / 'outbox'}")
        time.sleep(0.05)


class SmtpSink(socketserver.ThreadingTCPServer):
    """A minimal SMTP server (RFC 5321's commands a client sends for one plain message) that
    keeps what it receives in ``messages``."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _SmtpSession)
        self.messages: list[email.message.EmailMessage] = []

    @property
    def port(self) -> int:
        return self.server_address[1]


class _SmtpSession(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.wfile.write(b"220 sink ready\r\n")
        while line := self.rfile.readline():
            verb = line[:4].upper()
            if verb == b"EHLO":
                self.wfile.write(b"250-sink\r\n250 8BITMIME\r\n")
            elif verb == b"DATA":
                self.wfile.write(b"354 end with .\r\n")
                data = bytearray()
                while (chunk := self.rfile.readline()) not in (b".\r\n", b""):
                    data += chunk[1:] if chunk.startswith(b"..") else chunk
                self.server.messages.append(email.message_from_bytes(bytes(data), policy=policy.default))
                self.wfile.write(b"250 queued\r\n")
            elif verb == b"QUIT":
                self.wfile.write(b"221 bye\r\n")
                return
            else:  # HELO, MAIL, RCPT, RSET, NOOP
                self.wfile.write(b"250 ok\r\n")


@contextlib.contextmanager
def smtp_delivery(app_ctx) -> Iterator[SmtpSink]:
    """The live server's mail goes to an SMTP server on loopback for the block."""
    sink = SmtpSink()
    thread = threading.Thread(target=sink.serve_forever, daemon=True)
    thread.start()
    before = app_ctx.mailer
    app_ctx.mailer = Mailer(app_ctx.settings.model_copy(update={"smtp_host": "127.0.0.1", "smtp_port": sink.port}))
    try:
        yield sink
    finally:
        app_ctx.mailer = before
        sink.shutdown()
        sink.server_close()


# --- auth settings -------------------------------------------------------------------------------


@contextlib.contextmanager
def auth_settings_override(
    committed: Callable[[], Session], tenant: Tenant | None = None, **changes: Any
) -> Iterator[AuthSettings]:
    """Give ``tenant`` (default: the default tenant, which self-registration joins) its own
    auth_settings row with ``changes`` for the duration of the block, then restore exactly what
    was there (previous override or none). The instance default row is never touched."""
    with committed() as s:
        t = tenant or default_tenant(s)
        tenant_id = t.id
        prev = s.exec(select(AuthSettings).where(AuthSettings.tenant_id == tenant_id)).first()
        saved = None if prev is None else prev.model_dump(exclude={"id", "tenant_id", "created_at", "updated_at"})
        if prev is not None:
            s.delete(prev)
            s.flush()
        base: dict[str, Any] = dict(
            registration_enabled=True,
            email_verification_required=False,
            default_signup_status="active",
            invited_user_auto_active=True,
            allowed_email_domains=None,
            invite_required=False,
            first_user_becomes_admin=False,
        )
        base.update(changes)
        row = AuthSettings(tenant_id=tenant_id, **base)
        s.add(row)
        s.commit()
    try:
        yield row
    finally:
        with committed() as s:
            cur = s.exec(select(AuthSettings).where(AuthSettings.tenant_id == tenant_id)).first()
            if cur is not None:
                s.delete(cur)
                s.flush()
            if saved is not None:
                s.add(AuthSettings(tenant_id=tenant_id, **saved))
            s.commit()


def app_routes(routes: Any) -> Iterator[Any]:
    """Every route of an app or router, the ones of included routers too (FastAPI >= 0.16x keeps
    an included router as one entry of ``app.routes`` that holds the router's own routes)."""
    for route in getattr(routes, "routes", routes):
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from app_routes(inner.routes)
        else:
            yield route
