"""Keyed upsert for integrations and imports: one document per (knowledge base, key).

``created`` makes the document (version 1); ``updated`` writes only what differs (a new version
when the normalized body or the title changed, field updates otherwise); ``unchanged`` writes
nothing at all — no version, no change row, no ``updated_at``, no index job — so a nightly sync
that re-sends everything costs one read per document.

Decisions:

* Fields left out of the request (``parent_id``, ``status``, ``metadata``, ``tags``) keep their
  current values; they are not reset.
* A keyed document in the trash is not silently revived: ``DOCUMENT_IN_TRASH`` (409). Restore
  or purge it first.
* Concurrent upserts of one key are serialized by a transaction-scoped advisory lock, so the
  second one sees the first one's document instead of failing on the unique key.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlmodel import Session, col, select

from openkb.config import Settings
from openkb.content import limits, tree
from openkb.content.actor import Actor
from openkb.content.changes import record_change
from openkb.content.documents import UPDATE_STATUSES, create_document, doc_state
from openkb.content.versions import (
    commit_version,
    current_version,
    lock_document,
    prepare_markdown,
    scope_of,
)
from openkb.errors import DocumentInTrash, PermissionDenied, ValidationError
from openkb.jobs import enqueue_after_commit
from openkb.models import Document, DocumentVersion
from openkb.models._base import utcnow
from openkb.permissions import Action, access_document, access_knowledge_base, can_move_document

UNSET: Any = object()


@dataclass(frozen=True)
class UpsertResult:
    status: str  # created | updated | unchanged
    document: Document
    version: DocumentVersion | None
    warnings: tuple[str, ...] = ()  # repairs made with on_unsupported="convert"

    def out(self) -> dict[str, Any]:
        out = {
            "status": self.status,
            "document_id": self.document.id,
            "version_id": self.version.id if self.version else None,
            "version_no": self.version.version_no if self.version else None,
            "index_status": self.document.index_status,
        }
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


def upsert_by_key(
    session: Session,
    actor: Actor,
    knowledge_base_id: uuid.UUID,
    key: str,
    *,
    title: str,
    markdown: str | None = None,
    markdown_hash: str | None = None,
    type: str = "page",
    parent_id: uuid.UUID | None | Any = UNSET,
    status: str | None = None,
    metadata: dict[str, Any] | None = None,
    tags: list[str] | None = None,
    settings: Settings | None = None,
    document_id: uuid.UUID | None = None,
    on_unsupported: str = "reject",
) -> UpsertResult:
    """``document_id``: the id a *new* document gets (ignored when the key exists).
    ``on_unsupported="convert"``: repair what the editor cannot keep, answer the warnings."""
    p = actor.principal
    warnings: tuple[str, ...] = ()
    if on_unsupported == "convert" and markdown and type == "page":
        from openkb.importing.repair import repair_for_write

        limits.check_markdown(markdown, settings=settings)
        rep = repair_for_write(markdown, markdown_hash)
        markdown, markdown_hash, warnings = rep.markdown, None, tuple(rep.warnings)
        metadata = metadata if metadata is not None else (rep.metadata or None)
        tags = tags if tags is not None else rep.tags
    key = limits.check_name(key, "key", settings)
    title = limits.check_title(title, settings=settings)
    if metadata is not None:
        metadata = limits.check_metadata(metadata, settings=settings)
    if tags is not None:
        tags = limits.check_tags(tags, settings)
    if status is not None and status not in UPDATE_STATUSES:
        raise ValidationError(f"status must be one of {', '.join(UPDATE_STATUSES)}", field="status")
    kb = access_knowledge_base(session, p, knowledge_base_id).knowledge_base
    session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 11))"), {"k": f"key:{kb.id}:{key}"})
    existing = session.exec(
        select(Document).where(col(Document.knowledge_base_id) == kb.id, col(Document.external_key) == key)
    ).first()
    if existing is None:
        doc, version = create_document(
            session,
            actor,
            knowledge_base_id=kb.id,
            title=title,
            type=type,
            parent_id=None if parent_id is UNSET else parent_id,
            markdown=markdown,
            markdown_hash=markdown_hash,
            status=status if status in ("draft", "published") else None,
            metadata=metadata,
            tags=tags,
            external_key=key,
            source=actor.source or "api",
            settings=settings,
            document_id=document_id,
        )
        if status == "archived":
            doc.status = "archived"
            session.add(doc)
            session.flush()
        return UpsertResult("created", doc, version, warnings)

    # the row is in the session already, so the access's fetch costs no query
    acc = access_document(session, p, existing.id, None)
    doc = acc.document
    if doc.status == "deleted":
        raise DocumentInTrash(
            "the document with this key is in the trash; restore or purge it first", document_id=str(doc.id)
        )
    acc.require(Action.EDIT)
    body: str | None = None
    if doc.type == "page":
        body = prepare_markdown(markdown or "", markdown_hash, settings)
    elif markdown:
        raise ValidationError("folders have no body", field="markdown")
    cur = current_version(session, doc)
    fields: dict[str, Any] = {}
    if parent_id is not UNSET and parent_id != doc.parent_id:
        fields["parent_id"] = parent_id
    if status is not None and status != doc.status:
        fields["status"] = status
    if metadata is not None and metadata != doc.meta:
        fields["metadata"] = metadata
    if tags is not None and list(tags) != list(doc.tags or []):
        fields["tags"] = tags
    body_changed = body is not None and (cur is None or cur.markdown != body)
    title_changed = title != doc.title
    if not fields and not body_changed and not title_changed:
        return UpsertResult("unchanged", doc, cur, warnings)

    if "parent_id" in fields:
        tree.target_parent(session, p, doc.knowledge_base_id, fields["parent_id"])
        tree.check_move(session, doc.id, doc.knowledge_base_id, fields["parent_id"], settings)
        if not can_move_document(
            session, p, doc.id, new_parent_id=fields["parent_id"], knowledge_base_id=doc.knowledge_base_id
        ):
            raise PermissionDenied("not allowed to move the document there")
    doc = lock_document(session, doc.id)
    before = {**doc_state(doc, [*fields, "title"]), "version_no": cur.version_no if cur else None}
    if "parent_id" in fields:
        tree.lock_tree(session, doc.knowledge_base_id)
        doc.parent_id = fields["parent_id"]
        session.add(doc)
        session.flush()
        doc.sort_order = tree.place_at(session, doc.knowledge_base_id, doc.parent_id, doc.id, None)
    if "status" in fields:
        doc.status = fields["status"]
    if "metadata" in fields:
        doc.meta = fields["metadata"]
    if "tags" in fields:
        doc.tags = fields["tags"]
    version = cur
    if body is not None and (body_changed or title_changed):
        version = commit_version(session, actor, doc, title=title, markdown=body, source=actor.source or "api")
    else:
        doc.title = title
    doc.updated_by = actor.user_id
    doc.updated_at = utcnow()
    session.add(doc)
    session.flush()
    after = {**doc_state(doc, [*fields, "title"]), "version_no": version.version_no if version else None}
    what = sorted([*fields, *(["body"] if body_changed else []), *(["title"] if title_changed else [])])
    record_change(
        session,
        actor,
        op="document.upsert",
        object_type="document",
        object_id=doc.id,
        summary=f"upserted {key!r}: {', '.join(what)}",
        scope=scope_of(doc),
        before=before,
        after=after,
        before_version_id=cur.id if cur and version is not cur else None,
        after_version_id=version.id if version is not None and version is not cur else None,
    )
    if fields.keys() & {"parent_id", "status"} or (title_changed and doc.type == "folder"):
        enqueue_after_commit(session, "reindex_subtree", document_id=str(doc.id))
    elif fields.keys() & {"metadata", "tags"} and doc.type == "page":
        enqueue_after_commit(session, "index_document", document_id=str(doc.id))
    return UpsertResult("updated", doc, version, warnings)
