"""Page bodies: versions, the optimistic-lock save (docs/api.md#saving-documents) and restore.

A save is: limits -> hash of what the client sent -> Milkdown-dialect validation -> normalize ->
lock the document row -> compare with the base and the current body -> new version, pointer
move, ``index_status = pending`` -> ``index_document`` enqueued after commit.

Decisions:

* Identical content (normalized body and title equal to the current version) writes nothing,
  records no change and enqueues nothing; the answer is ``unchanged`` with the current version.
  This also holds for a *stale* base: a client retrying a save whose response it lost gets
  ``unchanged`` instead of a false 409.
* The stored ``markdown_hash`` is of the stored (normalized) body; the client's hash is checked
  against the markdown it sent.
* Folders have no body (docs/data-model.md#workspaces-and-content): saving one is ``NOT_A_PAGE``.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, func, text
from sqlalchemy.dialects.postgresql import UUID as PGUUID
from sqlmodel import Session, col, select

from openkb.config import Settings
from openkb.content import limits
from openkb.content.actor import Actor
from openkb.content.changes import record_change
from openkb.errors import HashMismatch, NotAPage, NotFound, ValidationError, VersionConflict
from openkb.exporting.forms import export_form_row
from openkb.jobs import enqueue_after_commit
from openkb.models import Document, DocumentVersion, User
from openkb.models._base import utcnow
from openkb.permissions import Action, Principal, access_document


def sha256_hex(markdown: str) -> str:
    return hashlib.sha256(markdown.encode("utf-8")).hexdigest()


def prepare_markdown(markdown: str, markdown_hash: str | None = None, settings: Settings | None = None) -> str:
    """Check limits and the client's hash, validate against the dialect, return the normalized body."""
    from openkb.markdown import validate_and_normalize

    limits.check_markdown(markdown, settings=settings)
    if markdown_hash is not None:
        sent = markdown_hash.strip().lower()
        actual = sha256_hex(markdown)
        if sent != actual:
            raise HashMismatch(
                "markdown_hash is not the SHA-256 of the markdown sent (lowercase hex of its UTF-8)",
                field="markdown_hash",
                expected=actual,
            )
    normalized = validate_and_normalize(markdown)  # one parse for both
    limits.check_markdown(normalized, settings=settings)
    return normalized


def lock_document(session: Session, doc_id: uuid.UUID) -> Document:
    """Re-read the document row ``FOR NO KEY UPDATE``: serializes concurrent writers of one
    document (saves, edits, upserts) without waiting for an index job of it, whose chunk inserts
    hold ``FOR KEY SHARE`` on the row until it commits (``FOR UPDATE`` waited for them: a save of
    a 320,000-character page waited 12 s for the previous save's indexing)."""
    doc = session.exec(
        select(Document)
        .where(col(Document.id) == doc_id)
        .with_for_update(key_share=True)
        .execution_options(populate_existing=True)
    ).first()
    if doc is None:
        raise NotFound("document not found")
    return doc


def current_version(session: Session, doc: Document) -> DocumentVersion | None:
    if doc.current_version_id is None:
        return None
    return session.get(DocumentVersion, doc.current_version_id)


@dataclass(frozen=True)
class Head:
    """The current version without its body (a save compares hashes, not megabytes)."""

    id: uuid.UUID
    version_no: int
    markdown_hash: str
    next_no: int


_HEAD = text(
    "SELECT v.id, v.version_no, v.markdown_hash, "
    "(SELECT max(version_no) FROM document_versions m WHERE m.document_id = v.document_id) + 1 AS next_no "
    "FROM document_versions v WHERE v.id = :id"
).bindparams(bindparam("id", type_=PGUUID(as_uuid=True)))


# The export form of the version a save supersedes: an export reads current versions only and
# computes a missing form when it needs one (docs/export.md#speed), so nothing would ever read it
# again. Kept, it made every save add a row that outlives its use (bench/soak.py measured 0.37 KB
# per save, a fifth of what a save adds to the database); deleted, the table holds one form per page.
_DROP_SUPERSEDED_FORM = text("DELETE FROM document_export_forms WHERE version_id = :id").bindparams(
    bindparam("id", type_=PGUUID(as_uuid=True))
)


def head(session: Session, doc: Document) -> Head | None:
    if doc.current_version_id is None:
        return None
    row = session.execute(_HEAD, {"id": doc.current_version_id}).first()
    return Head(*row) if row else None


