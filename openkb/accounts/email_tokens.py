"""One-time tokens that travel by mail (verify email, reset password). Hash only in the database.

Issuing a token voids the user's earlier unused tokens of the same purpose, so only the latest
mail works; consuming locks the row, so two clicks on one link cannot both succeed.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Literal
from urllib.parse import quote

from sqlalchemy import update
from sqlmodel import Session, select

from openkb.db import after_commit
from openkb.errors import InvalidToken, ServiceUnavailable
from openkb.models import EmailToken, User
from openkb.models._base import utcnow

log = logging.getLogger("openkb.accounts")

Purpose = Literal["verify_email", "password_reset"]
TTL: dict[str, timedelta] = {"verify_email": timedelta(hours=48), "password_reset": timedelta(hours=1)}
_PREFIX = {"verify_email": "kbverify", "password_reset": "kbreset"}


def issue(session: Session, user_id: uuid.UUID, purpose: Purpose) -> str:
    """New token for ``user_id``; returns the plaintext (goes into the mail only)."""
    from openkb.security import new_token

    now = utcnow()
    session.execute(
        update(EmailToken)
        .where(
            EmailToken.user_id == user_id,
            EmailToken.purpose == purpose,  # type: ignore[arg-type]
            EmailToken.used_at.is_(None),
        )  # type: ignore[union-attr]
        .values(used_at=now)
    )
    plaintext, token_hash = new_token(_PREFIX[purpose])
    session.add(EmailToken(user_id=user_id, purpose=purpose, token_hash=token_hash, expires_at=now + TTL[purpose]))
    session.flush()
    return plaintext


def consume(session: Session, token: str, purpose: Purpose) -> EmailToken:
    """Mark the token used and return it; unknown, used and expired tokens are all INVALID_TOKEN."""
    from openkb.security import hash_token

    if not token or len(token) > 200:
        raise InvalidToken("this link is invalid or has expired")
    row = session.exec(
        select(EmailToken)
        .where(EmailToken.token_hash == hash_token(token), EmailToken.purpose == purpose)
        .with_for_update()
    ).first()
    now = utcnow()
    if row is None or row.used_at is not None or row.expires_at <= now:
        raise InvalidToken("this link is invalid or has expired")
    row.used_at = now
    session.add(row)
    session.flush()
    return row


def void_all(session: Session, user_id: uuid.UUID, purpose: Purpose) -> None:
    session.execute(
        update(EmailToken)
        .where(
            EmailToken.user_id == user_id,
            EmailToken.purpose == purpose,  # type: ignore[arg-type]
            EmailToken.used_at.is_(None),
        )  # type: ignore[union-attr]
        .values(used_at=utcnow())
    )


def link(ctx, path: str, token: str) -> str:  # noqa: ANN001 - AppContext
    return f"{ctx.settings.app_base_url.rstrip('/')}/{path.lstrip('/')}?token={token}"


def mail_after_commit(session: Session, ctx, to: str, subject: str, body: str) -> None:  # noqa: ANN001
    """Send once the token row is committed (a rolled-back request mails nothing).

    A mail failure is logged, not raised: the account change is already committed, and an admin
    can resend the verification mail.
    """

    def send() -> None:
        try:
            ctx.mailer.send(to, subject, body)
        except ServiceUnavailable as exc:  # the relay is down or refused: one line says which
            log.error("could not send %r to %s: %s", subject, to, exc)
        except Exception:  # noqa: BLE001
            log.exception("could not send %r to %s", subject, to)

    after_commit(session, send)


def send_verification(session: Session, ctx, user: User, *, invitation_token: str | None = None) -> None:  # noqa: ANN001
    """Mail the verification link; a sign-up through an invitation carries the invitation token
    in the link too, so verifying accepts it (docs/accounts.md#invitations-and-registration) without storing it anywhere."""
    token = issue(session, user.id, "verify_email")
    url = link(ctx, "/verify-email", token)
    if invitation_token:
        url += f"&invitation={quote(invitation_token, safe='')}"
    body = (
        f"Hello {user.display_name},\n\nconfirm your email address for OpenKB by opening this link:\n\n"
        f"{url}\n\nThe link is valid for 48 hours. If you did not sign up, ignore this mail.\n"
    )
    mail_after_commit(session, ctx, user.email, "Confirm your email address", body)


def send_password_reset(session: Session, ctx, user: User) -> None:  # noqa: ANN001
    token = issue(session, user.id, "password_reset")
    url = link(ctx, "/reset-password", token)
    body = (
        f"Hello {user.display_name},\n\nsomeone asked to reset your OpenKB password. To choose a new one, "
        f"open:\n\n{url}\n\nThe link is valid for 1 hour. If it wasn't you, ignore this mail; "
        "your password stays as it is.\n"
    )
    mail_after_commit(session, ctx, user.email, "Reset your password", body)
