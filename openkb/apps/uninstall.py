"""Uninstall (docs/apps.md#uninstall): keep (default) or delete what the app contributed.

Both: the installation becomes ``uninstalled``, its credentials are revoked (the next call is
``401``), its grants and ``user-selected`` choices are deleted. A reinstall is a new
installation: it sees retained content again only through new grants (refs differ too).

``delete`` additionally, in one run recorded on the installation (``uninstall_run_id``), with
the *user* as actor so the user can revert it from the change log:

* every page the app created that still exists outside its own collections -> trash;
* every folder collection it created -> trash, with everything in it (also what the user moved
  in later);
* every knowledge base it created -> its top-level documents to the trash, then archived.

``revert_uninstall`` reverts that run (documents come back from the trash, knowledge bases are
un-archived). Trap: what the user may not delete (an editor without ``editor_can_delete`` in a
team knowledge base) is left in place and counted as ``kept``, never forced.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import text
from sqlmodel import Session, col, select

from openkb.apps.oauth import end_installation_grants
from openkb.apps.registry import _revoke_credentials, _user, access_installation, contributions
from openkb.audit import record_audit
from openkb.content import revert as revert_service
from openkb.content.actor import Actor
from openkb.content.documents import trash_document
from openkb.content.knowledge_bases import update_knowledge_base
from openkb.errors import NotFound, PermissionDenied, ValidationError
from openkb.facts.service import expire_for_installation
from openkb.models import AppCollection, AppGrant, AppSelectedCollection, Document, KnowledgeBase
from openkb.models._base import utcnow
from openkb.permissions import Principal


def uninstall(session: Session, principal: Principal, installation_id: uuid.UUID, mode: str = "keep") -> dict[str, Any]:
    if mode not in ("keep", "delete"):
        raise ValidationError("mode is keep or delete", field="mode")
    inst = access_installation(session, principal, installation_id)
    if inst.status != "active":
        raise ValidationError("the app is already uninstalled", field="installation_id")
    before = contributions(session, inst.id)
    _revoke_credentials(session, inst.id)
    end_installation_grants(session, principal, inst.id)  # its OAuth grants too (docs/apps.md#oauth)
    for model in (AppGrant, AppSelectedCollection):
        for row in session.exec(select(model).where(col(model.installation_id) == inst.id)).all():
            session.delete(row)
    inst.status = "uninstalled"
    inst.uninstalled_at = utcnow()
    inst.uninstall_mode = mode
    deleted = {"documents": 0, "collections": 0, "kept": 0}
    if mode == "delete":
        actor = Actor.of(principal)
        inst.uninstall_run_id = actor.run_id
        deleted = _delete_contributions(session, actor, inst.id)
        deleted["facts"] = expire_for_installation(session, actor, inst.id)  # expired, revertible with the run
    session.add(inst)
    session.flush()
    record_audit(
        session, tenant_id=inst.tenant_id, actor=principal, action="app.uninstalled", object_type="app_installation",
        object_id=inst.id, metadata={"mode": mode, "contributions": before, "deleted": deleted},
    )  # fmt: skip
    return {"mode": mode, "run_id": inst.uninstall_run_id, "contributions": before, "deleted": deleted}


def _trash(session: Session, actor: Actor, doc_id: uuid.UUID, counts: dict[str, int], what: str) -> None:
    doc = session.get(Document, doc_id)
    if doc is None or doc.status == "deleted":
        return
    try:
        with session.begin_nested():
            trash_document(session, actor, doc_id)
        counts[what] += 1
    except (PermissionDenied, NotFound):
        counts["kept"] += 1


def _delete_contributions(session: Session, actor: Actor, installation_id: uuid.UUID) -> dict[str, int]:
    counts = {"documents": 0, "collections": 0, "kept": 0}
    created = session.exec(select(AppCollection).where(col(AppCollection.installation_id) == installation_id)).all()
    own_kbs = {c.knowledge_base_id for c in created if c.document_id is None}
    own_folders = [c.document_id for c in created if c.document_id is not None]
    # pages the app wrote outside its own collections (inside them they go with the collection)
    pages = session.execute(
        text(
            "SELECT a.document_id FROM app_documents a JOIN documents d ON d.id = a.document_id "
            "WHERE a.installation_id = :i AND d.type = 'page' AND d.status <> 'deleted' ORDER BY d.created_at"
        ),
        {"i": installation_id},
    ).scalars()
    for doc_id in pages:
        doc = session.get(Document, doc_id)
        if doc is not None and doc.knowledge_base_id not in own_kbs:
            _trash(session, actor, doc_id, counts, "documents")
    for folder_id in own_folders:
        _trash(session, actor, folder_id, counts, "collections")
    for kb_id in own_kbs:
        kb = session.get(KnowledgeBase, kb_id)
        if kb is None or kb.status != "active":
            continue
        for doc_id in session.exec(
            select(Document.id).where(
                col(Document.knowledge_base_id) == kb_id,
                col(Document.parent_id).is_(None),
                col(Document.status) != "deleted",
            )
        ).all():
            _trash(session, actor, doc_id, counts, "documents")
        try:
            with session.begin_nested():
                update_knowledge_base(session, actor, kb_id, {"status": "archived"})
            counts["collections"] += 1
        except (PermissionDenied, NotFound):
            counts["kept"] += 1
    return counts


def revert_uninstall(
    session: Session, principal: Principal, installation_id: uuid.UUID, blobs: Any = None
) -> dict[str, Any]:
    """Undo a delete-uninstall: revert its run (the installation stays uninstalled)."""
    _user(principal)
    inst = access_installation(session, principal, installation_id)
    if inst.uninstall_run_id is None:
        raise ValidationError("nothing was deleted when this app was uninstalled", field="installation_id")
    return revert_service.revert(session, Actor.of(principal), run_id=inst.uninstall_run_id, blobs=blobs)
