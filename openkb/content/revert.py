"""Revert: undo one change, or every change of a run, newest first, as new recorded writes.

A revert never rewrites history: it performs the inverse write through the same services (so
the same permission checks, limits and index jobs apply) and records it in the caller's current
run, with ``reverts_change_id`` in its state; the original row becomes ``reverted``. Reverting
the revert's run therefore re-applies the original writes.

What "previous state" means per op:

* body writes (save, restore_version, upsert) -> a new version with the old body and title;
* field updates -> the old field values (a move goes back to the old parent and position);
* create -> the document (or an empty knowledge base / workspace) is removed, with a snapshot;
* remove / purge -> the document is re-created from its snapshot (same id, last body);
* trash <-> untrash; member add <-> remove; member role back.

Decisions:

* A change whose object was changed again later, outside the set being reverted, is not
  reverted silently over the newer write: ``REVERT_CONFLICT`` (409) names the blocking changes.
* Without manage rights a caller sees — and so reverts — only its own changes (also within a
  run); managers of a knowledge base may revert anyone's changes in it.
* Already reverted changes are skipped, so reverting a run twice is harmless.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlmodel import Session, col, select

from openkb.content import documents as docs
from openkb.content import knowledge_bases as kbs
from openkb.content import sharing
from openkb.content import workspaces as wss
from openkb.content.actor import Actor
from openkb.content.changes import record_change, run_changes
from openkb.content.versions import commit_version, lock_document, prepare_markdown, scope_of
from openkb.errors import NotFound, NotRevertible, PermissionDenied, RevertConflict, ValidationError
from openkb.facts.revert import revert_fact_change
from openkb.models import Change, Document, DocumentVersion
from openkb.permissions import Action, access_change, access_document
from openkb.permissions.change_log import kb_of_state

__all__ = ["NotRevertible", "RevertConflict", "revert"]


def revert(
    session: Session,
    actor: Actor,
    *,
    change_id: uuid.UUID | None = None,
    run_id: str | uuid.UUID | None = None,
    blobs: Any = None,
    knowledge_base_id: uuid.UUID | None = None,
) -> dict[str, Any]:
    """``blobs`` (the blob store) is needed to revert uploads (``asset.create`` deletes the asset).

    ``knowledge_base_id`` (a run only): undo the run's changes in that knowledge base, and its
    changes that name none (an upload written before its page); NotFound when the run changed
    nothing there. ``openkb import revert RUN --kb KB`` reverted a run that wrote elsewhere: the
    operator named the knowledge base to protect the others."""
    p = actor.principal
    if (change_id is None) == (run_id is None):
        raise ValidationError("give exactly one of change_id or run_id", field="change_id")
    if change_id is not None:
        targets = [access_change(session, p, change_id)]
    else:
        targets = run_changes(session, p, run_id)  # type: ignore[arg-type]
        if not targets:
            raise NotFound("no changes of yours in this run")
        if knowledge_base_id is not None:
            if not any(kb_of_state(c) == knowledge_base_id for c in targets):
                raise NotFound("this run changed nothing in this knowledge base")
            targets = [c for c in targets if kb_of_state(c) in (knowledge_base_id, None)]
    targets.sort(key=lambda c: (c.created_at, str(c.id)), reverse=True)
    todo = [c for c in targets if c.status == "applied"]
    skipped = [{"change_id": c.id, "reason": "already_reverted"} for c in targets if c.status != "applied"]
    _check_conflicts(session, actor, todo)
    done: list[dict[str, Any]] = []
    for c in todo:
        outcome = _revert_one(session, actor, c, blobs)
        if outcome == "gone":
            skipped.append({"change_id": c.id, "reason": "object_gone"})
            continue
        if c.status == "applied":  # nothing differed: the object is already in its old state
            c.status = "reverted"
            session.add(c)
            session.flush()
        done.append(
            {
                "change_id": c.id,
                "op": c.op,
                "object_type": c.object_type,
                "object_id": c.object_id,
                "reverted_by_change_id": c.reverted_by_change_id,
            }
        )
    return {"run_id": actor.run_id, "reverted": done, "skipped": skipped}


def _check_conflicts(session: Session, actor: Actor, todo: list[Change]) -> None:
    if not todo:
        return
    ids = {c.id for c in todo}
    rows = session.exec(
        select(Change).where(
            col(Change.tenant_id) == actor.tenant_id,
            col(Change.object_id).in_({c.object_id for c in todo}),
            col(Change.status) == "applied",
        )
    ).all()
    blocking: list[str] = []
    for c in todo:
        for r in rows:
            if (
                r.id not in ids
                and r.object_type == c.object_type
                and r.object_id == c.object_id
                and (r.created_at, str(r.id)) > (c.created_at, str(c.id))
            ):
                blocking.append(str(r.id))
    if blocking:
        raise RevertConflict(
            "the object was changed again after this change; revert the newer changes first (or together, by run)",
            blocking_change_ids=sorted(set(blocking)),
        )


def _uuid(v: Any) -> uuid.UUID | None:
    return uuid.UUID(str(v)) if v else None


def _revert_one(session: Session, actor: Actor, c: Change, blobs: Any) -> str:
    op = c.op
    b = c.before_state
    if op.startswith(("fact.", "entity.")):  # facts expire and come back, never deleted (docs/facts.md#history)
        return revert_fact_change(session, actor, c)
    if op == "asset.create":
        from openkb import assets
        from openkb.models import DocumentAsset

        if session.get(DocumentAsset, c.object_id) is None:
            return "gone"
        if blobs is None:
            raise NotRevertible("reverting an upload needs the blob store")
        assets.delete_asset(session, actor, blobs, c.object_id, reverts=c)
        return "ok"
    if op == "document.create":
        doc = session.get(Document, c.object_id)
        if doc is None:
            return "gone"
        # removing it for good needs what trashing needs (DELETE, as DELETE /api/documents/{id}),
        # or the trash right for one already there: a revert asks what the route asks (docs/api.md)
        acc = access_document(
            session,
            actor.principal,
            doc.id,
            Action.DELETE if doc.status != "deleted" else Action.TRASH,
            for_update=True,
        )
        if not acc.knowledge_base_active:  # TRASH only shows it; an archived kb is read-only
            raise PermissionDenied("the knowledge base is archived (read-only)")
        doc = acc.document
        children = session.exec(select(Document.id).where(col(Document.parent_id) == doc.id)).first()
        if children is not None:
            raise RevertConflict(
                "the document has children now; move or revert them first", blocking_document_id=str(children)
            )
        docs.remove_subtree(session, actor, doc, op="document.remove", reverts=c)
        return "ok"
    if op in ("document.remove", "document.purge"):
        docs.recreate_from_snapshot(session, actor, b, reverts=c)
        return "ok"
    if op in ("document.update", "document.save", "document.restore_version", "document.upsert"):
        if session.get(Document, c.object_id) is None:
            return "gone"
        _revert_document(session, actor, c)
        return "ok"
    if op == "document.trash":
        if session.get(Document, c.object_id) is None:
            return "gone"
        docs.restore_from_trash(session, actor, c.object_id, status=b.get("status"), reverts=c)
        return "ok"
    if op == "document.untrash":
        if session.get(Document, c.object_id) is None:
            return "gone"
        docs.trash_document(session, actor, c.object_id, reverts=c)
        return "ok"
    if op == "knowledge_base.create":
        kbs.delete_empty_knowledge_base(session, actor, c.object_id, reverts=c)
        return "ok"
    if op == "knowledge_base.remove":
        kbs.recreate_knowledge_base(session, actor, b, c.object_id, reverts=c)
        return "ok"
    if op == "knowledge_base.update":
        fields = {k: v for k, v in b.items() if k in kbs.KB_FIELDS}
        kbs.update_knowledge_base(session, actor, c.object_id, fields, reverts=c)
        return "ok"
    if op == "workspace.create":
        wss.delete_empty_workspace(session, actor, c.object_id, reverts=c)
        return "ok"
    if op == "workspace.update":
        wss.update_workspace(
            session, actor, c.object_id, {k: v for k, v in b.items() if k in ("name", "slug", "description")}, reverts=c
        )
        return "ok"
    if op.startswith("workspace_member."):
        ws_id = _uuid(b.get("workspace_id"))
        user_id = _uuid(b.get("user_id") or c.after_state.get("user_id"))
        if ws_id is None or user_id is None:
            raise NotRevertible("this membership change has no workspace/user recorded")
        if op == "workspace_member.add":
            wss.remove_member(session, actor, ws_id, user_id, reverts=c)
        elif op == "workspace_member.update":
            wss.update_member(session, actor, ws_id, user_id, role=b["role"], reverts=c)
        else:
            wss.add_member(session, actor, ws_id, user_id=user_id, role=b["role"], reverts=c)
        return "ok"
    if op.startswith("collaborator."):
        sharing.revert_grant(session, actor, c)
        return "ok"
    if op == "invitation.create":
        sharing.revoke_invitation(session, actor, c.object_id, reverts=c)
        return "ok"
    if op == "share_link.create":
        sharing.revoke_share_link(session, actor, c.object_id, reverts=c)
        return "ok"
    if op in ("invitation.revoke", "share_link.revoke"):
        raise NotRevertible("a closed invitation or share link stays closed; create a new one")
    if op == "owner.transfer":
        raise NotRevertible("ownership goes back only by the new owner transferring it")
    raise NotRevertible(f"changes of kind {op!r} cannot be reverted")


def _revert_document(session: Session, actor: Actor, c: Change) -> None:
    """Old body (as a new version) and old field values of one document."""
    b = c.before_state
    acc = access_document(session, actor.principal, c.object_id, Action.READ)
    doc = acc.document
    if c.after_version_id is not None and doc.current_version_id != c.after_version_id:
        raise RevertConflict(
            "the document has a newer version than the one this change wrote",
            current_version_id=str(doc.current_version_id),
        )
    fields: dict[str, Any] = {k: v for k, v in b.items() if k in docs.UPDATABLE}
    if "parent_id" in fields:
        fields["parent_id"] = _uuid(fields["parent_id"])
    if c.before_version_id is not None and c.after_version_id is not None:
        acc.require(Action.EDIT)
        old = session.get(DocumentVersion, c.before_version_id)
        if old is None:
            raise NotRevertible("the earlier version no longer exists")
        body = prepare_markdown(old.markdown)
        doc = lock_document(session, doc.id)
        cur_no = doc.current_version_id
        title = fields.pop("title", None) or old.title or doc.title
        v = commit_version(session, actor, doc, title=title, markdown=body)
        record_change(
            session,
            actor,
            op="document.save",
            object_type="document",
            object_id=doc.id,
            summary=f"reverted {doc.title!r} to version {old.version_no} (as version {v.version_no})",
            scope=scope_of(doc),
            before={"title": b.get("title")},
            after={"title": title},
            before_version_id=cur_no,
            after_version_id=v.id,
            reverts=c,
        )
    if fields:
        docs.update_document(session, actor, doc.id, fields, reverts=c)
