"""Facts: ``subject · predicate · value`` about the user and the entities they know
(docs/facts.md#facts).

A fact's value is JSON or an ``object`` entity. Facts expire (``valid_to``), they are never
deleted, so history is kept: every row says when it held, who said it (``said_by`` user or
app, the installation) and where it came from (``origin``/``source``/``source_ref``/``run_id``).

Writing (``put``) — the rules of docs/facts.md#writing:

* the hint is resolved first (``vocabulary.resolve_hint``), then ``facts.write`` is checked on
  the resolved predicate for the subject's kind (``self`` or the entity kind);
* the same subject, predicate and value current already → ``duplicate`` (nothing written, free);
  the user confirming a value an app wrote replaces it with a user-said one;
* cardinality ``one`` and a current value the *user* said → ``conflict``: not written, one
  change row with status ``conflict`` the user sees in their changes;
* cardinality ``one`` otherwise → the current value expires and the new one is valid;
* ``origin``/``source`` are ``app:<name>``/``extracted`` unless the app holds ``origin.override``.

Every applied write and every conflict is charged to the installation's daily quota and
recorded in the change log (``fact.put``/``fact.retract``, actor the user, installation set).

Reading: ``lookup`` (current, never inferred, no origin/writer/confidence) and ``profile_get``
(the user's pinned facts about themselves) are query methods: what the app's ``facts.read``
strings do not cover is left out without a word.

Trap: concurrent writes on one subject are serialized by locking the subject's entity row for
the transaction, otherwise two cardinality-``one`` writers could both see "no current value".
And the lock alone is not enough when the statement that takes it also reads the current values:
that statement's snapshot predates its wait for the lock (READ COMMITTED). The common ``put`` is
one statement (``_PUT``) that sees a newer row version and writes nothing; the longer way
(``_prepare`` + ``_write``) checks in its write statement that what it decided on is still
current. Both rely on every subject lock being a row version bump (``entities.lock_subject``);
tests/facts/test_concurrency.py races the writers.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.dialects.postgresql import UUID as PGUUID
from sqlalchemy.types import Text
from sqlmodel import Session

from openkb.apps import quotas
from openkb.apps import reach as RC
from openkb.apps.knowledge import actor_for
from openkb.apps.registry import AppCaller, access_installation
from openkb.apps.strings import parse
from openkb.config import Settings
from openkb.content.actor import Actor
from openkb.content.changes import change_created_at, jsonable, record_change
from openkb.errors import MetadataTooLarge, NotFound, OpenKBError, TransactionConflict, Unauthenticated, ValidationError
from openkb.facts import entities as E
from openkb.facts import vocabulary as V
from openkb.models import App, Entity, Fact
from openkb.models._base import utcnow
from openkb.permissions import Principal

FACT_REF = "a"
MAX_VALUE_BYTES = 64 * 1024
MAX_SOURCE_REF = 1000


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _check_value(value: Any) -> int:
    """The value's size as JSON, refused over ``MAX_VALUE_BYTES``."""
    size = _json_size(value)
    if size > MAX_VALUE_BYTES:
        raise MetadataTooLarge(
            f"value is {size} bytes as JSON; at most {MAX_VALUE_BYTES} are allowed",
            field="value",
            limit="fact_value_bytes",
            max=MAX_VALUE_BYTES,
            actual=size,
        )
    return size


