"""Password reset by mailed link.

``request_reset`` behaves the same whether or not the email has an account (the route always
answers 202), and is throttled per address so it can't be used to mail-bomb someone. Confirming
a reset revokes every session of the user: whoever knew the old password is signed out.
"""

from __future__ import annotations

from sqlmodel import Session, select

from openkb import ratelimit
from openkb.accounts import email_tokens
from openkb.accounts.registration import primary_tenant_id
from openkb.accounts.sessions import revoke_user_sessions
from openkb.accounts.users import check_password, normalize_email
from openkb.audit import record_audit
from openkb.errors import ValidationError
from openkb.models import User
from openkb.models._base import utcnow
from openkb.permissions.principal import Principal

RESET_MAILS_PER_HOUR = 5


def request_reset(
    session: Session,
    ctx,
    email: str,
    *,
    ip: str | None = None,  # noqa: ANN001
    user_agent: str | None = None,
) -> None:
    try:
        email_n = normalize_email(email)
    except ValidationError:
        return
    if not ratelimit.hit(session, f"pwreset:{email_n}", RESET_MAILS_PER_HOUR, 3600):
        return  # silently: the answer must not differ
    user = session.exec(select(User).where(User.email == email_n)).first()
    if user is None or user.status == "deleted":
        return
    email_tokens.send_password_reset(session, ctx, user)
    tenant_id = primary_tenant_id(session, user.id)
    record_audit(
        session,
        tenant_id=tenant_id,
        actor=Principal.anonymous(tenant_id),
        action="user.password_reset_requested",
        object_type="user",
        object_id=user.id,
        ip=ip,
        user_agent=user_agent,
        metadata={},
    )


def confirm_reset(
    session: Session, token: str, password: str, *, ip: str | None = None, user_agent: str | None = None
) -> User:
    from openkb.security import hash_password

    et = email_tokens.consume(session, token, "password_reset")
    user = session.exec(select(User).where(User.id == et.user_id).with_for_update()).one()
    # once the account is known (not its own email or name); a refusal rolls the token back
    check_password(password, user.email, user.display_name)
    user.password_hash = hash_password(password)
    user.updated_at = utcnow()
    session.add(user)
    session.flush()
    email_tokens.void_all(session, user.id, "password_reset")
    killed = revoke_user_sessions(session, user.id)
    tenant_id = primary_tenant_id(session, user.id)
    record_audit(
        session,
        tenant_id=tenant_id,
        actor=Principal.user(user, tenant_id) if tenant_id else None,
        action="user.password_reset",
        object_type="user",
        object_id=user.id,
        ip=ip,
        user_agent=user_agent,
        metadata={"sessions_revoked": killed},
    )
    return user