def commit_version(
    session: Session,
    actor: Actor,
    doc: Document,
    *,
    title: str,
    markdown: str,
    source: str | None = None,
    version_no: int | None = None,
    markdown_hash: str | None = None,
) -> DocumentVersion:
    """Insert the next version of a locked page and make it current; index job after commit.

    ``markdown`` must already be prepared (validated + normalized). Records no change row: the
    calling operation does, with its own op name.
    """
    if doc.type != "page":
        raise NotAPage("folders have no body; only pages have versions")
    if version_no is None:
        last = session.exec(
            select(func.max(DocumentVersion.version_no)).where(col(DocumentVersion.document_id) == doc.id)
        ).one()
        version_no = int(last or 0) + 1
    v = DocumentVersion(
        tenant_id=doc.tenant_id,
        document_id=doc.id,
        version_no=version_no,
        title=title,
        markdown=markdown,
        markdown_hash=markdown_hash or sha256_hex(markdown),
        source_type=source or actor.version_source,
        created_by=actor.user_id,
    )
    session.add(v)
    session.flush()
    session.add(export_form_row(v.id, markdown))  # what an export needs, once (docs/export.md#speed)
    if doc.current_version_id is not None:
        session.execute(_DROP_SUPERSEDED_FORM, {"id": doc.current_version_id})
    doc.current_version_id = v.id
    doc.title = title
    doc.index_status = "pending"
    doc.index_error = None
    doc.updated_by = actor.user_id
    doc.updated_at = utcnow()
    session.add(doc)  # flushed with the change row the caller records next
    enqueue_after_commit(session, "index_document", document_id=str(doc.id))
    return v


def scope_of(doc: Document) -> dict[str, Any]:
    return {"knowledge_base_id": doc.knowledge_base_id, "workspace_id": doc.workspace_id}


@dataclass(frozen=True)
class SaveResult:
    status: str  # "created" | "unchanged"
    document: Document
    version: DocumentVersion
    normalized: bool = False  # the stored body differs from what was sent (normalization)

    def out(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "document_id": self.document.id,
            "version_id": self.version.id,
            "version_no": self.version.version_no,
            "markdown_hash": self.version.markdown_hash,
            "normalized": self.normalized,
            "index_status": self.document.index_status,
        }


# The metadata key OpenKB sets on an app's index-only document (its ``text`` + ``sourceUri``,
# docs/apps.md#api): plain text indexed from elsewhere, never edited as Markdown here.
INDEX_ONLY = "indexOnly"


def is_index_only(meta: dict[str, Any] | None) -> bool:
    return bool(meta) and meta.get(INDEX_ONLY) is True and isinstance(meta.get("sourceUri"), str)  # type: ignore[union-attr]


def save_version(
    session: Session,
    actor: Actor,
    doc_id: uuid.UUID,
    *,
    markdown: str,
    markdown_hash: str,
    base_version_id: uuid.UUID | None = None,
    base_version_no: int | None = None,
    title: str | None = None,
    settings: Settings | None = None,
    index_only_writer: bool = False,
) -> SaveResult:
    """A new version of a page's body (and title) from an editor, with optimistic locking.

    An index-only document's body is refused (422, ``field: markdown``) unless the caller is the
    apps API writing it as text (``index_only_writer``): the web app opens such a page read-only
    (docs/web.md), and a body saved here would be Markdown under a mark that says it is text
    indexed from its ``sourceUri``, overwritten by the app's next write of that text. Its title
    may change; a user who wants to edit it as a page drops ``indexOnly`` from its metadata first.
    """
    # the access fetches the row FOR NO KEY UPDATE: concurrent saves of one document queue here, and
    # the row is read once (trap: the lock is then held while the body is validated below)
    doc = access_document(session, actor.principal, doc_id, Action.EDIT, for_update="no key").document
    if base_version_id is None and base_version_no is None:
        raise ValidationError("base_version_id (or base_version_no) is required", field="base_version_id")
    new_title = limits.check_title(title, settings=settings) if title is not None else None
    if markdown_hash is None:
        raise ValidationError("markdown_hash is required", field="markdown_hash")
    normalized = prepare_markdown(markdown, markdown_hash, settings)
    digest = sha256_hex(normalized)
    if doc.type != "page":
        raise NotAPage("folders have no body; only pages have versions")
    cur = head(session, doc)
    if cur is None:
        raise NotFound("document has no current version")
    title_final = new_title if new_title is not None else doc.title
    if cur.markdown_hash == digest and title_final == doc.title:
        current = session.get(DocumentVersion, cur.id)
        assert current is not None
        return SaveResult("unchanged", doc, current, normalized != markdown)
    if cur.markdown_hash != digest and not index_only_writer and is_index_only(doc.meta):
        raise ValidationError(
            f"this page is index-only: its text is indexed from {doc.meta['sourceUri']} by the app that "
            "wrote it; remove indexOnly from its metadata to edit it as a page",
            field="markdown",
        )
    stale = (base_version_id is not None and base_version_id != cur.id) or (
        base_version_id is None and base_version_no != cur.version_no
    )
    if stale:
        raise VersionConflict(
            "the document changed since your base version; reload and merge",
            current_version_id=str(cur.id),
            current_version_no=cur.version_no,
        )
    before_title = doc.title
    v = commit_version(
        session, actor, doc, title=title_final, markdown=normalized, version_no=cur.next_no, markdown_hash=digest
    )
    record_change(
        session,
        actor,
        op="document.save",
        object_type="document",
        object_id=doc.id,
        summary=f"saved version {v.version_no} of {title_final!r}",
        scope=scope_of(doc),
        before={"title": before_title, "version_no": cur.version_no},
        after={"title": title_final, "version_no": v.version_no},
        before_version_id=cur.id,
        after_version_id=v.id,
    )
    return SaveResult("created", doc, v, normalized != markdown)


