"""Who may see (and so revert) a row of the change log: ``rules.change_visible``, in the two forms
the change log needs.

* ``access_change``: one change by id — fetch, decide with the rule, NotFound for a change that
  does not exist and for one the caller may not see (the ``access_*`` contract).
* ``change_scope``: the SQL condition a listing adds to its query. It is the rule evaluated
  ahead of time: the caller's own changes, or a change whose ``knowledge_base_id`` is one of the
  knowledge bases ``rules.kb_allows(..., KbAction.MANAGE)`` accepts. tests/permissions proves the
  condition selects exactly the rows ``change_visible`` accepts.

Trap: a change names its knowledge base only in its JSON states (``after_state`` first, then
``before_state``: a removal has only a before state); ``kb_of_state`` and the SQL expression
must read it the same way.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, false, or_, text
from sqlmodel import Session, col, select

from openkb.errors import NotFound
from openkb.models import Change, KnowledgeBase
from openkb.permissions import rules
from openkb.permissions.loader import load_snapshot
from openkb.permissions.principal import Principal
from openkb.permissions.rules import KbAction

CHANGE_NOT_FOUND = "change not found"
# the SQL twin of ``kb_of_state``
KB_OF_CHANGE_SQL = "coalesce(changes.after_state ->> 'knowledge_base_id', changes.before_state ->> 'knowledge_base_id')"


def kb_of_state(change: Change) -> uuid.UUID | None:
    """The knowledge base a change happened in (None: workspace-level, or unreadable)."""
    raw = (change.after_state or {}).get("knowledge_base_id") or (change.before_state or {}).get("knowledge_base_id")
    try:
        return uuid.UUID(str(raw)) if raw else None
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class ChangeScope:
    """The change rows a principal may see, as facts: ``user_id`` (own changes; None = nothing
    at all) and the knowledge bases whose every change it sees."""

    tenant_id: uuid.UUID | None
    user_id: uuid.UUID | None
    managed_kb_ids: frozenset[str]

    def clause(self) -> Any:
        """SQL condition over ``changes`` (tenant included)."""
        if self.user_id is None or self.tenant_id is None:
            return false()
        own = col(Change.actor_id) == self.user_id
        if self.managed_kb_ids:
            own = or_(
                own, text(f"{KB_OF_CHANGE_SQL} = ANY(:managed_kbs)").bindparams(managed_kbs=sorted(self.managed_kb_ids))
            )
        return and_(col(Change.tenant_id) == self.tenant_id, own)


def change_scope(session: Session, principal: Principal, kb_id: uuid.UUID | None = None) -> ChangeScope:
    """``kb_id``: only that knowledge base's manage right is decided (a listing filtered to it);
    else every knowledge base of the caller's tenant (two statements: ids, then one decision)."""
    if principal.kind != "user" or principal.user_id is None or principal.tenant_id is None:
        return ChangeScope(None, None, frozenset())
    if kb_id is not None:
        kb_ids = [str(kb_id)]
    else:
        kb_ids = [
            str(k)
            for k in session.exec(
                select(KnowledgeBase.id).where(col(KnowledgeBase.tenant_id) == principal.tenant_id)
            ).all()
        ]
    snap = load_snapshot(session, principal, kb_ids=kb_ids)
    v = snap.viewer
    tenant = str(principal.tenant_id)
    if not rules.change_visible(v, tenant, str(principal.user_id), None):  # not even its own: inactive
        return ChangeScope(None, None, frozenset())
    managed = frozenset(k for k in kb_ids if rules.kb_allows(v, snap.kbs.get(k), KbAction.MANAGE))
    return ChangeScope(principal.tenant_id, principal.user_id, managed)


def access_change(session: Session, principal: Principal, change_id: uuid.UUID) -> Change:
    """A change the caller may see (own, or in a knowledge base it manages); else NotFound."""
    if principal.kind != "user" or principal.tenant_id is None:
        raise NotFound(CHANGE_NOT_FOUND)
    row = session.get(Change, change_id)
    if row is None:
        raise NotFound(CHANGE_NOT_FOUND)
    kb = kb_of_state(row)
    snap = load_snapshot(session, principal, kb_ids=[str(kb)] if kb else [])
    facts = snap.kbs.get(str(kb)) if kb else None
    if not rules.change_visible(snap.viewer, str(row.tenant_id), str(row.actor_id) if row.actor_id else None, facts):
        raise NotFound(CHANGE_NOT_FOUND)
    return row
