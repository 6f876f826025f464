"""Entities: the people, organisations and places a user knows, and the user's own ``self``
(docs/facts.md#entities).

Entities belong to one user in one tenant (each person's knowledge is theirs). Identifiers are
normalized before they are stored or looked up (``normalize``), and are unique per user, entity
kind and identifier kind, so ``resolve`` is one indexed point lookup.

App side (``AppCaller``): ``resolve`` (``entities.resolve:<kind>``; with ``create``:
``entities.write:<kind>``) never lists; ``get``/``list_entities`` need ``entities.read:<kind>``;
``add_identifier`` needs ``entities.write:<kind>``. All of them are single-object methods: a
missing grant raises ``lacks knowledge permission <string>``.

User side (``Principal``): ``merge`` and ``delete`` — apps cannot. A merged entity keeps its row
with ``merged_into``, so an old ref still works and means the survivor (``live``); a deleted
entity keeps its row with ``deleted_at`` and a ref to it fails with ``no entity``.

Trap: ``live`` follows ``merged_into`` chains (a survivor may itself be merged later) and stops
after a few hops; ``merge`` also re-points entities merged into the loser, so chains stay short.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from sqlalchemy import text
from sqlmodel import Session, col, select

from openkb.apps import quotas
from openkb.apps import reach as RC
from openkb.apps.registry import AppCaller
from openkb.audit import record_audit
from openkb.content import limits
from openkb.content.actor import Actor
from openkb.content.changes import record_change
from openkb.errors import AlreadyExists, NotFound, Unauthenticated, ValidationError
from openkb.facts.identifiers import IDENTIFIER_KINDS, normalize
from openkb.facts.mentions import record_entity
from openkb.models import Change, Entity, EntityIdentifier
from openkb.models._base import utcnow
from openkb.permissions import Principal

ENTITY_REF = "e"
_KIND = re.compile(r"[a-z][a-z0-9_-]{0,39}\Z")  # \Z, not ``$``: that also matches before a final newline
MAX_HOPS = 8


def check_kind(kind: str) -> str:
    if not isinstance(kind, str) or not _KIND.match(kind) or kind == "self":
        raise ValidationError("entity kind is a lower-case word such as person, org or place", field="kind")
    return kind


# --- the user's own entity and lookups ---------------------------------------------------------


def self_entity(session: Session, tenant_id: uuid.UUID, user_id: uuid.UUID) -> uuid.UUID:
    """The user's ``self`` entity, created on first use (one per user and tenant)."""
    row = session.execute(
        text("SELECT id FROM entities WHERE tenant_id = :t AND user_id = :u AND kind = 'self'"),
        {"t": tenant_id, "u": user_id},
    ).first()
    if row is not None:
        return row.id  # type: ignore[no-any-return]
    session.execute(
        text(
            "INSERT INTO entities (id, tenant_id, user_id, kind, display_name) VALUES (:id, :t, :u, 'self', 'self') "
            "ON CONFLICT (tenant_id, user_id) WHERE kind = 'self' DO NOTHING"
        ),
        {"id": uuid.uuid4(), "t": tenant_id, "u": user_id},
    )
    return session.execute(  # type: ignore[no-any-return]
        text("SELECT id FROM entities WHERE tenant_id = :t AND user_id = :u AND kind = 'self'"),
        {"t": tenant_id, "u": user_id},
    ).scalar_one()


def live(session: Session, tenant_id: uuid.UUID, user_id: uuid.UUID, entity_id: uuid.UUID) -> Entity:
    """The entity a stored id means now: merged ones lead to their survivor; a deleted one (or
    one of another user) is ``NotFound`` with ``no entity`` in the message."""
    ent = session.get(Entity, entity_id)
    for _ in range(MAX_HOPS):
        if ent is None or ent.tenant_id != tenant_id or ent.user_id != user_id:
            raise NotFound("no entity with this ref")
        if ent.merged_into is None:
            break
        ent = session.get(Entity, ent.merged_into)
    assert ent is not None
    if ent.deleted_at is not None:
        raise NotFound("no entity with this ref: it was deleted; resolve it again")
    return ent


