"""The active alias' history (``milvus_alias_switches``) and what ``rollback`` means.

Milvus knows only where an alias points *now*. Rolling back needs "where did it point before the
last switch", and profile statuses cannot answer that (two rollbacks in a row used to flip
between the last two collections). So every move of the alias writes one row, in the same
transaction as the profile status change (PostgreSQL is the truth; see docs/retrieval.md#rollback):

* ``initial``  — the alias was created (``openkb up`` on a fresh install): nothing before it;
* ``switch``   — ``index switch``, ``index rebuild --switch``, or ``index rollback --to X``;
* ``rollback`` — ``index rollback``: ``reverts_id`` names the switch it undid.

Rollback semantics: the history is an undo stack. Each ``switch``/``initial`` row pushes; each
``rollback`` row pops the row it reverts. ``rollback`` undoes the top of the stack, i.e. returns
to the collection that was active before the last switch not yet undone. A second rollback
therefore goes one step *further back* (A→B, B→C, rollback → B, rollback → A), and when only the
``initial`` row is left it refuses with ``CONFLICT`` instead of flipping forward again.
``rollback --to X`` is a plain jump: it pushes like a switch, so a later rollback undoes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlmodel import Session, col, select

from openkb.audit import actor_fields
from openkb.models import MilvusAliasSwitch
from openkb.permissions.principal import Principal


def lock_alias(session: Session, alias: str) -> None:
    """Serialise alias moves (switch, rollback, drop) until this transaction ends: two rollbacks
    at once would otherwise both undo the same switch."""
    session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:a, 13))"), {"a": f"openkb-alias-{alias}"})


def share_alias_lock(session: Session, alias: str) -> None:
    """Hold off alias moves until this transaction ends, while letting other writers through: an
    index job that resolved the active collection must finish writing (and commit its
    ``index_checked_at``) before a switch or rollback runs its catch-up, or its rows land only in
    the collection being left (seen as a rolled-back collection short of a page's rows).
    Callers that pass their targets explicitly (the catch-up itself) must not take it."""
    session.execute(
        text("SELECT pg_advisory_xact_lock_shared(hashtextextended(:a, 13))"), {"a": f"openkb-alias-{alias}"}
    )


def record_switch(
    session: Session,
    *,
    alias: str,
    from_collection: str | None,
    to_collection: str,
    kind: str,
    actor: Principal | None,
    reverts: MilvusAliasSwitch | None = None,
) -> MilvusAliasSwitch:
    actor_type, actor_user_id, _ = actor_fields(actor)
    row = MilvusAliasSwitch(
        alias=alias,
        from_collection=from_collection,
        to_collection=to_collection,
        kind=kind,
        reverts_id=reverts.id if reverts is not None else None,
        actor_type=actor_type,
        actor_user_id=actor_user_id,
    )
    session.add(row)
    session.flush()
    return row


def list_history(session: Session, alias: str, limit: int | None = 50) -> list[MilvusAliasSwitch]:
    """Newest first."""
    q = select(MilvusAliasSwitch).where(MilvusAliasSwitch.alias == alias).order_by(col(MilvusAliasSwitch.id).desc())
    if limit is not None:
        q = q.limit(limit)
    return list(session.exec(q).all())


def undo_stack(session: Session, alias: str) -> list[MilvusAliasSwitch]:
    """The switches not yet undone, oldest first (see the module docstring)."""
    rows = list(reversed(list_history(session, alias, limit=None)))
    stack: list[MilvusAliasSwitch] = []
    for row in rows:
        if row.kind == "rollback" and row.reverts_id is not None:
            stack = [s for s in stack if s.id != row.reverts_id]
        else:
            stack.append(row)
    return stack


@dataclass(frozen=True)
class RollbackPlan:
    """What ``rollback`` would do now: undo ``undo`` by returning to ``target`` (None + ``reason``
    when there is nothing to roll back to)."""

    undo: MilvusAliasSwitch | None
    target: str | None
    reason: str = ""


def plan_rollback(session: Session, alias: str, current: str | None) -> RollbackPlan:
    stack = undo_stack(session, alias)
    if not stack:
        return RollbackPlan(
            None,
            None,
            f"no switch of {alias} is recorded (history starts with OpenKB 0002); "
            "use `openkb index rollback --to PROFILE`",
        )
    top = stack[-1]
    if top.from_collection is None:
        return RollbackPlan(
            top,
            None,
            f"nothing to roll back: {alias} has pointed at {top.to_collection} since it "
            "was created, and every later switch has been rolled back "
            "(see `openkb index history`)",
        )
    if current is not None and top.to_collection != current:
        return RollbackPlan(
            top,
            None,
            f"{alias} points at {current}, but the last recorded switch went to "
            f"{top.to_collection} (moved outside OpenKB?); use "
            "`openkb index switch --profile` or `rollback --to`",
        )
    return RollbackPlan(top, top.from_collection)


def rollback_target(session: Session, alias: str, current: str | None) -> str | None:
    """The collection ``rollback`` would return to now (``drop`` protects it)."""
    return plan_rollback(session, alias, current).target


def history_view(row: MilvusAliasSwitch) -> dict[str, Any]:
    return {
        "id": row.id,
        "at": row.created_at.isoformat() if row.created_at else None,
        "kind": row.kind,
        "alias": row.alias,
        "from": row.from_collection,
        "to": row.to_collection,
        "reverts": row.reverts_id,
        "by": {"type": row.actor_type, "user_id": str(row.actor_user_id) if row.actor_user_id else None},
    }


__all__ = [
    "RollbackPlan",
    "history_view",
    "list_history",
    "lock_alias",
    "plan_rollback",
    "record_switch",
    "rollback_target",
    "undo_stack",
]
