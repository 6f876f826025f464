"""Names for the ids that membership and collaborator rows carry (docs/web.md#settings).

Workspace members and collaborators are stored by id; people pick and recognise them by name
and email. ``subject_labels`` resolves a batch of ``(subject_type, subject_id)`` pairs in two
queries (one per subject type), so a list route never issues one query per row.

Trap: this reads, it does not authorize. Call it only with rows the caller was already allowed
to list (``list_collaborators`` / ``list_members`` did the check); subjects are always of the
object's own tenant (``check_subject``), so no other tenant's names leak through it. A deleted
user's row is anonymized by ``openkb.accounts.deletion`` and reads as such here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from sqlmodel import Session, col, select

from openkb.models import Group, User


@dataclass(frozen=True)
class SubjectLabel:
    name: str
    email: str | None  # None for a group
    status: str | None  # the user's status (None for a group)


NO_LABEL = SubjectLabel(name="", email=None, status=None)


def subject_labels(
    session: Session, subjects: Iterable[tuple[str, uuid.UUID]]
) -> dict[tuple[str, uuid.UUID], SubjectLabel]:
    pairs = set(subjects)
    user_ids = [sid for kind, sid in pairs if kind == "user"]
    group_ids = [sid for kind, sid in pairs if kind == "group"]
    out: dict[tuple[str, uuid.UUID], SubjectLabel] = {}
    if user_ids:
        for uid, name, email, status in session.exec(
            select(User.id, User.display_name, User.email, User.status).where(col(User.id).in_(user_ids))
        ).all():
            out[("user", uid)] = SubjectLabel(name=name, email=email, status=status)
    if group_ids:
        for gid, name in session.exec(select(Group.id, Group.name).where(col(Group.id).in_(group_ids))).all():
            out[("group", gid)] = SubjectLabel(name=name, email=None, status=None)
    return out


def user_id_by_email(session: Session, email: str) -> uuid.UUID | None:
    """The id behind an email (stored lower-case), or None. For filters (the audit log's actor):
    an unknown address matches nothing, it is not an error, so it tells nobody whether the
    address has an account."""
    return session.exec(select(User.id).where(User.email == email.strip().lower())).first()


__all__ = ["NO_LABEL", "SubjectLabel", "subject_labels", "user_id_by_email"]