def restore_version(
    session: Session,
    actor: Actor,
    doc_id: uuid.UUID,
    version_id: uuid.UUID,
    *,
    base_version_id: uuid.UUID | None = None,
    settings: Settings | None = None,
) -> SaveResult:
    """Make an old version's body and title current again, as a new version."""
    doc = access_document(session, actor.principal, doc_id, Action.EDIT, for_update="no key").document
    old = session.get(DocumentVersion, version_id)
    if old is None or old.document_id != doc_id:
        raise NotFound("version not found")
    normalized = prepare_markdown(old.markdown, None, settings)
    if doc.type != "page":
        raise NotAPage("folders have no body; only pages have versions")
    cur = current_version(session, doc)
    if cur is None:
        raise NotFound("document has no current version")
    title = old.title or doc.title
    if cur.markdown == normalized and doc.title == title:
        return SaveResult("unchanged", doc, cur)
    if base_version_id is not None and base_version_id != cur.id:
        raise VersionConflict(
            "the document changed since your base version; reload first",
            current_version_id=str(cur.id),
            current_version_no=cur.version_no,
        )
    before_title = doc.title
    v = commit_version(session, actor, doc, title=title, markdown=normalized)
    record_change(
        session,
        actor,
        op="document.restore_version",
        object_type="document",
        object_id=doc.id,
        summary=f"restored version {old.version_no} of {title!r} as version {v.version_no}",
        scope=scope_of(doc),
        before={"title": before_title, "version_no": cur.version_no},
        after={"title": title, "version_no": v.version_no, "restored_version_id": old.id},
        before_version_id=cur.id,
        after_version_id=v.id,
    )
    return SaveResult("created", doc, v)


def version_out(v: DocumentVersion, *, with_markdown: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": v.id,
        "document_id": v.document_id,
        "version_no": v.version_no,
        "title": v.title,
        "markdown_hash": v.markdown_hash,
        "source_type": v.source_type,
        "created_by": v.created_by,
        "created_at": v.created_at,
        "chars": len(v.markdown),
    }
    if with_markdown:
        out["markdown"] = v.markdown
    return out


def list_versions(
    session: Session, principal: Principal, doc_id: uuid.UUID, *, limit: int = 50, before_no: int | None = None
) -> list[dict[str, Any]]:
    """Newest first, with each version's author by display name: a history says who changed a
    page (a reader of the page sees the names of those who wrote it, never their addresses).
    A deleted author keeps the name deletion gives it (docs/accounts.md#deleting-a-user)."""
    access_document(session, principal, doc_id, Action.READ)
    limit = max(1, min(int(limit), 500))
    q = (
        select(
            DocumentVersion.id,
            DocumentVersion.document_id,
            DocumentVersion.version_no,  # type: ignore[call-overload]
            DocumentVersion.title,
            DocumentVersion.markdown_hash,
            DocumentVersion.source_type,
            DocumentVersion.created_by,
            User.display_name.label("created_by_name"),  # type: ignore[attr-defined]
            DocumentVersion.created_at,
            func.char_length(DocumentVersion.markdown).label("chars"),
        )
        .outerjoin(User, col(User.id) == col(DocumentVersion.created_by))
        .where(col(DocumentVersion.document_id) == doc_id)
    )
    if before_no is not None:
        q = q.where(col(DocumentVersion.version_no) < before_no)
    rows = session.exec(q.order_by(col(DocumentVersion.version_no).desc()).limit(limit)).all()
    return [dict(r._mapping) for r in rows]


def get_version(session: Session, principal: Principal, doc_id: uuid.UUID, version_id: uuid.UUID) -> dict[str, Any]:
    access_document(session, principal, doc_id, Action.READ)
    v = session.get(DocumentVersion, version_id)
    if v is None or v.document_id != doc_id:
        raise NotFound("version not found")
    return version_out(v, with_markdown=True)