def _like(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _prefix(prefix: str | None) -> str | None:
    """``pref.food``, ``pref.food.*`` or ``pref.food.`` → ``pref.food``; None/'' → None."""
    if prefix is None:
        return None
    p = prefix.strip()
    if p.endswith(".*"):
        p = p[:-2]
    p = p.rstrip(".")
    if p in ("", "*"):
        return None
    segs = p.split(".")
    if segs[0] not in V.PREDICATE_ROOTS or not all(V._SEG.match(s) for s in segs):
        raise ValidationError(f"{prefix!r} is not a predicate prefix", field="prefix")
    return p


def _patterns(prefixes: list[str]) -> list[str]:
    """LIKE patterns selecting a predicate equal to one of the prefixes or below it."""
    out = []
    for p in prefixes:
        out += [_like(p), _like(p) + ".%"]
    return out


def _read_patterns(caller: AppCaller, subject_kind: str) -> list[str]:
    pats = []
    for g in caller.grants:
        if not g.startswith("facts.read:"):
            continue
        perm = parse(g)
        if perm.subject != subject_kind:
            continue
        assert perm.prefix is not None
        pats += [_like(perm.prefix) + ".%"] if perm.wildcard else [_like(perm.prefix)]
    return pats


def covered(caller: AppCaller, action: str, subject_kind: str, predicate: str) -> bool:
    for g in caller.grants:
        if g.startswith(f"facts.{action}:"):
            perm = parse(g)
            if perm.subject == subject_kind and perm.covers_predicate(predicate):
                return True
    return False


def require_fact(session: Session, caller: AppCaller, action: str, subject_kind: str, predicate: str) -> None:
    """``facts.<action>`` covering the predicate, or the refusal naming the string the app
    asked for that would cover it (else the exact one it would need)."""
    if covered(caller, action, subject_kind, predicate):
        return
    app = session.get(App, caller.app_id)
    for s in app.permissions if app else []:
        if s.startswith(f"facts.{action}:"):
            perm = parse(s)
            if perm.subject == subject_kind and perm.covers_predicate(predicate):
                raise RC.missing(s)
    raise RC.missing(f"facts.{action}:{subject_kind}:{predicate}")


def _declare_once(session: Session, caller: AppCaller) -> None:
    """The app's manifest predicates, in the vocabulary before its first write resolves a hint
    (installation adds them too; this covers apps installed before facts existed)."""
    done: set[uuid.UUID] = session.info.setdefault("facts_declared", set())
    if caller.app_id in done:
        return
    app = session.get(App, caller.app_id)
    if app is not None and (app.manifest or {}).get("predicates"):
        V.declare_app_predicates(session, caller.tenant_id, app)
    done.add(caller.app_id)


def _subject(session: Session, caller: AppCaller, subject: str | None, *, lock: bool = False) -> tuple[uuid.UUID, str]:
    """The subject's entity id and kind; ``lock``: its row locked for this transaction (the
    writes of one subject are serialized, see the module's trap)."""
    if subject in (None, "", "self"):
        sid = E.self_entity(session, caller.tenant_id, caller.user_id)
        if lock:
            E.lock_subject(session, sid)
        return sid, "self"
    ent = E.entity_of_ref(session, caller, str(subject))
    if lock:
        E.lock_subject(session, ent.id)
    return ent.id, ent.kind


# The current values of a subject's predicate that a write decides on: all of them for
# cardinality ``one`` (they expire, or a user-said one is a conflict), only those equal to the new
# value for ``many`` (a duplicate, or the user confirming an app's value) — so a ``many``
# predicate with hundreds of values costs no more than one with none. ``same``: equal as JSON
# (``jsonb`` equality: ``1`` and ``1.0`` are one value, ``true`` and ``1`` two) and the same object.
_SAME = "(coalesce({f}value, 'null') = :v AND {f}object_id IS NOT DISTINCT FROM :o)"
_RELEVANT = "{f}valid_to IS NULL AND NOT {f}inferred AND ({card} = 'one' OR " + _SAME + ")"
_CURRENT = text(
    "SELECT id, value, object_id, said_by, installation_id, " + _SAME.format(f="") + " AS same FROM facts "
    "WHERE subject_id = :s AND predicate = :p AND "
    + _RELEVANT.format(f="", card="CAST(:card AS text)")
    + " ORDER BY valid_from"
).bindparams(bindparam("v", type_=JSONB))
# The subject's lock: an UPDATE that changes nothing but the row's version (its ``xmin``). Like
# FOR NO KEY UPDATE it serializes the writers of one subject and never blocks the key-share locks
# of the foreign keys that reference it (inserting a fact); the new version is what lets the
# one-statement write (``_PUT``) see that another writer committed since its snapshot. Trap:
# every writer of a subject's facts that serializes on it must lock it this way, never with a
# bare FOR NO KEY UPDATE, which leaves ``xmin`` as it was.
_BUMP = "UPDATE entities SET updated_at = updated_at WHERE {where}"
_COLS = (
    "id, tenant_id, user_id, subject_id, predicate, value, object_id, valid_from, said_by, "
    "installation_id, origin, source, source_ref, run_id, confidence, inferred, pinned"
)
_VALUES = ":id, :t, :u, :s, :p, :v, :o, :now, :by, :i, :origin, :source, :sref, :run, :conf, false, :pinned"
_INSERT = text(f"INSERT INTO facts ({_COLS}) VALUES ({_VALUES})").bindparams(bindparam("v", type_=JSONB))
# The change row ``record_change`` would write (same columns, states through ``jsonable``, the
# session's strictly increasing ``change_created_at``) — ``tests/facts/test_facts.py`` compares
# the two, so they stay in step.
_CHANGE = (
    "INSERT INTO changes (id, tenant_id, run_id, actor_type, actor_id, op, object_type, object_id, summary, "
    "before_state, after_state, status, app_installation_id, created_at) "
    "SELECT :cid, :t, :crun, :atype, :aid, 'fact.put', 'fact', f.id, :summary, :before, :after, 'applied', :i, :cat "
    "FROM f"
)
# ``go``: the write's decision still holds — the relevant current values (``_RELEVANT``) are, by
# id, the ones it was made on (``:seen``, sorted). The subject is locked by then, so another
# ``put`` cannot have changed them; a retraction, merge or deletion (they do not lock) can.
_GO = (
    "go AS (SELECT 1 WHERE ARRAY(SELECT id FROM facts WHERE subject_id = :s AND predicate = :p AND "
    + _RELEVANT.format(f="", card="CAST(:card AS text)")
    + " ORDER BY id) = :seen)"
)
# the charge made only when ``go`` has a row (a stale decision charges nothing)
_CHARGE_IF_GO = quotas.charge_sql(only_if="EXISTS (SELECT 1 FROM go)")
_EXPIRE_SQL = "UPDATE facts SET valid_to = :now WHERE id = ANY(:ids) AND valid_to IS NULL"
_UUIDS = ARRAY(PGUUID(as_uuid=True))
_TYPES = (
    bindparam("v", type_=JSONB),
    bindparam("before", type_=JSONB),
    bindparam("after", type_=JSONB),
    bindparam("ids", type_=_UUIDS),
    bindparam("seen", type_=_UUIDS),
)
# An applied write is one statement (``facts.put`` is the hot write of this package,
# bench/facts.py): the decision is checked (``go``), the old values expire, the fact and its
# change row are inserted, and — for an app — the installation's daily quota is charged (same
# ``:i``); over the quota nothing is written (``ok`` is empty) and the totals returned make
# ``put`` refuse. ``fresh`` false: nothing was written or charged, decide again.
_APPLY_USER = text(
    f"WITH {_GO}, e AS ({_EXPIRE_SQL} AND EXISTS (SELECT 1 FROM go)), "
    f"f AS (INSERT INTO facts ({_COLS}) SELECT {_VALUES} WHERE EXISTS (SELECT 1 FROM go) RETURNING id), "
    f"c AS ({_CHANGE}) SELECT EXISTS (SELECT 1 FROM go) AS fresh"
).bindparams(*_TYPES)
_APPLY_APP = text(
    f"WITH {_GO}, q AS ({_CHARGE_IF_GO}), ok AS (SELECT 1 FROM q WHERE q.writes <= :maxw AND q.chars <= :maxc), "
    f"e AS ({_EXPIRE_SQL} AND EXISTS (SELECT 1 FROM ok)), "
    f"f AS (INSERT INTO facts ({_COLS}) SELECT {_VALUES} WHERE EXISTS (SELECT 1 FROM ok) RETURNING id), "
    f"c AS ({_CHANGE}) SELECT EXISTS (SELECT 1 FROM go) AS fresh, (SELECT writes FROM q) AS writes, "
    f"(SELECT chars FROM q) AS chars"
).bindparams(*_TYPES)
# The hot write in ONE statement (``put`` about the user, the hint a known predicate the app may
# write, bench/facts.py): lock, read, decide and write together. The trap of ``_write`` (the
# snapshot predates the wait for the lock) is caught by the row version: ``lk`` updates the
# subject's row only if its ``xmin`` is still the one this statement's snapshot saw. A writer
# that committed since bumped it (``_BUMP``), so ``lk`` finds no row — READ COMMITTED rechecks the
# condition on the newest version after waiting — and nothing is locked, charged or written
# (``stale``). The decision is ``_write``'s for an app: ``duplicate`` when the value is current,
# ``apply`` (expiring a cardinality-``one`` predicate's current values) unless the user said one
# (``decide``: the conflict is ``_write``'s); ``unknown``: not a predicate of the vocabulary.
# Anything but ``apply``/``duplicate`` goes the two-statement way (``_prepare`` + ``_write``).
_PUT = text(
    "WITH snap AS (SELECT id, xmin AS x FROM entities WHERE tenant_id = :t AND user_id = :u AND kind = 'self'), "
    "lk AS (UPDATE entities e SET updated_at = e.updated_at FROM snap WHERE e.id = snap.id AND e.xmin = snap.x "
    "RETURNING e.id), "
    "p AS (SELECT cardinality FROM fact_predicates WHERE tenant_id = :t AND predicate = :p), "
    "cur AS (SELECT f.id, f.said_by, f.valid_from, "
    + _SAME.format(f="f.")
    + " AS same FROM facts f, snap, p WHERE f.subject_id = snap.id AND f.predicate = :p AND "
    + _RELEVANT.format(f="f.", card="p.cardinality")
    + "), "
    "d AS (SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM lk) THEN 'stale' WHEN NOT EXISTS (SELECT 1 FROM p) THEN "
    "'unknown' WHEN EXISTS (SELECT 1 FROM cur WHERE same) THEN 'duplicate' WHEN EXISTS (SELECT 1 FROM cur, p "
    "WHERE p.cardinality = 'one' AND cur.said_by = 'user') THEN 'decide' ELSE 'apply' END AS decision), "
    "go AS (SELECT 1 FROM d WHERE decision = 'apply'), "
    f"q AS ({_CHARGE_IF_GO}), ok AS (SELECT 1 FROM q WHERE q.writes <= :maxw AND q.chars <= :maxc), "
    "e AS (UPDATE facts SET valid_to = :now WHERE id IN (SELECT id FROM cur) AND valid_to IS NULL "
    "AND EXISTS (SELECT 1 FROM ok)), "
    f"f AS (INSERT INTO facts ({_COLS}) SELECT {_VALUES.replace(':s,', 'snap.id,')} FROM snap "
    "WHERE EXISTS (SELECT 1 FROM ok) RETURNING id), "
    "c AS (INSERT INTO changes (id, tenant_id, run_id, actor_type, actor_id, op, object_type, object_id, summary, "
    "before_state, after_state, status, app_installation_id, created_at) "
    "SELECT :cid, :t, :crun, :atype, :aid, 'fact.put', 'fact', f.id, :summary, '{}'::jsonb, "
    "jsonb_build_object('predicate', CAST(:p AS text), 'value', :v, 'subject_id', (SELECT id FROM snap)::text, "
    "'made_current', jsonb_build_array(f.id::text), 'expired', coalesce((SELECT jsonb_agg(cur.id::text "
    "ORDER BY cur.valid_from) FROM cur), '[]'::jsonb)), 'applied', :i, :cat FROM f) "
    "SELECT (SELECT decision FROM d) AS decision, (SELECT id FROM cur WHERE same ORDER BY valid_from LIMIT 1) "
    "AS same_id, (SELECT writes FROM q) AS writes, (SELECT chars FROM q) AS chars"
).bindparams(bindparam("v", type_=JSONB))
# how often a write decides again when its decision went stale (``go``) before it gives up
_DECIDE_TIMES = 3


def _write(
    session: Session,
    actor: Actor,
    *,
    tenant_id: uuid.UUID,
    user_id: uuid.UUID,
    subject_id: uuid.UUID,
    pred: V.Pred,
    value: Any,
    object_id: uuid.UUID | None,
    said_by: str,
    installation_id: uuid.UUID | None,
    origin: str,
    source: str,
    source_ref: str | None,
    run_id: uuid.UUID | None,
    confidence: float | None,
    pinned: bool,
    quota: AppCaller | None = None,
    locked: bool = False,
    current: list[Any] | None = None,
    size: int | None = None,
) -> tuple[str, uuid.UUID]:
    """The write rules; ``quota``: the installation charged for an applied write or a conflict
    (nothing is charged for a duplicate). ``locked``/``current``: the caller already locked the
    subject (and read its current values of the predicate, ``_prepare``); ``size``: the value's
    size as JSON, when the caller measured it already.

    Trap: ``current`` may be older than the lock — ``_prepare`` locks and reads in one statement,
    whose snapshot is taken before it waits for a concurrent writer's lock (READ COMMITTED). So an
    applied write checks in its own statement that the values it decided on are still the
    current ones (``_GO``) and, if not, reads them again (fresh now: the lock is held) and decides
    again. Duplicates and conflicts write no fact; they stand as of the snapshot they were read in.
    """
    if not locked:
        E.lock_subject(session, subject_id)
    where = {"s": subject_id, "p": pred.predicate, "v": value, "o": object_id, "card": pred.cardinality}
    size = _json_size(value) if size is None else size
    summary_v = value if object_id is None else {"object": str(object_id)}
    for _ in range(_DECIDE_TIMES):
        if current is None:
            current = list(session.execute(_CURRENT, where).all())
        same = next((r for r in current if r.same), None)
        # the user saying what an app wrote makes it user-said (a new row); anything else is a duplicate
        if same is not None and not (said_by == "user" and same.said_by == "app"):
            return "duplicate", same.id
        if pred.cardinality == "one" and said_by == "app":
            said = [r for r in current if r.said_by == "user"]
            if said:
                if quota is not None:
                    quotas.charge(session, quota, size)
                row = record_change(
                    session, actor, op="fact.put", object_type="fact", object_id=said[0].id,
                    summary=f"conflict: {pred.predicate} (the value you set was kept)", scope={},
                    before={"predicate": pred.predicate, "value": said[0].value},
                    after={"predicate": pred.predicate, "proposed": summary_v, "subject_id": subject_id},
                    flush=False,
                )  # fmt: skip
                row.status = "conflict"
                session.flush()
                return "conflict", said[0].id
        expired = [r.id for r in current] if pred.cardinality == "one" else ([same.id] if same is not None else [])
        fid = uuid.uuid4()
        after = {
            "predicate": pred.predicate, "value": summary_v, "subject_id": subject_id, "made_current": [fid],
            "expired": expired,
        }  # fmt: skip
        params = where | {
            "id": fid, "t": tenant_id, "u": user_id, "now": utcnow(), "by": said_by, "i": installation_id,
            "origin": origin, "source": source, "sref": source_ref, "run": run_id, "conf": confidence,
            "pinned": pinned, "ids": expired, "seen": sorted(r.id for r in current),
            "cid": uuid.uuid4(), "crun": actor.run_id, "atype": actor.actor_type, "aid": actor.principal.user_id,
            "summary": f"{pred.predicate} = {json.dumps(summary_v, ensure_ascii=False)[:200]}"[:500],
            "before": {}, "after": jsonable(after), "cat": change_created_at(session),
        }  # fmt: skip
        if quota is None:
            fresh = session.execute(_APPLY_USER, params).scalar_one()
        else:
            assert quota.installation_id == installation_id
            params |= quotas.charge_params(quota, size)
            params |= {"maxw": quotas.WRITES_PER_DAY, "maxc": quotas.char_limit(quota)}
            fresh, writes, total = session.execute(_APPLY_APP, params).one()
            if fresh:
                quotas.refuse_over(quota, writes, total)  # over a limit: nothing was written
        if fresh:
            return "applied", fid
        current = None  # changed since they were read (nothing was written or charged): again
    raise TransactionConflict(
        "the subject's facts kept changing while this value was written; nothing was written", retry_after=1
    )


# --- the app's methods -----------------------------------------------------------------------


def put(
    session: Session,
    caller: AppCaller,
    *,
    predicate_hint: str,
    value: Any = None,
    subject: str | None = "self",
    description: str | None = None,
    object_ref: str | None = None,
    source_ref: str | None = None,
    run_id: str | None = None,
    origin: str | None = None,
    source: str | None = None,
    confidence: float | None = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """``{status: applied|duplicate|conflict, ref, predicate}`` (docs/facts.md#writing)."""
    fast = _put_fast(
        session, caller, hint=predicate_hint, value=value, subject=subject, object_ref=object_ref,
        source_ref=source_ref, run_id=run_id, origin=origin, source=source, confidence=confidence,
    )  # fmt: skip
    if fast is not None:
        return fast
    ref_id = _ref_id(caller, object_ref)
    subject_id, subject_kind, pred, current = _prepare(session, caller, subject, predicate_hint, value, ref_id)
    if pred is None:  # not a predicate of the vocabulary as it stands: aliases, descriptions, x.
        _declare_once(session, caller)
        pred = V.resolve_hint(session, caller.tenant_id, predicate_hint, description)
        current = None
    require_fact(session, caller, "write", subject_kind, pred.predicate)
    object_id = E.entity_of_ref(session, caller, object_ref).id if object_ref else None
    if object_id != ref_id:  # a merged entity's ref: the values equal to its survivor are read again
        current = None
    if value is None and object_id is None:
        raise ValidationError("give a value or an object", field="value")
    size = _check_value(value)
    default_origin, default_source = f"app:{caller.app_name}", "extracted"
    if (origin not in (None, default_origin)) or (source not in (None, default_source)):
        RC.require(caller, "origin.override")
    if source_ref is not None and len(source_ref) > MAX_SOURCE_REF:
        raise ValidationError(f"sourceRef is at most {MAX_SOURCE_REF} characters", field="sourceRef")
    if confidence is not None and not 0 <= confidence <= 1:
        raise ValidationError("confidence is between 0 and 1", field="confidence")
    pred = V.ensure(session, caller.tenant_id, pred, caller.app_id)
    actor = actor_for(caller, run_id)
    status, fid = _write(
        session, actor, tenant_id=caller.tenant_id, user_id=caller.user_id, subject_id=subject_id, pred=pred,
        value=value, object_id=object_id, said_by="app", installation_id=caller.installation_id,
        origin=origin or default_origin, source=source or default_source, source_ref=source_ref,
        run_id=actor.run_id, confidence=confidence, pinned=False,
        quota=caller, locked=True, current=current, size=size,
    )  # fmt: skip
    return {"status": status, "ref": caller.ref(FACT_REF, fid), "predicate": pred.predicate}


def _put_fast(
    session: Session,
    caller: AppCaller,
    *,
    hint: Any,
    value: Any,
    subject: str | None,
    object_ref: str | None,
    source_ref: str | None,
    run_id: str | None,
    origin: str | None,
    source: str | None,
    confidence: float | None,
) -> dict[str, Any] | None:
    """The common ``put`` in one statement (``_PUT``): a value about the user under a predicate
    the hint names exactly and the app may write, nothing to override. None: anything else, or
    the statement wrote nothing and left the decision to the two-statement way (which also
    refuses bad input, in its own order, so this path never raises a validation error)."""
    if subject not in (None, "", "self") or object_ref or value is None or not isinstance(hint, str):
        return None
    name = hint.strip()
    if not V.is_predicate(name) or not covered(caller, "write", "self", name):
        return None
    size = _json_size(value)
    default_origin = f"app:{caller.app_name}"
    if (
        size > MAX_VALUE_BYTES
        or origin not in (None, default_origin)
        or source not in (None, "extracted")
        or (source_ref is not None and len(source_ref) > MAX_SOURCE_REF)
        or (confidence is not None and not 0 <= confidence <= 1)
    ):
        return None
    actor = actor_for(caller, run_id)
    fid = uuid.uuid4()
    params = {
        "id": fid, "t": caller.tenant_id, "u": caller.user_id, "p": name, "v": value, "o": None, "now": utcnow(),
        "by": "app", "i": caller.installation_id, "origin": default_origin, "source": "extracted",
        "sref": source_ref, "run": actor.run_id, "conf": confidence, "pinned": False,
        "cid": uuid.uuid4(), "crun": actor.run_id, "atype": actor.actor_type, "aid": actor.principal.user_id,
        "summary": f"{name} = {json.dumps(value, ensure_ascii=False)[:200]}"[:500],
        "cat": change_created_at(session), "maxw": quotas.WRITES_PER_DAY, "maxc": quotas.char_limit(caller),
    } | quotas.charge_params(caller, size)  # fmt: skip
    row = session.execute(_PUT, params).one()
    if row.decision == "duplicate":
        return {"status": "duplicate", "ref": caller.ref(FACT_REF, row.same_id), "predicate": name}
    if row.decision == "apply":
        quotas.refuse_over(caller, row.writes, row.chars)  # over a limit: nothing was written
        return {"status": "applied", "ref": caller.ref(FACT_REF, fid), "predicate": name}
    return None


_PREPARE_T = (
    """
WITH s AS (UPDATE entities SET updated_at = updated_at WHERE {where} RETURNING id)
SELECT s.id AS subject_id, p.predicate AS known, p.cardinality, p.origin AS porigin, p.app_id AS papp,
       f.id, f.value, f.object_id, f.said_by, f.installation_id, """
    + _SAME.format(f="f.")
    + """ AS same
FROM s
LEFT JOIN fact_predicates p ON p.tenant_id = :t AND p.predicate = :p
LEFT JOIN facts f ON f.subject_id = s.id AND f.predicate = :p AND """
    + _RELEVANT.format(f="f.", card="p.cardinality")
    + """
ORDER BY f.valid_from
"""
)
_PREPARE_SELF = text(_PREPARE_T.format(where="tenant_id = :t AND user_id = :u AND kind = 'self'")).bindparams(
    bindparam("v", type_=JSONB)
)
_PREPARE_ENTITY = text(_PREPARE_T.format(where="id = :s")).bindparams(bindparam("v", type_=JSONB))


def _prepare(
    session: Session, caller: AppCaller, subject: str | None, hint: str, value: Any, object_id: uuid.UUID | None
) -> tuple[uuid.UUID, str, V.Pred | None, list[Any] | None]:
    """One statement for the common write: the subject locked, the hint as a known predicate
    (None when it is not one), and the subject's current values of it that the write decides on
    (``_RELEVANT``: for a ``many`` predicate only those equal to ``value``/``object_id``)."""
    name = hint.strip() if isinstance(hint, str) and V.is_predicate(hint.strip()) else ""
    if subject in (None, "", "self"):
        params = {"t": caller.tenant_id, "u": caller.user_id, "p": name, "v": value, "o": object_id}
        rows = session.execute(_PREPARE_SELF, params).all()
        if not rows:  # the user's own entity, on their first fact
            E.self_entity(session, caller.tenant_id, caller.user_id)
            rows = session.execute(_PREPARE_SELF, params).all()
        kind = "self"
    else:
        ent = E.entity_of_ref(session, caller, str(subject))
        params = {"s": ent.id, "t": caller.tenant_id, "p": name, "v": value, "o": object_id}
        rows = session.execute(_PREPARE_ENTITY, params).all()
        kind = ent.kind
    first = rows[0]
    if first.known is None:
        return first.subject_id, kind, None, None
    pred = V.Pred(first.known, first.cardinality, "", "", "", (), first.porigin, first.papp)
    return first.subject_id, kind, pred, [r for r in rows if r.id is not None]


def _ref_id(caller: AppCaller, ref: str | None) -> uuid.UUID | None:
    """The id an entity ref carries, or None (a ref that does not read is refused later, in order)."""
    if not ref:
        return None
    try:
        return caller.read_ref(ref, E.ENTITY_REF, "no entity")[1]
    except OpenKBError:
        return None


def _fact_of_ref(session: Session, caller: AppCaller, ref: str) -> tuple[Fact, str]:
    _, fid = caller.read_ref(ref, FACT_REF, "fact")
    f = session.get(Fact, fid)
    if f is None or f.tenant_id != caller.tenant_id or f.user_id != caller.user_id:
        raise NotFound("fact not found")
    subj = session.get(Entity, f.subject_id)
    assert subj is not None
    return f, subj.kind


def retract(
    session: Session, caller: AppCaller, ref: str, *, run_id: str | None = None, settings: Settings | None = None
) -> dict[str, str]:
    """Expire a fact (never delete it): ``retracted`` | ``already_retracted``. Another writer's
    fact (the user's, another app's) needs ``changes.manage`` as well."""
    f, kind = _fact_of_ref(session, caller, ref)
    require_fact(session, caller, "write", kind, f.predicate)
    if f.installation_id != caller.installation_id:
        RC.require(caller, "changes.manage")
    if f.valid_to is not None:
        return {"status": "already_retracted"}
    quotas.charge(session, caller, 0, settings)
    _expire(session, actor_for(caller, run_id), f)
    return {"status": "retracted"}


def _expire(session: Session, actor: Actor, f: Fact) -> None:
    E.lock_subject(session, f.subject_id)  # a concurrent put about the subject decides after it
    f.valid_to = max(utcnow(), f.valid_from)
    session.add(f)
    session.flush()
    record_change(
        session, actor, op="fact.retract", object_type="fact", object_id=f.id,
        summary=f"{f.predicate} retracted", scope={},
        before={"predicate": f.predicate, "valid_to": None},
        after={"predicate": f.predicate, "valid_to": f.valid_to, "made_current": [], "expired": [f.id]},
    )  # fmt: skip


_LOOKUP_T = (
    "SELECT id, predicate, value, object_id, valid_from FROM facts "
    "WHERE subject_id = {subject} AND valid_to IS NULL AND NOT inferred "
    "AND predicate LIKE ANY(:reads) AND (CAST(:want AS text[]) IS NULL OR predicate LIKE ANY(:want)) "
    "ORDER BY predicate, valid_from"
)
_ARRAYS = (bindparam("reads", type_=ARRAY(Text)), bindparam("want", type_=ARRAY(Text)))
_LOOKUP = text(_LOOKUP_T.format(subject=":s")).bindparams(*_ARRAYS)
# the user's own entity found in the same statement (one round trip for the common case)
_SELF = "(SELECT id FROM entities WHERE tenant_id = :t AND user_id = :u AND kind = 'self')"
_LOOKUP_SELF = text(_LOOKUP_T.format(subject=_SELF)).bindparams(*_ARRAYS)


def _fact_out(caller: AppCaller, r: Any) -> dict[str, Any]:
    return {
        "ref": caller.ref(FACT_REF, r.id),
        "predicate": r.predicate,
        "value": r.value,
        "object": caller.ref(E.ENTITY_REF, r.object_id) if r.object_id else None,
        "validFrom": r.valid_from,
    }


def lookup(session: Session, caller: AppCaller, subject: str | None = "self", prefix: str | None = None) -> list[dict]:
    """Current facts of the subject under ``prefix`` that the app's ``facts.read`` strings for
    the subject's kind cover — a query method: the rest is left out."""
    p = _prefix(prefix)
    want = _patterns([p]) if p else None
    if subject in (None, "", "self"):
        reads = _read_patterns(caller, "self")
        if not reads:
            return []
        params = {"t": caller.tenant_id, "u": caller.user_id, "reads": reads, "want": want}
        return [_fact_out(caller, r) for r in session.execute(_LOOKUP_SELF, params).all()]
    subject_id, kind = _subject(session, caller, subject)
    reads = _read_patterns(caller, kind)
    if not reads:
        return []
    rows = session.execute(_LOOKUP, {"s": subject_id, "reads": reads, "want": want}).all()
    return [_fact_out(caller, r) for r in rows]


_PROFILE = text(
    "SELECT predicate, value FROM facts WHERE subject_id = " + _SELF + " AND valid_to IS NULL AND NOT inferred "
    "AND pinned "
    "AND predicate LIKE ANY(:reads) AND (CAST(:want AS text[]) IS NULL OR predicate LIKE ANY(:want)) "
    "ORDER BY predicate, valid_from"
).bindparams(bindparam("reads", type_=ARRAY(Text)), bindparam("want", type_=ARRAY(Text)))


def profile_get(session: Session, caller: AppCaller, prefix: str | None = None) -> list[dict[str, Any]]:
    """The user's pinned facts about themselves ∩ the app's ``facts.read:self:...``."""
    p = _prefix(prefix)
    reads = _read_patterns(caller, "self")
    if not reads:
        return []
    params = {"t": caller.tenant_id, "u": caller.user_id, "reads": reads, "want": _patterns([p]) if p else None}
    rows = session.execute(_PROFILE, params).all()  # one statement; a read never creates the self entity
    return [{"predicate": r.predicate, "value": r.value} for r in rows]


# --- the user's own values (the account area, the assistant) ------------------------------------


def _user(principal: Principal) -> tuple[uuid.UUID, uuid.UUID]:
    if principal.kind != "user" or principal.user_id is None or principal.tenant_id is None:
        raise Unauthenticated("sign in to manage your facts")
    return principal.user_id, principal.tenant_id


def user_put(
    session: Session,
    principal: Principal,
    *,
    predicate: str,
    value: Any = None,
    subject_id: uuid.UUID | None = None,
    object_id: uuid.UUID | None = None,
    pinned: bool | None = None,
) -> dict[str, Any]:
    """A value the user says (the account area's facts, or the user's own assistant): it counts
    as user-said, so apps cannot overwrite it on a cardinality-``one`` predicate. About
    themselves it is pinned (part of the profile) unless ``pinned=False``."""
    uid, tid = _user(principal)
    V.check_predicate(predicate)
    if subject_id is None:
        sid = E.self_entity(session, tid, uid)
    else:
        sid = E.access_entity(session, principal, subject_id).id
    if object_id is not None:
        object_id = E.access_entity(session, principal, object_id).id
    if value is None and object_id is None:
        raise ValidationError("give a value or an object", field="value")
    size = _check_value(value)
    pred = V.get(session, tid, predicate) or V.ensure(
        session, tid, V.Pred(predicate, "many", "", "", "", (), "user", None, known=False), None
    )
    self_id = sid if subject_id is None else E.self_entity(session, tid, uid)
    status, fid = _write(
        session, Actor.of(principal), tenant_id=tid, user_id=uid, subject_id=sid, pred=pred, value=value,
        object_id=object_id, said_by="user", installation_id=None, origin="user", source="user", source_ref=None,
        run_id=None, confidence=None, pinned=(sid == self_id) if pinned is None else pinned, size=size,
    )  # fmt: skip
    return {"status": status, "id": fid, "predicate": pred.predicate}


def user_retract(session: Session, principal: Principal, fact_id: uuid.UUID) -> dict[str, str]:
    uid, tid = _user(principal)
    f = session.get(Fact, fact_id)
    if f is None or f.tenant_id != tid or f.user_id != uid:
        raise NotFound("fact not found")
    if f.valid_to is not None:
        return {"status": "already_retracted"}
    _expire(session, Actor.of(principal), f)
    return {"status": "retracted"}


def user_facts(
    session: Session,
    principal: Principal,
    *,
    subject_id: uuid.UUID | None = None,
    prefix: str | None = None,
    history: bool = False,
) -> list[dict[str, Any]]:
    """The user's own view: everything, with who said it and where it came from (``history``:
    expired rows too)."""
    uid, tid = _user(principal)
    sid = E.self_entity(session, tid, uid) if subject_id is None else E.access_entity(session, principal, subject_id).id
    p = _prefix(prefix)
    rows = session.execute(
        text(
            "SELECT f.*, a.name AS app_name FROM facts f LEFT JOIN app_installations i ON i.id = f.installation_id "
            "LEFT JOIN apps a ON a.id = i.app_id WHERE f.subject_id = :s "
            + ("" if history else "AND f.valid_to IS NULL ")
            + ("AND (f.predicate = :p OR f.predicate LIKE :pl) " if p else "")
            + "ORDER BY f.predicate, f.valid_from"
        ),
        {"s": sid, "p": p, "pl": (_like(p) + ".%") if p else None},
    ).all()
    return [
        {
            "id": r.id,
            "predicate": r.predicate,
            "value": r.value,
            "object_id": r.object_id,
            "valid_from": r.valid_from,
            "valid_to": r.valid_to,
            "said_by": r.said_by,
            "app": r.app_name,
            "origin": r.origin,
            "source": r.source,
            "source_ref": r.source_ref,
            "confidence": r.confidence,
            "inferred": r.inferred,
            "pinned": r.pinned,
        }
        for r in rows
    ]


# --- installations (uninstall) -------------------------------------------------------------------


def count_for_installation(session: Session, installation_id: uuid.UUID) -> int:
    """Current facts an installation wrote (the uninstall dialog's count)."""
    return int(
        session.execute(
            text("SELECT count(*) FROM facts WHERE installation_id = :i AND valid_to IS NULL"), {"i": installation_id}
        ).scalar_one()
    )


def expire_for_installation(session: Session, actor: Actor, installation_id: uuid.UUID) -> int:
    """A delete-uninstall: the installation's current facts expire, each a change of ``actor``'s
    run (so reverting the run brings them back)."""
    ids = session.execute(
        text("SELECT id FROM facts WHERE installation_id = :i AND valid_to IS NULL ORDER BY valid_from"),
        {"i": installation_id},
    ).scalars()
    n = 0
    for fid in list(ids):
        f = session.get(Fact, fid)
        assert f is not None
        _expire(session, actor, f)
        n += 1
    return n


def installation_facts(session: Session, principal: Principal, installation_id: uuid.UUID) -> list[dict[str, Any]]:
    """What the account area shows per installed app (docs/facts.md#the-users-page): every
    predicate about the user that the app's ``facts.read|write:self:…`` strings cover (asked
    for, switched on or not) — core ones by their names, the app's own with its description —
    and the user's current values of each. Facts about contacts are not listed here."""
    uid, tid = _user(principal)
    inst = access_installation(session, principal, installation_id)
    app = session.get(App, inst.app_id)
    perms = [parse(p) for p in (app.permissions if app else []) if p.startswith("facts.")]
    perms = [p for p in perms if p.subject == "self"]
    if not perms:
        return []
    sid = E.self_entity(session, tid, uid)
    current: dict[str, list[dict[str, Any]]] = {}
    for r in session.execute(
        text(
            "SELECT id, predicate, value, object_id, said_by, valid_from FROM facts "
            "WHERE subject_id = :s AND valid_to IS NULL AND NOT inferred ORDER BY valid_from"
        ),
        {"s": sid},
    ):
        current.setdefault(r.predicate, []).append(
            {"id": r.id, "value": r.value, "object_id": r.object_id, "said_by": r.said_by, "valid_from": r.valid_from}
        )
    vocab = {p.predicate: p for p in V.all_predicates(session, tid)}
    names = sorted(set(vocab) | set(current))
    out = []
    for name in names:
        reads = any(p.action == "read" and p.covers_predicate(name) for p in perms)
        writes = any(p.action == "write" and p.covers_predicate(name) for p in perms)
        if not reads and not writes:
            continue
        pred = vocab.get(name)
        out.append(
            {
                "predicate": name,
                "cardinality": pred.cardinality if pred else "many",
                "names": {"zh-CN": pred.name_zh if pred else "", "en": pred.name_en if pred else ""},
                "description": pred.description if pred else "",
                "added_by_this_app": bool(pred and pred.app_id == inst.app_id),
                "reads": reads,
                "writes": writes,
                "values": current.get(name, []),
            }
        )
    return out