def entity_of_ref(session: Session, caller: AppCaller, ref: str) -> Entity:
    _, eid = caller.read_ref(ref, ENTITY_REF, "no entity")
    return live(session, caller.tenant_id, caller.user_id, eid)


def identifiers_of(session: Session, entity_id: uuid.UUID) -> list[dict[str, str]]:
    rows = session.exec(
        select(EntityIdentifier)
        .where(col(EntityIdentifier.entity_id) == entity_id)
        .order_by(col(EntityIdentifier.kind), col(EntityIdentifier.value))
    ).all()
    return [{"kind": r.kind, "value": r.display, "normalized": r.value} for r in rows]


_FIND = text(
    "SELECT entity_id FROM entity_identifiers "
    "WHERE tenant_id = :t AND user_id = :u AND entity_kind = :ek AND kind = :k AND value = :v"
)


def find(
    session: Session, tenant_id: uuid.UUID, user_id: uuid.UUID, kind: str, identifiers: dict[str, str]
) -> Entity | None:
    """The first live entity of ``kind`` one of the identifiers names (in the order given)."""
    for k, v in identifiers.items():
        if v is None:
            continue
        nv = normalize(k, v)
        for (eid,) in session.execute(_FIND, {"t": tenant_id, "u": user_id, "ek": kind, "k": k, "v": nv}):
            try:
                return live(session, tenant_id, user_id, eid)
            except NotFound:
                continue
    return None


# ``resolve``'s one statement (bench/facts.py): the entity an identifier names with the columns
# the answer needs, through the unique (tenant_id, user_id, entity_kind, kind, value) index —
# one index probe and one primary-key probe. Trap: the row may be merged or deleted in theory
# (a merge moves identifiers to the survivor and a deletion removes them, so in practice it is
# live); such a row goes through ``live`` like ``find``'s.
_RESOLVE = text(
    "SELECT e.id, e.kind, e.display_name, e.merged_into, e.deleted_at FROM entity_identifiers i "
    "JOIN entities e ON e.id = i.entity_id "
    "WHERE i.tenant_id = :t AND i.user_id = :u AND i.entity_kind = :ek AND i.kind = :k AND i.value = :v"
)


def _resolved(
    session: Session, tenant_id: uuid.UUID, user_id: uuid.UUID, kind: str, identifiers: dict[str, str]
) -> tuple[uuid.UUID, str, str] | None:
    """``find`` without ORM objects: ``(id, kind, display name)`` of the first live entity of
    ``kind`` one of the identifiers names (in the order given); one statement per identifier
    tried, so one for the usual call."""
    for k, v in identifiers.items():
        row = session.execute(
            _RESOLVE, {"t": tenant_id, "u": user_id, "ek": kind, "k": k, "v": normalize(k, v)}
        ).first()
        if row is None:
            continue
        if row.merged_into is None and row.deleted_at is None:
            return row.id, row.kind, row.display_name
        try:
            ent = live(session, tenant_id, user_id, row.id)
        except NotFound:
            continue
        return ent.id, ent.kind, ent.display_name
    return None


def _add(session: Session, ent: Entity, kind: str, value: str) -> str:
    """``added`` or ``exists`` (on this entity); another entity of the kind holding it: 409."""
    nv = normalize(kind, value)
    r = session.execute(
        text(
            "INSERT INTO entity_identifiers (id, tenant_id, user_id, entity_id, entity_kind, kind, value, display) "
            "VALUES (:id, :t, :u, :e, :ek, :k, :v, :d) "
            "ON CONFLICT (tenant_id, user_id, entity_kind, kind, value) DO NOTHING RETURNING id"
        ),
        {
            "id": uuid.uuid4(),
            "t": ent.tenant_id,
            "u": ent.user_id,
            "e": ent.id,
            "ek": ent.kind,
            "k": kind,
            "v": nv,
            "d": value.strip(),
        },
    ).first()
    if r is not None:
        return "added"
    holder = session.execute(
        _FIND, {"t": ent.tenant_id, "u": ent.user_id, "ek": ent.kind, "k": kind, "v": nv}
    ).scalar_one()
    if holder == ent.id:
        return "exists"
    try:
        if live(session, ent.tenant_id, ent.user_id, holder).id == ent.id:
            return "exists"
    except NotFound:
        pass
    raise AlreadyExists(f"this {kind} belongs to another {ent.kind}", field=kind)


