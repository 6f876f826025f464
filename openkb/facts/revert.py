"""Reverting fact changes (docs/facts.md#history): the change log's ``fact.*`` rows.

Every fact change names the facts it made current (``made_current``) and the ones it expired
(``expired``) in its ``after_state``. Reverting it expires the first and makes the second
current again, as a new ``fact.revert`` change that names the same two lists the other way
round, so a revert can itself be reverted. Nothing is deleted: facts only expire.

Trap: a cardinality-``one`` predicate keeps one current value — an old value is not brought
back while another current value (written since) holds the predicate; it stays expired.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import text
from sqlmodel import Session

from openkb.content.actor import Actor
from openkb.content.changes import record_change
from openkb.errors import NotRevertible
from openkb.models import Change, Fact
from openkb.models._base import utcnow


def _ids(values: Any) -> list[uuid.UUID]:
    return [uuid.UUID(str(v)) for v in values or []]


def revert_fact_change(session: Session, actor: Actor, c: Change) -> str:
    after = c.after_state or {}
    made, expired = _ids(after.get("made_current")), _ids(after.get("expired"))
    if not made and not expired:
        raise NotRevertible("this fact change records nothing to undo")
    now = utcnow()
    undone: list[uuid.UUID] = []
    restored: list[uuid.UUID] = []
    for fid in made:
        f = session.get(Fact, fid)
        if f is None or f.user_id != actor.user_id:
            continue
        if f.valid_to is None:
            f.valid_to = max(now, f.valid_from)
            session.add(f)
            undone.append(fid)
    session.flush()
    for fid in expired:
        f = session.get(Fact, fid)
        if f is None or f.user_id != actor.user_id or f.valid_to is None:
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
    if not undone and not restored and not session.get(Fact, c.object_id):
        return "gone"
    record_change(
        session, actor, op="fact.revert", object_type="fact", object_id=c.object_id,
        summary=f"reverted: {c.summary}"[:500], scope={},
        after={"predicate": after.get("predicate"), "made_current": restored, "expired": undone},
        reverts=c,
    )  # fmt: skip
    return "ok"
