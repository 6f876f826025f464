"""Server-side login sessions: login, resolve-on-every-request, logout, revoke-all.

The cookie carries an opaque token; only its SHA-256 is stored. ``resolve_session`` re-reads the
row *and the user's status* on every request, which is what makes logout, suspension and
password reset take effect on the very next request (no signed, self-contained cookie that
stays valid until it expires).
"""

from __future__ import annotations

import logging
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NoReturn

from sqlalchemy import text, update
from sqlmodel import Session, select

from openkb.accounts.users import normalize_email
from openkb.audit import record_audit
from openkb.db import commit_apart, record_then_refuse
from openkb.errors import (
    AccountPendingActivation,
    AccountSuspended,
    EmailNotVerified,
    InvalidCredentials,
    RateLimited,
    ValidationError,
)
from openkb.models import Tenant, TenantMembership, User, UserSession
from openkb.models._base import utcnow
from openkb.permissions.principal import Principal

log = logging.getLogger("openkb.accounts")

SESSION_TOKEN_PREFIX = "kbsess"
LAST_SEEN_EVERY = timedelta(minutes=1)

# Login throttling (docs/accounts.md#login-and-sessions): failed attempts per account and per client IP, in a
# fixed one-minute window stored in PostgreSQL so every API replica shares the count. Every attempt
# is booked before its password is checked (parallel guesses see each other) and a right one is
# given back.
# Module-level so an operator (or a test) can tune them; the window is in seconds.
LOGIN_WINDOW_SECONDS = 60
LOGIN_LIMIT_PER_ACCOUNT = 10
LOGIN_LIMIT_PER_IP = 30
# Live sessions one user may hold; a new login past it ends the least recently used ones, so a
# script logging in in a loop cannot grow ``user_sessions`` without bound (issue 17;
# docs/accounts.md#login-and-sessions). The account page lists the live ones.
MAX_SESSIONS_PER_USER = 50

# An argon2id hash of a random string: verifying against it when the email is unknown makes
# "no such user" take as long as "wrong password".
_DUMMY_HASH: str | None = None


@dataclass(frozen=True)
class ResolvedSession:
    row: UserSession
    user: User


@dataclass(frozen=True)
class LoginResult:
    session: UserSession
    token: str  # plaintext: goes into the cookie, never stored
    user: User


def status_error(user: User) -> Exception | None:
    """The login refusal for a user who proved their password but may not sign in."""
    return {
        "pending_email_verification": EmailNotVerified("confirm your email address first (see the link we mailed you)"),
        "pending_activation": AccountPendingActivation("an administrator has not activated this account yet"),
        "suspended": AccountSuspended("this account is suspended"),
        "deleted": InvalidCredentials("wrong email or password"),
    }.get(user.status)


def _dummy_hash() -> str:
    global _DUMMY_HASH
    if _DUMMY_HASH is None:
        from openkb.security import hash_password

        _DUMMY_HASH = hash_password(secrets.token_urlsafe(16))
    return _DUMMY_HASH


def login_tenant(session: Session, user: User, tenant_slug: str | None = None) -> uuid.UUID:
    """Which tenant the session acts in: the requested one, else the default tenant, else the oldest."""
    rows = session.exec(
        select(TenantMembership.tenant_id, Tenant.slug)  # type: ignore[call-overload]
        .join(Tenant, Tenant.id == TenantMembership.tenant_id)
        .where(TenantMembership.user_id == user.id)
        .order_by(TenantMembership.created_at)
    ).all()
    if not rows:
        raise InvalidCredentials("wrong email or password")
    if tenant_slug:
        for tid, slug in rows:
            if slug == tenant_slug or str(tid) == tenant_slug:
                return tid  # type: ignore[no-any-return]
        raise InvalidCredentials("wrong email or password")
    from openkb.bootstrap import DEFAULT_TENANT_SLUG

    for tid, slug in rows:
        if slug == DEFAULT_TENANT_SLUG:
            return tid  # type: ignore[no-any-return]
    return rows[0][0]  # type: ignore[no-any-return]


def _throttle_keys(email: str, ip: str | None) -> list[tuple[str, int]]:
    keys = [(f"login:acct:{email}", LOGIN_LIMIT_PER_ACCOUNT)]
    if ip:
        keys.append((f"login:ip:{ip}", LOGIN_LIMIT_PER_IP))
    return keys