# --- the app's methods -----------------------------------------------------------------------


def entity_out(caller: AppCaller, ent: Entity, *, identifiers: bool = False, session: Session | None = None) -> dict:
    out: dict[str, Any] = {"ref": caller.ref(ENTITY_REF, ent.id), "kind": ent.kind, "displayName": ent.display_name}
    if identifiers and session is not None:
        out["identifiers"] = [{"kind": i["kind"], "value": i["value"]} for i in identifiers_of(session, ent.id)]
    return out


def clean_identifiers(identifiers: dict[str, Any]) -> dict[str, str]:
    if not isinstance(identifiers, dict) or not identifiers:
        raise ValidationError("give at least one identifier (email, phone, domain, url, handle, name)", field="by")
    out = {}
    for k, v in identifiers.items():
        if k not in IDENTIFIER_KINDS:
            raise ValidationError(f"identifier kind is one of {', '.join(IDENTIFIER_KINDS)}", field=str(k))
        if v is not None:
            if not isinstance(v, str):
                raise ValidationError(f"{k} must be a string", field=k)
            out[k] = v
    if not out:
        raise ValidationError("give at least one identifier", field="by")
    return out


def resolve(
    session: Session,
    caller: AppCaller,
    identifiers: dict[str, Any],
    *,
    kind: str = "person",
    create: bool = False,
    display_name: str | None = None,
) -> dict[str, Any] | None:
    """A point lookup: the entity one of the identifiers names, or ``None``; with ``create``
    a new entity carrying them all. Never lists."""
    kind = check_kind(kind)
    RC.require(caller, f"entities.write:{kind}" if create else f"entities.resolve:{kind}")
    ids = clean_identifiers(identifiers)
    found = _resolved(session, caller.tenant_id, caller.user_id, kind, ids)
    if found is not None:
        eid, ekind, name = found
        return {"ref": caller.ref(ENTITY_REF, eid), "kind": ekind, "displayName": name, "created": False}
    if not create:
        return None
    name = display_name or ids.get("name") or ids.get("email") or next(iter(ids.values()))
    name = limits.check_name(name, "displayName")
    quotas.charge(session, caller, len(name) + sum(len(v) for v in ids.values()))
    ent = Entity(
        tenant_id=caller.tenant_id,
        user_id=caller.user_id,
        kind=kind,
        display_name=name,
        created_by_installation_id=caller.installation_id,
    )
    session.add(ent)
    session.flush()
    for k, v in ids.items():
        _add(session, ent, k, v)
    record_entity(session, ent.tenant_id, ent.user_id, ent.id)  # its mentions in what is indexed already
    return {**entity_out(caller, ent), "created": True}


def get(session: Session, caller: AppCaller, ref: str) -> dict[str, Any]:
    ent = entity_of_ref(session, caller, ref)
    if ent.kind == "self":
        raise NotFound("no entity with this ref")
    RC.require(caller, f"entities.read:{ent.kind}")
    return entity_out(caller, ent, identifiers=True, session=session)


def list_entities(
    session: Session, caller: AppCaller, kind: str = "person", *, query: str | None = None, limit: int = 200
) -> list[dict[str, Any]]:
    kind = check_kind(kind)
    RC.require(caller, f"entities.read:{kind}")
    rows = list_for_user(session, caller.tenant_id, caller.user_id, kind, query=query, limit=limit)
    return [entity_out(caller, e, identifiers=True, session=session) for e in rows]


