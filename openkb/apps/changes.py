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

from sqlalchemy import and_, or_
from sqlmodel import Session, col, select

from openkb.apps import reach as RC
from openkb.apps import refs as R
from openkb.apps.knowledge import actor_for, parse_time
from openkb.apps.registry import AppCaller
from openkb.content import revert as revert_service
from openkb.content.actor import parse_run_id
from openkb.errors import NotFound, ValidationError
from openkb.models import App, AppInstallation, Change
from openkb.permissions import Principal, change_scope

STATUSES = ("applied", "reverted", "conflict")


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
        "proposed": None,
        "createdAt": c.created_at,
    }


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
    q = select(Change).where(and_(*conds)).order_by(col(Change.created_at).desc(), col(Change.id).desc())
    rows = list(session.exec(q.limit(limit * 3 if caller.has("changes.manage") else limit)).all())
    rows = _visible(session, caller, rows)[:limit]
    actors = _actors(session, rows)
    return [change_out(caller, c, actors) for c in rows]


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
        out = revert_service.revert(session, actor, run_id=rid, blobs=blobs)
    return {
        "runId": str(out["run_id"]),
        "reverted": [caller.ref(R.CHANGE, r["change_id"]) for r in out["reverted"]],
        "skipped": [{"ref": caller.ref(R.CHANGE, s["change_id"]), "reason": s["reason"]} for s in out["skipped"]],
    }


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