def _book_attempt(session: Session, email: str, ip: str | None) -> None:
    """Count this attempt in both buckets *before* the password is checked, committed at once,
    and refuse it when either is over its limit.

    Why before: the count must be what every concurrent attempt sees. Peeking, checking the
    password (argon2, tens of milliseconds) and counting a failure afterwards let a burst of
    parallel guesses all pass the peek before any of them was counted, so 25 at once were all
    checked against a limit of 10 (docs/accounts.md#login-and-sessions). ``ratelimit.hit`` is one
    atomic upsert: concurrent attempts serialise on the bucket row and each sees its own count.
    Committed apart (``commit_apart``) so the count stands whatever becomes of the request, and
    so this request holds no lock on a bucket afterwards. A refused attempt stays counted too
    (the window is a fixed minute, so that changes nothing but the number stored)."""
    from openkb import ratelimit

    def book(s: Session) -> bool:
        return all([ratelimit.hit(s, key, limit, LOGIN_WINDOW_SECONDS) for key, limit in _throttle_keys(email, ip)])

    if not commit_apart(session, book):
        raise RateLimited("too many login attempts; wait a minute and try again", retry_after=LOGIN_WINDOW_SECONDS)


def _give_back(session: Session, email: str, ip: str | None) -> None:
    """The password was right: un-count the attempt ``_book_attempt`` booked, so only failures
    count toward the limits and a user may sign in as often as they like."""
    from openkb import ratelimit

    def give(s: Session) -> None:
        for key, _limit in _throttle_keys(email, ip):
            ratelimit.give_back(s, key, LOGIN_WINDOW_SECONDS)

    commit_apart(session, give)


def _refuse_login(session: Session, email: str, user: User | None, ip: str | None, user_agent: str | None) -> NoReturn:
    """Audit a failed attempt, then raise INVALID_CREDENTIALS.

    The audit row is committed apart (``openkb.db.record_then_refuse``): the request's unit of
    work is rolled back by the error. The attempt itself was counted before the password was
    checked (``_book_attempt``) and simply stays counted.
    """
    tenant_id = None
    if user is not None:
        tenant_id = session.exec(
            select(TenantMembership.tenant_id)
            .where(TenantMembership.user_id == user.id)
            .order_by(TenantMembership.created_at)
        ).first()

    def record(s: Session) -> None:
        record_audit(
            s,
            tenant_id=tenant_id,
            actor=Principal.anonymous(tenant_id),
            action="auth.login_failed",
            object_type="user",
            object_id=user.id if user is not None else None,
            ip=ip,
            user_agent=user_agent,
            metadata={"email": email},
        )

    record_then_refuse(session, record, InvalidCredentials("wrong email or password"))


def login(
    session: Session,
    ctx,
    *,
    email: str,
    password: str,
    ip: str | None = None,  # noqa: ANN001
    user_agent: str | None = None,
    tenant: str | None = None,
) -> LoginResult:
    """Check the password, then the status; open a session row. Failed attempts are throttled:
    each attempt is booked before the password is checked and given back when it was right.

    Status is checked *after* the password so the status codes don't reveal which emails exist.
    """
    from openkb.security import hash_password, password_needs_rehash, verify_password

    try:
        email_n = normalize_email(email)
    except ValidationError:
        # A malformed address can't have an account: a wrong login, answered in the same time.
        verify_password(_dummy_hash(), password)
        raise InvalidCredentials("wrong email or password") from None
    _book_attempt(session, email_n, ip)
    user = session.exec(select(User).where(User.email == email_n)).first()
    ok = False
    if user is None or not user.password_hash:
        verify_password(_dummy_hash(), password)
    else:
        ok = verify_password(user.password_hash, password)
    if not ok or user is None or user.status == "deleted":
        _refuse_login(session, email_n, user, ip, user_agent)
    _give_back(session, email_n, ip)
    err = status_error(user)
    if err is not None:
        raise err
    tenant_id = login_tenant(session, user, tenant)
    if password_needs_rehash(user.password_hash or ""):
        user.password_hash = hash_password(password)
        session.add(user)
    result = open_session(session, ctx, user=user, tenant_id=tenant_id, ip=ip, user_agent=user_agent)
    record_audit(
        session,
        tenant_id=tenant_id,
        actor=Principal.user(user, tenant_id),
        action="auth.login",
        object_type="user",
        object_id=user.id,
        ip=ip,
        user_agent=user_agent,
        metadata={"session_id": result.session.id},
    )
    return result


