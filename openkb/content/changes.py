"""The change log: one ``changes`` row per write, grouped by run, listed per caller.

Every row carries ``before_state``/``after_state`` (only the fields the write touched, plus the
``knowledge_base_id``/``workspace_id`` scope) and, for body writes, the version ids, so
``revert.py`` can undo it without guessing. Ops are ``<object>.<verb>``:

* ``document.create`` / ``document.remove`` (a revert of a create) / ``document.purge`` — the
  removing ones keep a full snapshot (fields + current body) so they can be re-created;
* ``document.update`` (rename, move, status, permission mode, visibility, metadata, tags);
* ``document.save`` / ``document.restore_version`` / ``document.upsert`` — a new version;
* ``document.trash`` / ``document.untrash``;
* ``knowledge_base.create|update|remove``, ``workspace.create|update``,
  ``workspace_member.add|update|remove``.

Visibility (docs: "own changes; all with manage rights"): a caller sees the changes it made, plus
every change inside a knowledge base it manages. The rule is ``rules.change_visible``; listings
add ``change_scope(...).clause()`` to their query and one change is read with
``openkb.permissions.access_change`` (both in ``openkb/permissions/change_log.py``).

Trap: all rows of one transaction would share ``now()``; ordering (and so revert order) relies
on ``created_at`` being strictly increasing within a session, which :func:`record_change`
guarantees.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, text
from sqlmodel import Session, col, select

from openkb.content.actor import Actor, parse_run_id
from openkb.errors import ValidationError
from openkb.models import Change
from openkb.models._base import utcnow
from openkb.permissions import Principal, change_scope
from openkb.permissions.change_log import KB_OF_CHANGE_SQL


def jsonable(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def change_created_at(session: Session) -> datetime:
    """The next change row's ``created_at``: strictly increasing within the session, so a run's
    changes keep their order (a revert undoes them newest first). Public for writers that insert
    their change row in the same statement as the write itself (``openkb.facts.service``)."""
    now = utcnow()
    last: datetime | None = session.info.get("last_change_at")
    if last is not None and now <= last:
        now = last + timedelta(microseconds=1)
    session.info["last_change_at"] = now
    return now


def record_change(
    session: Session,
    actor: Actor,
    *,
    op: str,
    object_type: str,
    object_id: uuid.UUID,
    summary: str,
    scope: dict[str, Any],
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    before_version_id: uuid.UUID | None = None,
    after_version_id: uuid.UUID | None = None,
    reverts: Change | None = None,
    flush: bool = True,
) -> Change:
    """Append one change row. ``scope`` names ``knowledge_base_id`` and/or ``workspace_id``.
    ``flush=False``: a batch writer (``upsert.KeyedBatch``) flushes many rows at once."""
    sc = jsonable({k: v for k, v in scope.items() if v is not None})
    b = {**sc, **jsonable(before or {})}
    a = {**sc, **jsonable(after or {})}
    if reverts is not None:
        a["reverts_change_id"] = str(reverts.id)
    row = Change(
        tenant_id=actor.tenant_id,
        run_id=actor.run_id,
        actor_type=actor.actor_type,
        actor_id=actor.principal.user_id,
        op=op,
        object_type=object_type,
        object_id=object_id,
        summary=summary[:500],
        before_version_id=before_version_id,
        after_version_id=after_version_id,
        before_state=b,
        after_state=a,
        status="applied",
        app_installation_id=actor.app_installation_id,
        created_at=change_created_at(session),
    )
    session.add(row)
    if reverts is not None:
        reverts.status = "reverted"
        reverts.reverted_by_change_id = row.id
        session.add(reverts)
    if flush:
        session.flush()
    return row


def change_out(c: Change) -> dict[str, Any]:
    kb = c.after_state.get("knowledge_base_id") or c.before_state.get("knowledge_base_id")
    ws = c.after_state.get("workspace_id") or c.before_state.get("workspace_id")
    return {
        "id": c.id,
        "run_id": c.run_id,
        "actor_type": c.actor_type,
        "actor_id": c.actor_id,
        "op": c.op,
        "object_type": c.object_type,
        "object_id": c.object_id,
        "summary": c.summary,
        "status": c.status,
        "knowledge_base_id": kb,
        "workspace_id": ws,
        "before_version_id": c.before_version_id,
        "after_version_id": c.after_version_id,
        "before": _public_state(c.before_state),
        "after": _public_state(c.after_state),
        "reverted_by_change_id": c.reverted_by_change_id,
        "created_at": c.created_at,
    }


def _public_state(state: dict[str, Any]) -> dict[str, Any]:
    """States without the stored bodies of snapshots (those can be megabytes)."""
    out = {k: v for k, v in state.items() if k not in ("markdown", "snapshot")}
    if "markdown" in state:
        out["markdown_chars"] = len(state["markdown"] or "")
    return out


def list_changes(
    session: Session,
    principal: Principal,
    *,
    run_id: str | None = None,
    knowledge_base_id: uuid.UUID | None = None,
    object_id: uuid.UUID | None = None,
    status: str | None = None,
    since: datetime | None = None,
    before: datetime | None = None,
    limit: int = 100,
) -> list[Change]:
    if principal.kind != "user" or principal.tenant_id is None:
        return []
    if status is not None and status not in ("applied", "reverted"):
        raise ValidationError("status must be applied or reverted", field="status")
    limit = max(1, min(int(limit), 500))
    conds = [col(Change.tenant_id) == principal.tenant_id, change_scope(session, principal, knowledge_base_id).clause()]
    rid = parse_run_id(principal.tenant_id, run_id)
    if rid is not None:
        conds.append(col(Change.run_id) == rid)
    if knowledge_base_id is not None:
        conds.append(text(f"{KB_OF_CHANGE_SQL} = :kbf").bindparams(kbf=str(knowledge_base_id)))
    if object_id is not None:
        conds.append(col(Change.object_id) == object_id)
    if status is not None:
        conds.append(col(Change.status) == status)
    if since is not None:
        conds.append(col(Change.created_at) >= since)
    if before is not None:
        conds.append(col(Change.created_at) < before)
    q = select(Change).where(and_(*conds)).order_by(col(Change.created_at).desc(), col(Change.id).desc()).limit(limit)
    return list(session.exec(q).all())


def run_changes(session: Session, principal: Principal, run_id: str | uuid.UUID) -> list[Change]:
    """The caller-visible changes of one run, newest first (the order a revert undoes them)."""
    if principal.kind != "user" or principal.tenant_id is None:
        return []
    rid = parse_run_id(principal.tenant_id, run_id)
    q = (
        select(Change)
        .where(
            col(Change.tenant_id) == principal.tenant_id,
            col(Change.run_id) == rid,
            change_scope(session, principal).clause(),
        )
        .order_by(col(Change.created_at).desc(), col(Change.id).desc())
    )
    return list(session.exec(q).all())
