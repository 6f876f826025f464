"""``changes.list`` / ``changes.revert`` for apps (docs/apps.md#changes).

Every write of an installation is an ordinary ``changes`` row with ``app_installation_id`` set
and a run per call (or the run the app named, mapped per installation). Without
``changes.manage`` an app sees and reverts only its own changes; with it, every change the
*user* may see (``change_scope``) whose document lies inside the app's granted read reach.
A change list is a query method: what is out of reach is left out silently.

Reverting goes through ``openkb.content.revert`` with the installation's actor, so the same
permission checks, conflict detection and index jobs apply, and the revert is itself a change
of the app that can be reverted.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, tuple_
from sqlmodel import Session, col, select

from openkb.apps import reach as RC
from openkb.apps import refs as R
from openkb.apps.knowledge import actor_for, parse_time
from openkb.apps.registry import AppCaller
from openkb.content import revert as revert_service
from openkb.content.actor import parse_run_id
from openkb.errors import NotFound, ValidationError
from openkb.facts.entities import ENTITY_REF
from openkb.models import App, AppInstallation, Change, Entity, Fact
from openkb.permissions import Principal, change_scope

STATUSES = ("applied", "reverted", "conflict")
MIN_BATCH = 100  # rows per statement of a ``changes.manage`` listing (``_newest_visible``)


def _visible(session: Session, caller: AppCaller, rows: list[Change]) -> list[Change]:
    """Own changes always; others' only with ``changes.manage`` and inside the read reach."""
    others = [c for c in rows if c.app_installation_id != caller.installation_id]
    if not others:
        return rows
    if not caller.has("changes.manage"):
        return [c for c in rows if c.app_installation_id == caller.installation_id]
    locs = RC.locate(session, [c.object_id for c in others if c.object_type == "document"])
    ok: set[uuid.UUID] = set()
    for c in others:
        if c.object_type == "document":
            loc = locs.get(c.object_id)
            if loc is not None and RC.reaches(caller, "read", loc.knowledge_base_id, loc.chain):
                ok.add(c.id)
        elif c.object_type == "knowledge_base" and RC.reaches(caller, "read", c.object_id, ()):
            ok.add(c.id)
    return [c for c in rows if c.app_installation_id == caller.installation_id or c.id in ok]


def _actors(session: Session, rows: list[Change]) -> dict[uuid.UUID, str]:
    ids = {c.app_installation_id for c in rows if c.app_installation_id}
    if not ids:
        return {}
    q = select(AppInstallation.id, App.name).join(App, col(App.id) == col(AppInstallation.app_id))
    return {i: f"app:{n}" for i, n in session.exec(q.where(col(AppInstallation.id).in_(ids))).all()}


def change_out(caller: AppCaller, c: Change, actors: dict[uuid.UUID, str]) -> dict[str, Any]:
    return {
        "ref": caller.ref(R.CHANGE, c.id),
        "runId": str(c.run_id),
        "actor": actors.get(c.app_installation_id, "app") if c.app_installation_id else "user",
        "own": c.app_installation_id == caller.installation_id,
        "op": c.op,
        "summary": c.summary,
        "status": c.status,
        "proposed": _proposed(caller, c),
        "createdAt": c.created_at,
    }


def _proposed(caller: AppCaller, c: Change) -> Any:
    """A conflict's refused value (docs/apps.md#changes): the value the app sent, or
    ``{"object": <entity ref>}`` when it pointed at an entity (stored by id, which an app never
    sees). None for every other change."""
    if c.status != "conflict":
        return None
    proposed = (c.after_state or {}).get("proposed")
    if isinstance(proposed, dict) and set(proposed) == {"object"} and isinstance(proposed["object"], str):
        try:
            return {"object": caller.ref(ENTITY_REF, uuid.UUID(proposed["object"]))}
        except ValueError:
            pass  # a value that only looks like an object: shown as it is
    return proposed


