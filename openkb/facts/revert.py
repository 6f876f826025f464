"""Reverting fact changes (docs/facts.md#history): the change log's ``fact.*`` rows, and
``entity.delete``/``entity.restore`` (a deleted entity's facts expire with it and come back).

Every fact change names the facts it made current (``made_current``) and the ones it expired
(``expired``) in its ``after_state``. Reverting it expires the first and makes the second
current again, as a new ``fact.revert`` change that names the same two lists the other way
round, so a revert can itself be reverted. Nothing is deleted: facts only expire.

Trap: a cardinality-``one`` predicate keeps one current value — an old value is not brought
back while another current value (written since) holds the predicate; it stays expired. Nor is
a value brought back that is current already (the same value written again since), whatever the
cardinality: one value is never current twice.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import text
from sqlmodel import Session

from openkb.content.actor import Actor
from openkb.content.changes import record_change
from openkb.errors import NotRevertible
from openkb.facts import entities as E
from openkb.models import Change, Entity, Fact
from openkb.models._base import utcnow


def _ids(values: Any) -> list[uuid.UUID]:
    return [uuid.UUID(str(v)) for v in values or []]


# a current fact equal to the expired one (same subject, predicate, value as JSON and object,
# as a write's ``_SAME`` compares): bringing the expired one back would make one value current twice
_EQUAL_CURRENT = text(
    "SELECT 1 FROM facts o JOIN facts f ON f.id = :i "
    "WHERE o.subject_id = f.subject_id AND o.predicate = f.predicate AND o.valid_to IS NULL "
    "AND NOT o.inferred AND o.id <> f.id "
    "AND coalesce(o.value, 'null') = coalesce(f.value, 'null') AND o.object_id IS NOT DISTINCT FROM f.object_id"
)


def _bring_back(session: Session, actor: Actor, ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """Make expired facts current again, except a cardinality-``one`` value whose predicate holds
    another current value now (the module's trap), and a value that is current again already
    (written anew since it expired: a ``many`` predicate would list it twice). Returns the ones
    brought back."""
    restored: list[uuid.UUID] = []
    for fid in ids:
        f = session.get(Fact, fid)
        if f is None or f.user_id != actor.user_id or f.valid_to is None:
            continue
        # the subject locked as fact writers lock it: a put about it that has not committed yet
        # (its new value invisible to this check) finishes first, and the check then sees it
        E.lock_subject(session, f.subject_id)
        if session.execute(_EQUAL_CURRENT, {"i": f.id}).first() is not None:
            continue
        card = session.execute(
            text("SELECT cardinality FROM fact_predicates WHERE tenant_id = :t AND predicate = :p"),
            {"t": f.tenant_id, "p": f.predicate},
        ).scalar()
        if card == "one":
            other = session.execute(
                text("SELECT 1 FROM facts WHERE subject_id = :s AND predicate = :p AND valid_to IS NULL AND id <> :i"),
                {"s": f.subject_id, "p": f.predicate, "i": f.id},
            ).first()
            if other is not None:
                continue
        f.valid_to = None
        session.add(f)
        restored.append(fid)
    session.flush()
    return restored


def revert_fact_change(session: Session, actor: Actor, c: Change) -> str:
    """Revert a ``fact.*`` or ``entity.*`` change (``openkb.content.revert`` dispatches here)."""
    if c.op == "entity.delete":
        return _undelete(session, actor, c)
    if c.op == "entity.restore":
        ent = session.get(Entity, c.object_id)
        if ent is None or ent.user_id != actor.user_id or ent.deleted_at is not None:
            return "gone"
        E.delete_as(session, actor, ent, reverts=c)
        return "ok"
    after = c.after_state or {}
    made, expired = _ids(after.get("made_current")), _ids(after.get("expired"))
    if not made and not expired:
        raise NotRevertible("this fact change records nothing to undo")
    now = utcnow()
    undone: list[uuid.UUID] = []
    for fid in made:
        f = session.get(Fact, fid)
        if f is None or f.user_id != actor.user_id:
            continue
        if f.valid_to is None:
            f.valid_to = max(now, f.valid_from)
            session.add(f)
            undone.append(fid)
    session.flush()
    restored = _bring_back(session, actor, expired)
    if not undone and not restored and not session.get(Fact, c.object_id):
        return "gone"
    record_change(
        session, actor, op="fact.revert", object_type="fact", object_id=c.object_id,
        summary=f"reverted: {c.summary}"[:500], scope={},
        after={"predicate": after.get("predicate"), "made_current": restored, "expired": undone},
        reverts=c,
    )  # fmt: skip
    return "ok"


def _undelete(session: Session, actor: Actor, c: Change) -> str:
    """An ``entity.delete`` undone: the entity, its identifiers, mentions and expired facts come
    back, as an ``entity.restore`` change (reverting that deletes it again)."""
    ent = session.get(Entity, c.object_id)
    if ent is None or ent.user_id != actor.user_id or ent.tenant_id != actor.tenant_id:
        return "gone"
    before = c.before_state or {}
    skipped = E.restore_as(session, actor, ent, list(before.get("identifiers") or []))
    restored = _bring_back(session, actor, _ids((c.after_state or {}).get("expired")))
    record_change(
        session, actor, op="entity.restore", object_type="entity", object_id=ent.id,
        summary=f"{ent.kind} {ent.display_name} restored"[:500], scope={},
        after={"made_current": restored, "expired": [], "identifiers_taken_since": skipped},
        reverts=c,
    )  # fmt: skip
    return "ok"