def list_for_user(
    session: Session, tenant_id: uuid.UUID, user_id: uuid.UUID, kind: str | None, *, query: str | None, limit: int
) -> list[Entity]:
    q = select(Entity).where(
        col(Entity.tenant_id) == tenant_id,
        col(Entity.user_id) == user_id,
        col(Entity.merged_into).is_(None),
        col(Entity.deleted_at).is_(None),
        col(Entity.kind) != "self",
    )
    if kind is not None:
        q = q.where(col(Entity.kind) == kind)
    if query and query.strip():
        like = "%" + query.strip().lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        q = q.where(
            text(
                "(lower(entities.display_name) LIKE :like OR EXISTS (SELECT 1 FROM entity_identifiers i "
                "WHERE i.entity_id = entities.id AND i.value LIKE :like))"
            ).bindparams(like=like)
        )
    q = q.order_by(col(Entity.display_name), col(Entity.id)).limit(max(1, min(int(limit), 1000)))
    return list(session.exec(q).all())


def add_identifier(session: Session, caller: AppCaller, ref: str, kind: str, value: str) -> dict[str, str]:
    ent = entity_of_ref(session, caller, ref)
    if ent.kind == "self":
        raise NotFound("no entity with this ref")
    RC.require(caller, f"entities.write:{ent.kind}")
    normalize(kind, value)
    status = _add(session, ent, kind, value)
    if status == "added":
        quotas.charge(session, caller, len(value))
        record_entity(session, ent.tenant_id, ent.user_id, ent.id)
    return {"status": status}


# --- the user's own actions ------------------------------------------------------------------


def _user(principal: Principal) -> tuple[uuid.UUID, uuid.UUID]:
    if principal.kind != "user" or principal.user_id is None or principal.tenant_id is None:
        raise Unauthenticated("sign in to manage your entities")
    return principal.user_id, principal.tenant_id


def access_entity(session: Session, principal: Principal, entity_id: uuid.UUID) -> Entity:
    """One of the caller's own live entities (merged ids lead to the survivor)."""
    uid, tid = _user(principal)
    return live(session, tid, uid, entity_id)


def user_entity_out(session: Session, ent: Entity) -> dict[str, Any]:
    """The user's own view of an entity (ids, not refs: refs are per installation)."""
    return {
        "id": ent.id,
        "kind": ent.kind,
        "display_name": ent.display_name,
        "identifiers": [{"kind": i["kind"], "value": i["value"]} for i in identifiers_of(session, ent.id)],
    }


def user_entities(
    session: Session, principal: Principal, *, kind: str | None = None, query: str | None = None, limit: int = 200
) -> list[dict[str, Any]]:
    """The caller's live entities (``openkb entities list``), with their identifiers."""
    uid, tid = _user(principal)
    if kind is not None:
        check_kind(kind)
    return [user_entity_out(session, e) for e in list_for_user(session, tid, uid, kind, query=query, limit=limit)]


def user_resolve(
    session: Session, principal: Principal, identifiers: dict[str, Any], *, kind: str = "person"
) -> Entity:
    """The caller's own point lookup by identifier (``openkb entities resolve``); none is
    ``NotFound`` with ``no entity``."""
    uid, tid = _user(principal)
    ent = find(session, tid, uid, check_kind(kind), clean_identifiers(identifiers))
    if ent is None:
        raise NotFound(f"no entity of kind {kind} with these identifiers")
    return ent


def create_entity(
    session: Session, principal: Principal, *, kind: str, display_name: str, identifiers: dict[str, str] | None = None
) -> Entity:
    uid, tid = _user(principal)
    ent = Entity(
        tenant_id=tid, user_id=uid, kind=check_kind(kind), display_name=limits.check_name(display_name, "displayName")
    )
    session.add(ent)
    session.flush()
    for k, v in (identifiers or {}).items():
        _add(session, ent, k, v)
    record_entity(session, tid, uid, ent.id)
    return ent


# the subject lock of every fact writer: a row version bump, not FOR NO KEY UPDATE (why: the trap
# in openkb.facts.service at ``_BUMP``, whose one-statement put bumps the row the same way)
_LOCK_ONE = text("UPDATE entities SET updated_at = updated_at WHERE id = :e")
_LOCK_BOTH = text("UPDATE entities SET updated_at = updated_at WHERE id IN (:keep, :gone)")