def open_session(
    session: Session,
    ctx,
    *,
    user: User,
    tenant_id: uuid.UUID,
    ip: str | None = None,  # noqa: ANN001
    user_agent: str | None = None,
) -> LoginResult:
    from openkb.security import new_token

    token, token_hash = new_token(SESSION_TOKEN_PREFIX)
    now = utcnow()
    row = UserSession(
        tenant_id=tenant_id,
        user_id=user.id,
        token_hash=token_hash,
        csrf_token=secrets.token_urlsafe(32),
        ip=(ip or None) and ip[:100],
        user_agent=(user_agent or None) and user_agent[:500],
        expires_at=now + timedelta(hours=ctx.settings.session_ttl_hours),
        last_seen_at=now,
    )
    session.add(row)
    session.flush()
    session.execute(
        text(
            "UPDATE user_sessions SET revoked_at = now() WHERE id IN ("
            " SELECT id FROM user_sessions WHERE user_id = :u AND revoked_at IS NULL AND expires_at > now()"
            " ORDER BY last_seen_at DESC, created_at DESC OFFSET :cap)"
        ),
        {"u": user.id, "cap": MAX_SESSIONS_PER_USER},
    )
    return LoginResult(session=row, token=token, user=user)


def resolve_session(session: Session, token: str) -> ResolvedSession | None:
    """The live session for a cookie value, or None (unknown, revoked, expired, user not active,
    or no longer a member of the session's tenant)."""
    from openkb.security import hash_token

    if not token or len(token) > 200:
        return None
    found = session.exec(
        select(UserSession, User)  # type: ignore[call-overload]
        .join(User, User.id == UserSession.user_id)
        .join(
            TenantMembership,
            (TenantMembership.user_id == UserSession.user_id) & (TenantMembership.tenant_id == UserSession.tenant_id),
        )
        .where(UserSession.token_hash == hash_token(token))
    ).first()
    if found is None:
        return None
    row, user = found
    now = utcnow()
    if row.revoked_at is not None or row.expires_at <= now or user.status != "active":
        return None
    if row.last_seen_at < now - LAST_SEEN_EVERY:
        # Conditional UPDATE: concurrent requests of one session write at most once a minute.
        session.execute(
            text(
                "UPDATE user_sessions SET last_seen_at = now() WHERE id = :id "
                "AND last_seen_at < now() - interval '1 minute'"
            ),
            {"id": row.id},
        )
    return ResolvedSession(row=row, user=user)


def logout(
    session: Session,
    principal: Principal,
    session_id: uuid.UUID,
    *,
    ip: str | None = None,
    user_agent: str | None = None,
) -> None:
    res = session.execute(
        update(UserSession)
        .where(
            UserSession.id == session_id,
            UserSession.revoked_at.is_(None),  # type: ignore[union-attr,arg-type]
            UserSession.user_id == principal.user_id,
        )
        .values(revoked_at=utcnow())
    )
    if res.rowcount:  # type: ignore[attr-defined]
        record_audit(
            session,
            tenant_id=principal.tenant_id,
            actor=principal,
            action="auth.logout",
            object_type="user",
            object_id=principal.user_id,
            ip=ip,
            user_agent=user_agent,
            metadata={"session_id": session_id},
        )


def revoke_user_sessions(session: Session, user_id: uuid.UUID, *, except_id: uuid.UUID | None = None) -> int:
    """Revoke every live session of a user (suspension, password reset). Returns how many."""
    q = update(UserSession).where(UserSession.user_id == user_id, UserSession.revoked_at.is_(None))  # type: ignore[union-attr,arg-type]
    if except_id is not None:
        q = q.where(UserSession.id != except_id)  # type: ignore[arg-type]
    res = session.execute(q.values(revoked_at=utcnow()))
    return int(res.rowcount or 0)  # type: ignore[attr-defined]


def expires_in_seconds(row: UserSession, now: datetime | None = None) -> int:
    return max(0, int((row.expires_at - (now or utcnow())).total_seconds()))
