"""The signed-in user's own account: profile, password change, login sessions.

Everything here acts on ``principal.user_id`` only: there is no user id parameter, so one user
can never reach another's sessions (a foreign session id is NOT_FOUND, like an unknown one).

Trap: a password change revokes every *other* session of the user (whoever knew the old
password is signed out, as with a reset in ``passwords.confirm_reset``) but keeps the caller's
own session, otherwise the page that changed the password would be signed out mid-flow.
See docs/accounts.md#login-and-sessions.
"""

from __future__ import annotations

import uuid

from sqlalchemy import text, update
from sqlmodel import Session, select

from openkb import ratelimit
from openkb.accounts.sessions import revoke_user_sessions
from openkb.accounts.users import check_password
from openkb.audit import record_audit
from openkb.db import commit_apart
from openkb.errors import NotFound, RateLimited, Unauthenticated, ValidationError
from openkb.models import User, UserSession
from openkb.models._base import utcnow
from openkb.permissions.principal import Principal

# wrong current passwords per user and hour before the change is refused outright
PASSWORD_CHANGE_FAILURES_PER_HOUR = 10


def _me(session: Session, principal: Principal, *, lock: bool = False) -> User:
    if principal.user_id is None:
        raise Unauthenticated("sign in first")
    q = select(User).where(User.id == principal.user_id)
    if lock:
        q = q.with_for_update()
    user = session.exec(q).first()
    if user is None:
        raise Unauthenticated("sign in first")
    return user


_KEEP = object()


def update_profile(
    session: Session, principal: Principal, *, display_name: str, time_zone: str | None | object = _KEEP
) -> User:
    """``time_zone``: an IANA name PostgreSQL knows, or None/empty for UTC (left as is when not
    given); it decides the local day of the user's apps' quotas (docs/apps.md#limits-and-quotas)."""
    name = display_name.strip()
    if not name:
        raise ValidationError("display name must not be empty", field="display_name")
    user = _me(session, principal, lock=True)
    before = {"display_name": user.display_name, "time_zone": user.time_zone}
    user.display_name = name
    if time_zone is not _KEEP:
        user.time_zone = check_time_zone(session, time_zone)  # type: ignore[arg-type]
    after = {"display_name": user.display_name, "time_zone": user.time_zone}
    if after != before:
        user.updated_at = utcnow()
        session.add(user)
        session.flush()
        changed = [k for k in after if after[k] != before[k]]
        record_audit(
            session,
            tenant_id=principal.tenant_id,
            actor=principal,
            action="user.profile_updated",
            object_type="user",
            object_id=user.id,
            metadata={"before": {k: before[k] for k in changed}, "after": {k: after[k] for k in changed}},
        )
    return user


def check_time_zone(session: Session, value: str | None) -> str | None:
    """A zone PostgreSQL itself knows (it computes the local day), not just Python's list."""
    tz = (value or "").strip()
    if not tz:
        return None
    known = session.execute(
        text("SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = :tz)"), {"tz": tz}
    ).scalar()
    if len(tz) > 64 or not known:
        raise ValidationError(f"unknown time zone {tz!r} (an IANA name such as Asia/Shanghai)", field="time_zone")
    return tz


def change_password(
    session: Session,
    principal: Principal,
    *,
    current_password: str,
    new_password: str,
    keep_session_id: uuid.UUID | None,
) -> int:
    """Check the current password, set the new one, sign out every other session.

    Returns how many sessions were revoked. A wrong current password is a 422 on the field
    (not 401: the caller *is* signed in) and counts toward a per-user hourly limit, so a stolen
    session can't be used to guess the password; every attempt is counted before the check, so
    parallel ones see each other (docs/accounts.md#login-and-sessions)."""
    from openkb.security import hash_password, verify_password

    user = _me(session, principal, lock=True)
    key = f"pwchange:{user.id}"
    # Booked before the check and committed at once (as a login is, sessions._book_attempt): the
    # count must not depend on the user row lock above serialising concurrent changes, and it
    # outlives this request's rollback, or guessing would be free. A right password gives it back.
    if not commit_apart(session, lambda s: ratelimit.hit(s, key, PASSWORD_CHANGE_FAILURES_PER_HOUR, 3600)):
        raise RateLimited("too many wrong passwords; try again later", retry_after=3600)
    if not verify_password(user.password_hash, current_password):
        raise ValidationError("the current password is wrong", field="current_password")
    commit_apart(session, lambda s: ratelimit.give_back(s, key, 3600))
    check_password(new_password, user.email, user.display_name)
    user.password_hash = hash_password(new_password)
    user.updated_at = utcnow()
    session.add(user)
    session.flush()
    killed = revoke_user_sessions(session, user.id, except_id=keep_session_id)
    record_audit(
        session,
        tenant_id=principal.tenant_id,
        actor=principal,
        action="user.password_changed",
        object_type="user",
        object_id=user.id,
        metadata={"sessions_revoked": killed},
    )
    return killed


def list_sessions(session: Session, principal: Principal) -> list[UserSession]:
    """The caller's live sessions (not revoked, not expired), most recently seen first."""
    user = _me(session, principal)
    now = utcnow()
    return list(
        session.exec(
            select(UserSession)
            .where(
                UserSession.user_id == user.id,
                UserSession.revoked_at.is_(None),  # type: ignore[union-attr]
                UserSession.expires_at > now,  # type: ignore[arg-type]
            )
            .order_by(UserSession.last_seen_at.desc())  # type: ignore[attr-defined]
        ).all()
    )


def revoke_session(session: Session, principal: Principal, session_id: uuid.UUID) -> None:
    """Sign out one of the caller's sessions; someone else's id is NOT_FOUND."""
    user = _me(session, principal)
    res = session.execute(
        update(UserSession)
        .where(
            UserSession.id == session_id,  # type: ignore[arg-type]
            UserSession.user_id == user.id,  # type: ignore[arg-type]
            UserSession.revoked_at.is_(None),  # type: ignore[union-attr]
        )
        .values(revoked_at=utcnow())
    )
    if not res.rowcount:  # type: ignore[attr-defined]
        raise NotFound("no such session")
    record_audit(
        session,
        tenant_id=principal.tenant_id,
        actor=principal,
        action="auth.session_revoked",
        object_type="user",
        object_id=user.id,
        metadata={"session_id": session_id},
    )


def revoke_other_sessions(session: Session, principal: Principal, keep_session_id: uuid.UUID | None) -> int:
    """Sign out everywhere else: every live session but the caller's own."""
    user = _me(session, principal)
    killed = revoke_user_sessions(session, user.id, except_id=keep_session_id)
    record_audit(
        session,
        tenant_id=principal.tenant_id,
        actor=principal,
        action="auth.sessions_revoked",
        object_type="user",
        object_id=user.id,
        metadata={"sessions_revoked": killed},
    )
    return killed


__all__ = [
    "change_password",
    "list_sessions",
    "revoke_other_sessions",
    "revoke_session",
    "update_profile",
]