def lock_subject(session: Session, subject_id: uuid.UUID) -> None:
    """Serialize with every writer of this subject's facts (``openkb.facts.service`` locks the
    same way) before deciding from its current values."""
    session.execute(_LOCK_ONE, {"e": subject_id})


# After a merge the survivor holds both entities' current facts (and facts about others that
# pointed at either now point at it), which the write rules never allow side by side
# (docs/facts.md#facts): two current values of a cardinality-``one`` predicate, or the same value
# twice. One of each stays current, as ``facts.put`` would have decided had they been written
# one after the other: a user-said value first, then the newest; the others expire (history,
# never deletion). A predicate missing from the vocabulary counts as ``many``.
_SETTLE_AFTER_MERGE = text(
    """
UPDATE facts f SET valid_to = greatest(now(), f.valid_from)
FROM (
    SELECT x.id, row_number() OVER (
        PARTITION BY x.subject_id, x.predicate,
                     CASE WHEN p.cardinality = 'one' THEN NULL ELSE x.value END,
                     CASE WHEN p.cardinality = 'one' THEN NULL ELSE x.object_id END
        ORDER BY (x.said_by = 'user') DESC, x.valid_from DESC, x.id) AS rn
    FROM facts x
    LEFT JOIN fact_predicates p ON p.tenant_id = x.tenant_id AND p.predicate = x.predicate
    WHERE x.valid_to IS NULL AND (x.subject_id = :keep OR x.object_id = :keep)
) w
WHERE f.id = w.id AND w.rn > 1
RETURNING f.id
"""
)


def merge(session: Session, principal: Principal, survivor_id: uuid.UUID, merged_id: uuid.UUID) -> Entity:
    """Fold ``merged_id`` into ``survivor_id`` (same kind): identifiers, facts and mentions move
    (then ``_SETTLE_AFTER_MERGE`` expires what the write rules would not keep side by side);
    the merged row stays with ``merged_into`` so its refs lead to the survivor."""
    keep = access_entity(session, principal, survivor_id)
    gone = access_entity(session, principal, merged_id)
    if keep.id == gone.id:
        raise ValidationError("an entity cannot be merged into itself", field="merged_id")
    if keep.kind != gone.kind or keep.kind == "self":
        raise ValidationError("only entities of the same kind can be merged", field="merged_id")
    p = {"keep": keep.id, "gone": gone.id}
    # both subjects locked the way fact writers lock them (``lock_subject``): a
    # concurrent facts.put about either waits for the merge and sees the facts where they end up
    session.execute(_LOCK_BOTH, p)
    # identifiers the survivor lacks move over; duplicates go
    session.execute(
        text(
            "DELETE FROM entity_identifiers g USING entity_identifiers k WHERE g.entity_id = :gone "
            "AND k.entity_id = :keep AND k.kind = g.kind AND k.value = g.value"
        ),
        p,
    )
    session.execute(text("UPDATE entity_identifiers SET entity_id = :keep WHERE entity_id = :gone"), p)
    session.execute(text("UPDATE facts SET subject_id = :keep WHERE subject_id = :gone"), p)
    session.execute(text("UPDATE facts SET object_id = :keep WHERE object_id = :gone"), p)
    settled = [r.id for r in session.execute(_SETTLE_AFTER_MERGE, {"keep": keep.id})]
    session.execute(
        text(
            "DELETE FROM entity_mentions g USING entity_mentions k WHERE g.entity_id = :gone "
            "AND k.entity_id = :keep AND k.chunk_id = g.chunk_id"
        ),
        p,
    )
    session.execute(text("UPDATE entity_mentions SET entity_id = :keep WHERE entity_id = :gone"), p)
    session.execute(text("UPDATE entities SET merged_into = :keep WHERE merged_into = :gone"), p)
    gone.merged_into = keep.id
    gone.updated_at = utcnow()
    session.add(gone)
    session.flush()
    session.refresh(gone)
    record_audit(
        session, tenant_id=keep.tenant_id, actor=principal, action="entity.merged", object_type="entity",
        object_id=keep.id, metadata={"merged": str(gone.id), "facts_expired": len(settled)},
    )  # fmt: skip
    return keep


