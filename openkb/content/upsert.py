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
from openkb.content.documents import UPDATE_STATUSES, create_document, doc_state, new_slug
from openkb.content.versions import (
    commit_version,
    current_version,
    lock_document,
    prepare_markdown,
    scope_of,
    sha256_hex,
)
from openkb.errors import DocumentInTrash, NotFound, PermissionDenied, ValidationError
from openkb.exporting.forms import store_forms
from openkb.jobs import enqueue_after_commit
from openkb.models import Document, DocumentVersion
from openkb.models._base import utcnow
from openkb.models.enums import DOC_TYPES
from openkb.permissions import (
    Action,
    DocumentAccess,
    KbAction,
    TreeAccess,
    access_document,
    access_knowledge_base,
    access_tree,
    can_move_document,
)
from openkb.permissions.access import DOC_NOT_FOUND

UNSET: Any = object()
# the advisory lock of one key: ``pg_advisory_xact_lock(hashtextextended('key:<kb id>:<key>', 11))``
# (the apps API takes the same lock in its caller's statement and passes ``key_locked=True``)
KEY_LOCK_CLASS = 11
_KEY_LOCK = text(f"SELECT pg_advisory_xact_lock(hashtextextended(:k, {KEY_LOCK_CLASS}))")


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
    key_locked: bool = False,
) -> UpsertResult:
    """``document_id``: the id a *new* document gets (ignored when the key exists).
    ``on_unsupported="convert"``: repair what the editor cannot keep, answer the warnings.
    ``key_locked``: this transaction already holds the key's advisory lock (``KEY_LOCK_CLASS``),
    taken in an earlier statement, so no statement is spent on it here."""
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
    if not key_locked:
        session.execute(_KEY_LOCK, {"k": f"key:{kb.id}:{key}"})
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


@dataclass
class KeyedItem:
    """One document of a :class:`KeyedBatch` (the fields of :func:`upsert_by_key`).

    ``normalized=True``: ``markdown`` is already what ``validate_and_normalize`` returns (the
    importer normalized it while converting, then only swapped link targets): the batch checks
    its size and trusts it instead of parsing it a second time. Trap: pass it only for bodies
    that came out of the dialect's normalizer; anything else must go through the parse.
    """

    key: str
    title: str
    markdown: str | None = None
    type: str = "page"
    parent_id: uuid.UUID | None | Any = UNSET
    metadata: dict[str, Any] | None = None
    tags: list[str] | None = None
    document_id: uuid.UUID | None = None
    normalized: bool = False


@dataclass
class _Parent:
    access: DocumentAccess | None
    depth: int
    next_order: int


