"""Who is calling: FastAPI dependencies that turn a request into a ``Principal``.

Two credentials are accepted:

* the ``openkb_session`` cookie (browser): a server-side ``user_sessions`` row, re-checked on
  every request (revoked, expired, user no longer active -> treated as no cookie). Unsafe
  methods must echo the session's CSRF token in ``X-CSRF-Token``.
* ``Authorization: Bearer kbpat_...`` (scripts, MCP): a personal access token with scopes. It
  wins over a cookie and needs no CSRF token (a cross-site page cannot set that header). A bad
  bearer token is a hard 401, never a silent fall-back to anonymous.

No credentials is ``Principal.anonymous(default tenant)``: whether anonymous may read anything is
the permission service's decision, not this module's.

Usage in a route::

    def get_thing(session: SessionDep, principal: PrincipalDep): ...      # anyone
    def edit(session: SessionDep, principal: UserDep): ...                # signed in
    def write(principal: Annotated[Principal, Depends(require_scopes("doc:write"))]): ...
    def admin_page(session: SessionDep, principal: AdminDep): ...         # tenant/system admin
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import Depends, HTTPException, Request
from sqlmodel import Session

from openkb.accounts.sessions import resolve_session
from openkb.accounts.tokens import principal_for, resolve_pat
from openkb.accounts.users import AdminScope, access_admin
from openkb.errors import CsrfFailed, InsufficientScope
from openkb.models import Tenant
from openkb.permissions.principal import Principal
from server.deps import SessionDep

SESSION_COOKIE = "openkb_session"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})

_default_tenant_ids: dict[str, uuid.UUID] = {}


@dataclass(frozen=True)
class AuthInfo:
    """The resolved credential of one request (cached per request by FastAPI)."""

    principal: Principal
    via: Literal["session", "token", "none"]
    session_id: uuid.UUID | None = None
    token_id: uuid.UUID | None = None
    csrf_token: str | None = None


def client_ip(request: Request) -> str | None:
    """The peer address (uvicorn rewrites it from X-Forwarded-For only for trusted proxies)."""
    return request.client.host if request.client else None


def user_agent(request: Request) -> str | None:
    ua = request.headers.get("user-agent")
    return ua[:500] if ua else None


def unauthenticated(detail: str) -> HTTPException:
    """A 401 rendered as ``{"error": "UNAUTHENTICATED", ...}`` with the RFC 6750 challenge."""
    return HTTPException(status_code=401, detail=detail, headers={"WWW-Authenticate": "Bearer"})


def default_tenant_id(session: Session) -> uuid.UUID:
    """The instance's default tenant (anonymous visitors, OAuth clients), remembered per database.

    The remembered id is checked to exist (one lookup by key): on a database with no default
    tenant yet, the first request creates it, and when that request then fails its transaction is
    rolled back. The id of the row that never was used to stay remembered, so every OAuth
    registration failed (a foreign key, 500) and anonymous readers saw nothing, until a restart."""
    key = str(session.get_bind().engine.url)
    tid = _default_tenant_ids.get(key)
    if tid is None or session.get(Tenant, tid) is None:
        from openkb.bootstrap import default_tenant

        tid = default_tenant(session).id
        _default_tenant_ids[key] = tid
    return tid


def _bearer(request: Request) -> str | None:
    h = request.headers.get("authorization")
    if not h:
        return None
    scheme, _, value = h.partition(" ")
    if scheme.lower() != "bearer":
        raise unauthenticated("unsupported Authorization scheme; use 'Bearer kbpat_...'")
    return value.strip()


def get_auth(request: Request, session: SessionDep) -> AuthInfo:
    bearer = _bearer(request)
    if bearer is not None:
        resolved = resolve_pat(session, bearer)
        if resolved is None:
            raise unauthenticated("the access token is invalid, expired or revoked")
        info = AuthInfo(principal=principal_for(resolved), via="token", token_id=resolved.row.id)
    else:
        cookie = request.cookies.get(SESSION_COOKIE)
        live = resolve_session(session, cookie) if cookie else None
        if live is None:
            info = AuthInfo(principal=Principal.anonymous(default_tenant_id(session)), via="none")
        else:
            if request.method.upper() not in SAFE_METHODS:
                sent = request.headers.get(CSRF_HEADER) or ""
                if not secrets.compare_digest(sent.encode(), live.row.csrf_token.encode()):
                    raise CsrfFailed(
                        f"missing or wrong {CSRF_HEADER} header (it is returned by login and /api/auth/me)"
                    )
            info = AuthInfo(
                principal=Principal.user(live.user, live.row.tenant_id),
                via="session",
                session_id=live.row.id,
                csrf_token=live.row.csrf_token,
            )
    request.state.auth = info
    return info


AuthDep = Annotated[AuthInfo, Depends(get_auth)]


def get_principal(auth: AuthDep) -> Principal:
    return auth.principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def require_user(auth: AuthDep) -> Principal:
    if not auth.principal.is_user:
        raise unauthenticated("sign in (session cookie) or send 'Authorization: Bearer kbpat_...'")
    return auth.principal


UserDep = Annotated[Principal, Depends(require_user)]


def check_scopes(principal: Principal, *scopes: str) -> None:
    """Raise INSUFFICIENT_SCOPE (``token lacks scope doc:write``) unless a token principal holds
    every scope (sessions hold all). Call it before any object is looked up, so the answer names
    the scope rather than an object permission the user may well have."""
    if principal.scopes is None:
        return
    missing = [s for s in scopes if s not in principal.scopes]
    if missing:
        named = f"scope {missing[0]}" if len(missing) == 1 else f"scopes {', '.join(missing)}"
        raise InsufficientScope(f"token lacks {named}", required=list(scopes), missing=missing)


def check_any_scope(principal: Principal, *scopes: str) -> None:
    """Like ``check_scopes``, but one of ``scopes`` suffices (``token lacks scope doc:write or kb:write``)."""
    if principal.scopes is None or principal.scopes & set(scopes):
        return
    raise InsufficientScope(f"token lacks scope {' or '.join(scopes)}", required_any=list(scopes))


def require_scopes(*scopes: str):  # noqa: ANN201 - a FastAPI dependency
    """Dependency: the caller (any kind) must not be a token missing one of ``scopes``.

    Anonymous callers pass (they have no token to narrow); the permission service still decides
    what they may do. Combine with ``UserDep`` when the route needs a signed-in user.
    """

    def dep(auth: AuthDep) -> Principal:
        check_scopes(auth.principal, *scopes)
        return auth.principal

    return dep


def require_admin(request: Request, session: SessionDep, auth: AuthDep) -> Principal:
    """tenant_admin of the principal's tenant or system_admin; a token also needs ``admin``.

    Being an admin grants administration only, never content reads (docs/permissions.md#administrators).
    """
    principal = require_user(auth)
    check_scopes(principal, "admin")
    request.state.admin_scope = access_admin(session, principal)
    return principal


AdminDep = Annotated[Principal, Depends(require_admin)]


def get_admin_scope(request: Request, principal: AdminDep) -> AdminScope:  # noqa: ARG001 - ordering
    return request.state.admin_scope  # type: ignore[no-any-return]


AdminScopeDep = Annotated[AdminScope, Depends(get_admin_scope)]
"""What the admin may administer (``is_system_admin``, ``tenant_id``); implies ``AdminDep``."""