def delete(session: Session, principal: Principal, entity_id: uuid.UUID) -> None:
    """Delete an entity: its identifiers and mentions go, its current facts (as subject or
    object) expire; the row stays so refs to it fail with ``no entity``. One ``entity.delete``
    change records the identifiers and the expired facts, so reverting it (by change or by run,
    docs/facts.md#history) brings the entity back whole (``restore``)."""
    ent = access_entity(session, principal, entity_id)
    if ent.kind == "self":
        raise ValidationError("your own entity cannot be deleted", field="entity_id")
    delete_as(session, Actor.of(principal), ent)


_EXPIRE_OF = text(
    "UPDATE facts SET valid_to = greatest(now(), valid_from) WHERE valid_to IS NULL "
    "AND (subject_id = :e OR object_id = :e) RETURNING id"
)


def delete_as(session: Session, actor: Actor, ent: Entity, *, reverts: Change | None = None) -> None:
    """The deletion itself, as a change of ``actor`` (``reverts``: the ``entity.restore`` it undoes)."""
    p = {"e": ent.id}
    session.execute(_LOCK_ONE, p)  # as fact writers lock a subject (``lock_subject``)
    idents = [
        {"kind": r.kind, "value": r.value, "display": r.display}
        for r in session.execute(
            text("SELECT kind, value, display FROM entity_identifiers WHERE entity_id = :e ORDER BY kind, value"), p
        )
    ]
    session.execute(text("DELETE FROM entity_identifiers WHERE entity_id = :e"), p)
    session.execute(text("DELETE FROM entity_mentions WHERE entity_id = :e"), p)
    expired = [r.id for r in session.execute(_EXPIRE_OF, p)]
    ent.deleted_at = utcnow()
    session.add(ent)
    session.flush()
    record_change(
        session, actor, op="entity.delete", object_type="entity", object_id=ent.id,
        summary=f"{ent.kind} {ent.display_name} deleted", scope={},
        before={"kind": ent.kind, "display_name": ent.display_name, "identifiers": idents},
        after={"deleted_at": ent.deleted_at, "made_current": [], "expired": expired}, reverts=reverts,
    )  # fmt: skip
    record_audit(
        session, tenant_id=ent.tenant_id, actor=actor.principal, action="entity.deleted", object_type="entity",
        object_id=ent.id,
    )  # fmt: skip


def restore_as(session: Session, actor: Actor, ent: Entity, identifiers: list[dict[str, str]]) -> list[str]:
    """Undo a deletion: the entity is live again with the identifiers it had (one another entity
    took since is skipped and returned) and its mentions are found again. The facts are the
    reverting change's business (``openkb.facts.revert``)."""
    ent.deleted_at = None
    ent.updated_at = utcnow()
    session.add(ent)
    session.flush()
    skipped = []
    for i in identifiers:
        got = session.execute(
            text(
                "INSERT INTO entity_identifiers (id, tenant_id, user_id, entity_id, entity_kind, kind, value, display) "
                "VALUES (:id, :t, :u, :e, :ek, :k, :v, :d) "
                "ON CONFLICT (tenant_id, user_id, entity_kind, kind, value) DO NOTHING RETURNING id"
            ),
            {"id": uuid.uuid4(), "t": ent.tenant_id, "u": ent.user_id, "e": ent.id, "ek": ent.kind,
             "k": i["kind"], "v": i["value"], "d": i.get("display") or i["value"]},
        ).first()  # fmt: skip
        if got is None:
            skipped.append(f"{i['kind']}:{i['value']}")
    record_entity(session, ent.tenant_id, ent.user_id, ent.id)
    record_audit(
        session, tenant_id=ent.tenant_id, actor=actor.principal, action="entity.restored", object_type="entity",
        object_id=ent.id,
    )  # fmt: skip
    return skipped