class KeyedBatch:
    """Keyed upserts of many documents of one knowledge base in the caller's one transaction.

    What :func:`upsert_by_key` does per document, with the per-document statements made per
    batch (docs/importing.md#speed): the knowledge base is authorized once, every key is locked
    and looked up by one statement each, the current versions' hashes come in one query, an
    unchanged document costs no statement, the visibility of existing documents is decided by
    one ``access_tree``, a target folder is authorized (``CREATE_CHILD``) and measured once,
    and new documents, their first versions and their change rows are inserted together by
    :meth:`flush`. A document that exists and changed goes through :func:`upsert_by_key` itself
    (rare in a re-import; that path owns moves, versions and their change rows).

    Statuses and errors are those of :func:`upsert_by_key`. Nothing is written before
    :meth:`flush` (or the caller's flush/commit); :meth:`upsert` raises before it adds anything,
    so a refused item leaves nothing behind. Trap: a failure *inside* the flush (a constraint)
    fails the whole batch: the caller rolls back and retries the items one by one.
    """

    def __init__(
        self,
        session: Session,
        actor: Actor,
        knowledge_base_id: uuid.UUID,
        keys: list[str],
        *,
        settings: Settings | None = None,
    ) -> None:
        self.session, self.actor, self.settings = session, actor, settings
        p = actor.principal
        self.kb_access = access_knowledge_base(session, p, knowledge_base_id)
        self.kb = self.kb_access.knowledge_base
        checked = sorted({limits.check_name(k, "key", settings) for k in keys})
        # the same lock key as upsert_by_key, taken in one statement, in key order (two batches
        # never wait on each other in a cycle)
        session.execute(
            text(
                "SELECT count(pg_advisory_xact_lock(hashtextextended(k, 11))) "
                "FROM (SELECT k FROM unnest(CAST(:keys AS text[])) AS k ORDER BY k) AS sorted"
            ),
            {"keys": [f"key:{self.kb.id}:{k}" for k in checked]},
        )
        rows = (
            session.exec(
                select(Document).where(
                    col(Document.knowledge_base_id) == self.kb.id, col(Document.external_key).in_(checked)
                )
            ).all()
            if checked
            else []
        )
        self.existing: dict[str, Document] = {d.external_key: d for d in rows if d.external_key}
        self._ids: set[uuid.UUID] = {d.id for d in rows}  # of existing and created documents
        heads = [d.current_version_id for d in rows if d.current_version_id is not None]
        self._hashes: dict[uuid.UUID, tuple[str, DocumentVersion | None]] = {}
        if heads:
            for v in session.exec(select(DocumentVersion).where(col(DocumentVersion.id).in_(heads))).all():
                self._hashes[v.id] = (v.markdown_hash, v)
        self._tree: TreeAccess | None = None
        self._parents: dict[uuid.UUID | None, _Parent] = {}
        self._tree_locked = False
        self._pending: list[tuple[Document, DocumentVersion | None]] = []
        self._pending_ids: set[uuid.UUID] = set()

    # -- one item -------------------------------------------------------------------------------
    def upsert(self, item: KeyedItem) -> UpsertResult:
        s = self.settings
        key = limits.check_name(item.key, "key", s)
        title = limits.check_title(item.title, settings=s)
        metadata = limits.check_metadata(item.metadata, settings=s) if item.metadata is not None else None
        tags = limits.check_tags(item.tags, s) if item.tags is not None else None
        if item.type not in DOC_TYPES:
            raise ValidationError("type must be page or folder", field="type")
        body: str | None = None
        if item.type == "folder":
            if item.markdown:
                raise ValidationError("folders have no body; create a page for content", field="markdown")
        elif item.normalized:
            body = item.markdown or ""
            limits.check_markdown(body, settings=s)
        else:
            body = prepare_markdown(item.markdown or "", None, s)
        doc = self.existing.get(key)
        if doc is None:
            return self._create(item, key, title, body, metadata, tags)
        if doc.id in self._pending_ids:  # the same key twice in one batch: the single path decides
            return self._single(item, key, title, body, metadata, tags)
        if doc.status == "deleted" or doc.type != item.type:
            return self._single(item, key, title, body, metadata, tags)  # its own error / answer
        if not self._tree_access().allows(doc.id, Action.READ):
            raise NotFound(DOC_NOT_FOUND)
        digest, cur = self._hashes.get(doc.current_version_id, (None, None)) if doc.current_version_id else (None, None)
        same = (
            title == doc.title
            and (item.parent_id is UNSET or item.parent_id == doc.parent_id)
            and (metadata is None or metadata == doc.meta)
            and (tags is None or list(tags) == list(doc.tags or []))
            and (body is None or digest == sha256_hex(body))
        )
        if same:
            return UpsertResult("unchanged", doc, cur)
        return self._single(item, key, title, body, metadata, tags)

    def refuse_early(self, key: str) -> None:
        """Raise now what :meth:`upsert` would raise for a key whose document is in the trash
        (``DOCUMENT_IN_TRASH`` for who may restore it, NotFound for who cannot see it), so a
        caller fails that item before it uploads anything for it and the batch goes on."""
        doc = self.existing.get(key)
        if doc is not None and doc.status == "deleted":
            access_document(self.session, self.actor.principal, doc.id, None)
            raise DocumentInTrash(
                "the document with this key is in the trash; restore or purge it first", document_id=str(doc.id)
            )

    def _single(
        self,
        item: KeyedItem,
        key: str,
        title: str,
        body: str | None,
        metadata: dict[str, Any] | None,
        tags: list[str] | None,
    ) -> UpsertResult:
        self.flush()  # upsert_by_key reads the tree: the batch's new rows must be there
        return upsert_by_key(
            self.session,
            self.actor,
            self.kb.id,
            key,
            title=title,
            markdown=body,
            type=item.type,
            parent_id=item.parent_id,
            metadata=metadata,
            tags=tags,
            settings=self.settings,
            document_id=item.document_id,
        )

    def _tree_access(self) -> TreeAccess:
        if self._tree is None:
            self._tree = access_tree(self.session, self.actor.principal, self.kb.id, (Action.READ,))
        return self._tree

    def _parent(self, parent_id: uuid.UUID | None) -> _Parent:
        """Authorized, depth-checked and with its next sort order: once per target folder."""
        got = self._parents.get(parent_id)
        if got is not None:
            return got
        if parent_id in self._pending_ids:
            self.flush()  # a folder created earlier in this batch: visible to the checks below
        session, p = self.session, self.actor.principal
        acc = tree.target_parent(session, p, self.kb.id, parent_id)
        denied = "not allowed to create documents here"
        if acc is None:
            self.kb_access.require(KbAction.CREATE, message=denied)
        else:
            acc.require(Action.CREATE_CHILD, message=denied)
        if not self._tree_locked:
            tree.lock_tree(session, self.kb.id)  # held to the commit: the sort orders below stay ours
            self._tree_locked = True
        depth = tree.depth_of(session, parent_id) + 1
        limits.check_depth(depth, self.settings)
        got = _Parent(acc, depth, tree.next_sort_order(session, self.kb.id, parent_id))
        self._parents[parent_id] = got
        return got

    def _create(
        self,
        item: KeyedItem,
        key: str,
        title: str,
        body: str | None,
        metadata: dict[str, Any] | None,
        tags: list[str] | None,
    ) -> UpsertResult:
        parent_id = None if item.parent_id is UNSET else item.parent_id
        parent = self._parent(parent_id)
        meta = limits.check_metadata(metadata, settings=self.settings)
        tag_list = limits.check_tags(tags, settings=self.settings)
        actor, kb, uid = self.actor, self.kb, self.actor.user_id
        doc = Document(
            tenant_id=kb.tenant_id,
            workspace_id=kb.workspace_id,
            knowledge_base_id=kb.id,
            parent_id=parent_id,
            type=item.type,
            title=title,
            slug=new_slug(),
            status="published",
            sort_order=parent.next_order,
            external_key=key,
            meta=meta,
            tags=tag_list,
            index_status="pending" if item.type == "page" else "indexed",
            created_by=uid,
            updated_by=uid,
            **({"id": item.document_id} if item.document_id is not None else {}),
        )
        if doc.id in self._ids:  # a set: a scan of the batch per document was quadratic
            raise ValidationError("document_id is taken", field="document_id")
        parent.next_order += 1
        version = None
        if body is not None:
            version = DocumentVersion(
                tenant_id=doc.tenant_id,
                document_id=doc.id,
                version_no=1,
                title=title,
                markdown=body,
                markdown_hash=sha256_hex(body),
                source_type=actor.source or "api",
                created_by=uid,
            )
        self._pending.append((doc, version))
        self._pending_ids.add(doc.id)
        self._ids.add(doc.id)
        self.existing[key] = doc
        return UpsertResult("created", doc, version)

    # -- the writes -----------------------------------------------------------------------------
    def flush(self) -> None:
        """Insert the new documents, then their versions, then point each at its version and
        record its ``document.create`` change (three flushes, each one statement per table);
        index jobs are sent after the commit, like any create's."""
        if not self._pending:
            return
        session, actor = self.session, self.actor
        pending, self._pending = self._pending, []
        self._pending_ids.clear()
        session.add_all([d for d, _v in pending])
        session.flush()  # documents first: versions (and assets) refer to them
        versions = [v for _d, v in pending if v is not None]
        if versions:
            session.add_all(versions)
            session.flush()
            store_forms(session, [(v.id, v.markdown) for v in versions])  # docs/export.md#speed
        for doc, version in pending:
            if version is not None:
                doc.current_version_id = version.id
                session.add(doc)
                enqueue_after_commit(session, "index_document", document_id=str(doc.id))
            record_change(
                session,
                actor,
                op="document.create",
                object_type="document",
                object_id=doc.id,
                summary=f"created {doc.type} {doc.title!r}",
                scope=scope_of(doc),
                before={},
                after={**doc_state(doc), "type": doc.type, "external_key": doc.external_key},
                after_version_id=version.id if version else None,
                flush=False,
            )
        session.flush()