def changes_list(
    session: Session, caller: AppCaller, *, since: Any = None, status: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    if status is not None and status not in STATUSES:
        raise ValidationError(f"status must be one of {', '.join(STATUSES)}", field="status")
    limit = max(1, min(int(limit), 500))
    since_dt: datetime | None = parse_time(since, False, "since")
    own = col(Change.app_installation_id) == caller.installation_id
    who = or_(own, change_scope(session, caller.principal).clause()) if caller.has("changes.manage") else own
    conds = [col(Change.tenant_id) == caller.tenant_id, who]
    if status is not None:
        conds.append(col(Change.status) == status)
    if since_dt is not None:
        conds.append(col(Change.created_at) >= since_dt)
    rows = _newest_visible(session, caller, conds, limit)
    actors = _actors(session, rows)
    return [change_out(caller, c, actors) for c in rows]


def _newest_visible(session: Session, caller: AppCaller, conds: list[Any], limit: int) -> list[Change]:
    """Up to ``limit`` changes the app may see, newest first. The user's scope is SQL, the app's
    reach is not (``_visible`` locates each document), so with ``changes.manage`` the rows are
    read in batches, each continuing after the last row of the one before (keyset on
    ``created_at, id``), until ``limit`` of them are visible or none are left: the user's newer
    changes out of the app's reach do not crowd out the ones it may see."""
    order = (col(Change.created_at).desc(), col(Change.id).desc())
    if not caller.has("changes.manage"):  # own changes only: all in SQL
        return list(session.exec(select(Change).where(and_(*conds)).order_by(*order).limit(limit)).all())
    batch = max(limit * 3, MIN_BATCH)
    out: list[Change] = []
    after: tuple[datetime, uuid.UUID] | None = None
    while len(out) < limit:
        where = list(conds)
        if after is not None:
            where.append(tuple_(col(Change.created_at), col(Change.id)) < tuple_(*after))
        rows = list(session.exec(select(Change).where(and_(*where)).order_by(*order).limit(batch)).all())
        out += _visible(session, caller, rows)
        if len(rows) < batch:
            break
        after = (rows[-1].created_at, rows[-1].id)
    return out[:limit]


def changes_revert(
    session: Session, caller: AppCaller, *, ref: str | None = None, run_id: str | None = None, blobs: Any = None
) -> dict[str, Any]:
    """Undo one change (its ref) or a whole run, as new writes of this app."""
    if (ref is None) == (run_id is None):
        raise ValidationError("give exactly one of ref or runId", field="ref")
    actor = actor_for(caller)
    if ref is not None:
        _, cid = caller.read_ref(ref, R.CHANGE, "change")
        c = session.get(Change, cid)
        if c is None or c.tenant_id != caller.tenant_id or not _visible(session, caller, [c]):
            raise NotFound("change not found")
        if c.app_installation_id != caller.installation_id:
            RC.require(caller, "changes.manage")
        _require_write(session, caller, [c])
        out = revert_service.revert(session, actor, change_id=cid, blobs=blobs)
    else:
        rid = _run_uuid(caller, str(run_id))
        rows = list(
            session.exec(
                select(Change).where(col(Change.tenant_id) == caller.tenant_id, col(Change.run_id) == rid)
            ).all()
        )
        visible = _visible(session, caller, rows)
        if not visible:
            raise NotFound("no changes of this app in this run")
        if len(visible) != len(rows):
            # a run that reaches beyond the app's grants is not reverted in part
            RC.require(caller, "changes.manage")
            raise RC.missing("collections.write:user-selected")
        _require_write(session, caller, rows)
        out = revert_service.revert(session, actor, run_id=rid, blobs=blobs)
    return {
        "runId": str(out["run_id"]),
        "reverted": [caller.ref(R.CHANGE, r["change_id"]) for r in out["reverted"]],
        "skipped": [{"ref": caller.ref(R.CHANGE, s["change_id"]), "reason": s["reason"]} for s in out["skipped"]],
    }


def _require_write(session: Session, caller: AppCaller, rows: list[Change]) -> None:
    """A revert is a write of the app: every change it would undo (the ``applied`` ones) must be
    one the app could write *now*, with its current switches and reach — a page or collection
    where its current location is inside a granted write root (and another writer's document
    needs ``changes.manage``, as for ``documents.upsert``), a fact under a ``facts.write``
    covering its predicate, an entity under ``entities.write:<kind>``. One change out of reach
    refuses the whole revert with ``KNOWLEDGE_PERMISSION_MISSING`` before anything is undone
    (docs/apps.md#changes): a switch the user turned off must not be bypassed through the
    change log."""
    from openkb.facts.service import require_fact

    todo = [c for c in rows if c.status == "applied"]
    locs = RC.locate(session, [c.object_id for c in todo if c.object_type == "document"])
    for c in todo:
        if c.object_type == "document":
            loc = locs.get(c.object_id)
            if loc is None:
                continue  # purged: the content revert answers object_gone and writes nothing
            RC.check(caller, "write", loc.knowledge_base_id, loc.chain)
            if loc.writer != caller.installation_id:
                RC.require(caller, "changes.manage")
        elif c.object_type == "knowledge_base":
            RC.check(caller, "write", c.object_id, ())
        elif c.object_type == "fact":
            f = session.get(Fact, c.object_id)
            subject = session.get(Entity, f.subject_id) if f is not None else None
            if f is not None and subject is not None:
                require_fact(session, caller, "write", subject.kind, f.predicate)
        elif c.object_type == "entity":
            ent = session.get(Entity, c.object_id)
            if ent is not None:
                RC.require(caller, f"entities.write:{ent.kind}")


def _run_uuid(caller: AppCaller, run_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(run_id.strip())
    except ValueError:
        rid = parse_run_id(caller.tenant_id, f"app:{caller.installation_id}:{run_id.strip()}")
        assert rid is not None
        return rid


def installation_changes(
    session: Session, principal: Principal, installation_id: uuid.UUID, *, limit: int = 50
) -> list[dict[str, Any]]:
    """The user's view of what one of their installations wrote (the account area's "recent
    changes", newest first); reverting them is the ordinary ``POST /api/changes/revert``."""
    from openkb.apps.registry import access_installation
    from openkb.content.changes import change_out as content_change_out

    inst = access_installation(session, principal, installation_id)
    q = (
        select(Change)
        .where(
            col(Change.app_installation_id) == inst.id,
            change_scope(session, principal).clause(),
        )
        .order_by(col(Change.created_at).desc(), col(Change.id).desc())
        .limit(max(1, min(int(limit), 200)))
    )
    return [content_change_out(c) for c in session.exec(q).all()]
