"""Documents (folders and pages): create, read, update (rename/move/status/permissions/metadata),
trash, restore from trash and purge.

Every decision goes through the permission service; the order of checks is what keeps existence
private: first "may the caller see it" (404 otherwise), then the structural checks, then "may it
do this" (403 — it can see the object).

Decisions:

* Trash marks only the deleted document (``status = 'deleted'``, ``deleted_at``); its subtree
  is hidden because the effective status of a path is its most hidden one. Restoring puts the
  status back (taken from the trash change) and, when an ancestor is itself in the trash, moves
  the document to the knowledge-base root, for those who may create there (a move needs the
  create right at its target); others restore the ancestor first (``DOCUMENT_IN_TRASH``).
* Purge is only for documents in the trash. It removes the subtree for good (versions cascade)
  but records one ``document.purge`` change per removed document with a full snapshot (fields +
  current body + asset ids), so a revert re-creates them (history beyond the body is gone). Their
  assets are detached, not deleted: a revert within ``ASSET_RETENTION_DAYS`` gets them back, after
  that ``openkb.assets.prune_detached`` deletes them (docs/data-model.md#assets).
* Documents move only within their knowledge base.
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import UUID as PGUUID
from sqlmodel import Session, col, select

from openkb.audit import record_audit
from openkb.config import Settings, get_settings
from openkb.content import limits, tree
from openkb.content.actor import Actor
from openkb.content.changes import jsonable, record_change
from openkb.content.versions import (
    commit_version,
    current_version,
    lock_document,
    prepare_markdown,
    scope_of,
)
from openkb.errors import (
    DocumentInTrash,
    DuplicateTooLarge,
    NotFound,
    NotInTrash,
    PermissionDenied,
    ValidationError,
)
from openkb.exporting.links import rewrite_links
from openkb.jobs import enqueue_after_commit
from openkb.models import Change, Collaborator, Document, DocumentAsset, DocumentVersion
from openkb.models._base import utcnow
from openkb.models.enums import DOC_TYPES, PERMISSION_MODES, VISIBILITIES
from openkb.permissions import (
    Action,
    KbAction,
    Principal,
    access_document,
    access_knowledge_base,
    can_create_document,
    can_move_document,
    filter_documents,
    filter_readable_documents,
)
from openkb.permissions import settings as access_settings
from openkb.permissions.access import DOC_NOT_FOUND

CREATE_STATUSES = ("draft", "published")
UPDATE_STATUSES = ("draft", "published", "archived")
STATE_FIELDS = (
    "parent_id",
    "title",
    "status",
    "sort_order",
    "permission_mode",
    "visibility",
    "metadata",
    "tags",
    "deleted_at",
)


def new_slug() -> str:
    return secrets.token_hex(6)


def doc_state(doc: Document, fields: tuple[str, ...] | list[str] = STATE_FIELDS) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        v = doc.meta if f == "metadata" else getattr(doc, f)
        out[f] = jsonable(v if not isinstance(v, (dict, list)) else (dict(v) if isinstance(v, dict) else list(v)))
    return out


def snapshot(session: Session, doc: Document) -> dict[str, Any]:
    """Everything needed to re-create a removed document (one level; children are separate)."""
    cur = current_version(session, doc)
    assets = session.exec(select(DocumentAsset.id).where(col(DocumentAsset.document_id) == doc.id)).all()
    return {
        "id": str(doc.id),
        "type": doc.type,
        "slug": doc.slug,
        "external_key": doc.external_key,
        "created_by": str(doc.created_by),
        "created_at": doc.created_at.isoformat(),
        **doc_state(doc),
        "markdown": cur.markdown if cur else None,
        "version_title": cur.title if cur else None,
        "asset_ids": [str(a) for a in assets],
    }


def _check_status(status: str | None, allowed: tuple[str, ...]) -> None:
    if status is not None and status not in allowed:
        raise ValidationError(f"status must be one of {', '.join(allowed)}", field="status")


def create_document(
    session: Session,
    actor: Actor,
    *,
    knowledge_base_id: uuid.UUID,
    title: str,
    type: str = "page",
    parent_id: uuid.UUID | None = None,
    markdown: str | None = None,
    markdown_hash: str | None = None,
    status: str | None = None,
    metadata: dict[str, Any] | None = None,
    tags: list[str] | None = None,
    sort_order: int | None = None,
    external_key: str | None = None,
    source: str | None = None,
    settings: Settings | None = None,
    record: bool = True,
    document_id: uuid.UUID | None = None,
    on_unsupported: str = "reject",
    warnings: list[str] | None = None,
    permission_mode: str = "inherit",
    visibility: str | None = None,
    stored_body: bool = False,
) -> tuple[Document, DocumentVersion | None]:
    """``document_id``: an id chosen beforehand (an import links pages to each other before they exist).
    ``stored_body``: ``markdown`` is a stored version's body (``duplicate_document``: checked and
    normalized when it was saved, ids of links swapped since), kept byte for byte: only its size
    is checked, not parsed again (a third of a copy's time), and a page saved before a stricter
    dialect rule still copies.
    ``permission_mode``/``visibility``: for a duplicate of a custom page (``duplicate_document``,
    whose caller authorized them), never from a request.
    ``on_unsupported="convert"``: Markdown the editor cannot keep is repaired as an import would
    (docs/importing.md#api-writers) instead of refused; the repairs are appended to ``warnings``."""
    p = actor.principal
    if on_unsupported == "convert" and markdown and type == "page":
        from openkb.importing.repair import repair_for_write

        limits.check_markdown(markdown, settings=settings)
        rep = repair_for_write(markdown, markdown_hash)
        markdown, markdown_hash = rep.markdown, None
        metadata = metadata if metadata is not None else (rep.metadata or None)
        tags = tags if tags is not None else rep.tags
        if warnings is not None:
            warnings.extend(rep.warnings)
    if type not in DOC_TYPES:
        raise ValidationError("type must be page or folder", field="type")
    _check_status(status, CREATE_STATUSES)
    title = limits.check_title(title, settings=settings)
    meta = limits.check_metadata(metadata, settings=settings)
    tag_list = limits.check_tags(tags, settings=settings)
    kb_access = access_knowledge_base(session, p, knowledge_base_id)
    kb = kb_access.knowledge_base
    parent = tree.target_parent(session, p, kb.id, parent_id)
    denied = "not allowed to create documents here"
    if parent is None:
        kb_access.require(KbAction.CREATE, message=denied)
    else:
        parent.require(Action.CREATE_CHILD, message=denied)
    body: str | None = None
    if type == "folder":
        if markdown:
            raise ValidationError("folders have no body; create a page for content", field="markdown")
    else:
        body = (
            limits.check_markdown(markdown or "", settings=settings)
            if stored_body
            else prepare_markdown(markdown or "", markdown_hash, settings)
        )
    tree.lock_tree(session, kb.id)
    limits.check_depth(tree.depth_of(session, parent_id) + 1, settings)
    uid = actor.user_id
    doc = Document(
        tenant_id=kb.tenant_id,
        workspace_id=kb.workspace_id,
        knowledge_base_id=kb.id,
        parent_id=parent_id,
        type=type,
        title=title,
        slug=new_slug(),
        status=status or "published",
        sort_order=tree.next_sort_order(session, kb.id, parent_id) if sort_order is None else 0,
        external_key=external_key,
        meta=meta,
        tags=tag_list,
        index_status="pending" if type == "page" else "indexed",
        permission_mode=permission_mode,
        visibility=visibility,
        created_by=uid,
        updated_by=uid,
        **({"id": document_id} if document_id is not None else {}),
    )
    session.add(doc)
    session.flush()
    if sort_order is not None:
        doc.sort_order = tree.place_at(session, kb.id, parent_id, doc.id, sort_order)
    version = (
        commit_version(session, actor, doc, title=title, markdown=body, source=source) if body is not None else None
    )
    if record:
        record_change(
            session,
            actor,
            op="document.create",
            object_type="document",
            object_id=doc.id,
            summary=f"created {type} {title!r}",
            scope=scope_of(doc),
            before={},
            after={**doc_state(doc), "type": type, "external_key": external_key},
            after_version_id=version.id if version else None,
        )
    return doc, version


COPY_SUFFIX = " (copy)"
_BODY_ASSET = "asset://{}"


def duplicate_document(
    session: Session,
    actor: Actor,
    doc_id: uuid.UUID,
    *,
    title: str | None = None,
    with_children: bool = False,
    knowledge_base_id: uuid.UUID | None = None,
    parent_id: uuid.UUID | None = None,
    settings: Settings | None = None,
) -> tuple[Document, DocumentVersion | None]:
    """A copy of a page, placed right after it: its current body, metadata and tags, its status
    (an archived page's copy is a draft), titled "<title> (copy)" unless ``title`` is given.
    ``with_children``: the pages and folders under it are copied too, under the copy, in their
    order (a folder is only copied so: a folder without what it holds is not a copy of it).
    ``knowledge_base_id``/``parent_id``: the copy goes there instead, last among what is there
    (``parent_id`` None: the knowledge base's top; ``knowledge_base_id`` None: the parent's),
    keeping its title unless it lands beside the original. Returns the top copy.

    Why the rules (docs/api.md#duplicating-a-page):

    * Reading the page is what makes it copyable (404 otherwise, as for any read); creating
      beside it, or where it is sent, is checked as any create (404 for a place the caller cannot
      see, 403 for one they only read), and so is each copy made under the copy. Copying into
      another knowledge base publishes there what the caller could already read and paste.
    * Nobody may read a copy who could not read what it copies: a custom page's copy is custom
      too, with the same visibility and the same collaborator rows (granted by the one who
      copied), so its readers and roles are the page's; an inherit page's copy inherits the same
      region. Under the page, only what the caller may read is copied: a page or folder hidden
      from them is left out with everything under it, and never named.
    * The images and attachments a body shows get rows of their own on the copy (an asset is
      readable with its page, docs/data-model.md#assets) that share the page's blobs: nothing is
      stored twice, and deleting either page leaves the other's files alone.
    * A link from one copied page to another points at the other's copy, so a duplicated set
      of pages (a template folder) links within itself; links to pages not copied stay.
    """
    cfg = settings or get_settings()
    src = access_document(session, actor.principal, doc_id, Action.READ).document
    if src.type != "page" and not with_children:
        raise ValidationError("a folder is duplicated with what it holds: ask for with_children", field="with_children")
    members = [src] + (_readable_descendants(session, actor.principal, src) if with_children else [])
    if len(members) > cfg.max_duplicate_documents:
        raise DuplicateTooLarge(
            f"{len(members)} documents to copy, more than the limit of {cfg.max_duplicate_documents}; "
            "duplicate a folder further down",
            limit="max_duplicate_documents",
            max=cfg.max_duplicate_documents,
        )
    beside = knowledge_base_id is None and parent_id is None
    if beside:
        into_kb, into_parent = src.knowledge_base_id, src.parent_id
    else:
        if knowledge_base_id is None:  # the parent's knowledge base (create_document checks the parent)
            # seen first: a parent the caller cannot see is the same 404 as a missing one, never
            # its knowledge base's (docs/permissions.md#outsiders-get-404). Any visible parent
            # (a trashed one for those who may restore it) goes on to create_document's answer.
            parent = access_document(session, actor.principal, parent_id, None).document
            if parent.tenant_id != src.tenant_id:
                raise NotFound(DOC_NOT_FOUND)
            knowledge_base_id = parent.knowledge_base_id
        into_kb, into_parent = knowledge_base_id, parent_id
    renamed = into_kb == src.knowledge_base_id and into_parent == src.parent_id  # among the original's siblings
    new_ids = {m.id: uuid.uuid4() for m in members}
    vids = [m.current_version_id for m in members if m.type == "page" and m.current_version_id]
    bodies = (
        dict(
            session.exec(
                select(DocumentVersion.id, DocumentVersion.markdown).where(col(DocumentVersion.id).in_(vids))
            ).all()
        )
        if vids
        else {}
    )
    assets_of: dict[uuid.UUID, list[DocumentAsset]] = {}
    for a in session.exec(
        select(DocumentAsset)
        .where(col(DocumentAsset.document_id).in_([m.id for m in members if m.type == "page"]))
        .order_by(col(DocumentAsset.created_at))
    ).all():
        assets_of.setdefault(a.document_id, []).append(a)
    by_text = {str(k): str(v) for k, v in new_ids.items()}

    def to_copy(url: str) -> str | None:  # a link to a copied page -> the link to its copy
        ref, hash_, frag = url[len(_DOC_LINK) :].partition("#") if url.startswith(_DOC_LINK) else ("", "", "")
        new = by_text.get(ref.strip("/").lower())
        return None if new is None else f"{_DOC_LINK}{new}{hash_}{frag}"

    top: tuple[Document, DocumentVersion | None] | None = None
    n_assets = 0
    for m in members:
        body = bodies.get(m.current_version_id, "") if m.type == "page" and m.current_version_id else None
        copies: list[DocumentAsset] = []
        if body is not None:
            for a in assets_of.get(m.id, []):
                ref = _BODY_ASSET.format(a.id)
                if ref not in body:  # an attachment the body no longer shows stays with its page
                    continue
                twin = DocumentAsset(
                    tenant_id=a.tenant_id,
                    document_id=new_ids[m.id],
                    object_key=a.object_key,
                    filename=a.filename,
                    mime_type=a.mime_type,
                    size_bytes=a.size_bytes,
                    sha256=a.sha256,
                    created_by=actor.user_id,
                )
                body = body.replace(ref, _BODY_ASSET.format(twin.id))
                copies.append(twin)
            body = rewrite_links(body, to_copy)  # a page's link to itself, too, is to its copy
        is_top = m is src
        name = m.title
        if is_top and title is not None:
            name = title
        elif is_top and renamed:
            name = src.title[: cfg.max_title_chars - len(COPY_SUFFIX)] + COPY_SUFFIX
        doc, version = create_document(
            session,
            actor,
            knowledge_base_id=into_kb,
            parent_id=into_parent if is_top else new_ids[m.parent_id],  # type: ignore[index]
            type=m.type,
            title=name,
            markdown=body,
            status=m.status if m.status in CREATE_STATUSES else "draft",
            metadata=dict(m.meta or {}),
            tags=list(m.tags or []),
            sort_order=src.sort_order + 1 if is_top and beside else None,  # else appended, in their order
            document_id=new_ids[m.id],
            settings=settings,
            permission_mode=m.permission_mode,
            visibility=m.visibility if m.permission_mode == "custom" else None,
            stored_body=True,
        )
        for twin in copies:
            session.add(twin)
        n_assets += len(copies)
        if m.permission_mode == "custom":
            _copy_collaborators(session, actor, m.id, doc.id)
        if top is None:
            top = (doc, version)
    session.flush()
    assert top is not None
    record_audit(
        session,
        tenant_id=top[0].tenant_id,
        actor=actor.principal,
        action="document.duplicate",
        object_type="document",
        object_id=top[0].id,
        metadata={
            "source_id": str(src.id),
            "documents": len(members),
            "assets": n_assets,
            "knowledge_base_id": str(into_kb),
        },
    )
    return top


_DOC_LINK = "openkb://document/"


def _readable_descendants(session: Session, principal: Principal, src: Document) -> list[Document]:
    """The live documents under ``src`` that ``principal`` may read, parents before children and
    siblings in their order; a hidden one is left out with everything under it."""
    ids = [i for i, lvl in tree.subtree(session, src.id, src.knowledge_base_id) if lvl > 0]
    if not ids:
        return []
    docs = session.exec(
        select(Document).where(
            col(Document.id).in_(ids), col(Document.status) != "deleted", col(Document.deleted_at).is_(None)
        )
    ).all()
    readable = filter_readable_documents(session, principal, [d.id for d in docs])
    children: dict[uuid.UUID, list[Document]] = {}
    for d in docs:
        if d.id in readable and d.parent_id is not None:
            children.setdefault(d.parent_id, []).append(d)
    out: list[Document] = []
    stack = [src.id]
    while stack:  # parents first: each folder's copy exists before what goes under it
        kids = sorted(children.get(stack.pop(), []), key=lambda d: (d.sort_order, d.created_at, str(d.id)))
        out.extend(kids)
        stack.extend(k.id for k in reversed(kids))
    return out


def _copy_collaborators(session: Session, actor: Actor, source_id: uuid.UUID, copy_id: uuid.UUID) -> None:
    """The collaborator rows of a custom document, granted again on its copy by ``actor``."""
    from openkb.permissions.collaborators import do_grant
    from openkb.permissions.service import ObjectRef

    rows = session.exec(
        select(Collaborator).where(Collaborator.object_type == "document", Collaborator.object_id == source_id)
    ).all()
    for r in rows:
        do_grant(
            session,
            tenant_id=r.tenant_id,
            ref=ObjectRef("document", copy_id),
            subject_type=r.subject_type,
            subject_id=r.subject_id,
            role=r.role,
            source="direct",
            created_by=actor.user_id,
        )


_PATH = text("SELECT id, title, type FROM documents WHERE id = ANY(:ids)").bindparams(
    bindparam("ids", type_=ARRAY(PGUUID(as_uuid=True)))
)


def get_document(session: Session, principal: Principal, doc_id: uuid.UUID) -> dict[str, Any]:
    """The document (trashed ones too, for those who may restore them) with its breadcrumb: the
    ancestors the caller may read, root first (a hidden folder is left out, never named)."""
    acc = access_document(session, principal, doc_id, None)
    doc = acc.document
    ids = acc.readable_ancestors()
    rows = {r.id: r for r in session.execute(_PATH, {"ids": ids})} if ids else {}
    path = [{"id": i, "title": rows[i].title, "type": rows[i].type} for i in ids if i in rows]
    return document_out(doc, current_version(session, doc), path=path, capabilities=acc.actions)


def get_by_key(session: Session, principal: Principal, kb_id: uuid.UUID, key: str) -> dict[str, Any]:
    access_knowledge_base(session, principal, kb_id)
    doc_id = session.exec(
        select(Document.id).where(col(Document.knowledge_base_id) == kb_id, col(Document.external_key) == key)
    ).first()
    if doc_id is None:
        raise NotFound(DOC_NOT_FOUND)
    return get_document(session, principal, doc_id)


def document_out(
    doc: Document,
    version: DocumentVersion | None,
    *,
    path: list[dict[str, Any]] | None = None,
    capabilities: frozenset[Action] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": doc.id,
        "knowledge_base_id": doc.knowledge_base_id,
        "workspace_id": doc.workspace_id,
        "parent_id": doc.parent_id,
        "type": doc.type,
        "title": doc.title,
        "status": doc.status,
        "current_version_id": doc.current_version_id,
        "version_no": version.version_no if version else None,
        "markdown": version.markdown if version else None,
        "markdown_hash": version.markdown_hash if version else None,
        "metadata": doc.meta,
        "tags": list(doc.tags or []),
        "index_status": doc.index_status,
        "index_error": doc.index_error,
        "permission_mode": doc.permission_mode,
        "visibility": doc.visibility,
        "sort_order": doc.sort_order,
        "external_key": doc.external_key,
        "slug": doc.slug,
        "deleted_at": doc.deleted_at,
        "created_by": doc.created_by,
        "updated_by": doc.updated_by,
        "created_at": doc.created_at,
        "updated_at": doc.updated_at,
    }
    if path is not None:
        out["path"] = path
    if capabilities is not None:
        out["capabilities"] = sorted(a.value for a in capabilities)
    return out


_EDIT_FIELDS = {"title", "status", "metadata", "tags"}
_MOVE_FIELDS = {"parent_id", "sort_order"}
_MANAGE_FIELDS = {"permission_mode", "visibility"}
_BESIDE_FIELDS = ("before_id", "after_id")  # a place next to a sibling, instead of sort_order
UPDATABLE = _EDIT_FIELDS | _MOVE_FIELDS | _MANAGE_FIELDS | set(_BESIDE_FIELDS)
NULLABLE = {"parent_id", "visibility"}  # null = knowledge-base root / inherited visibility


def update_document(
    session: Session,
    actor: Actor,
    doc_id: uuid.UUID,
    fields: dict[str, Any],
    *,
    settings: Settings | None = None,
    op: str = "document.update",
    reverts: Change | None = None,
) -> Document:
    """Apply the given fields (only keys present change). Records one ``document.update``."""
    p = actor.principal
    unknown = set(fields) - UPDATABLE
    if unknown:
        raise ValidationError(f"cannot update {', '.join(sorted(unknown))}", field=sorted(unknown)[0])
    acc = access_document(session, p, doc_id, Action.READ)
    doc = acc.document
    # validate everything before writing anything
    for k, v in fields.items():
        if v is None and k not in NULLABLE:
            raise ValidationError(f"{k} cannot be null", field=k)
    if "title" in fields:
        fields["title"] = limits.check_title(fields["title"], settings=settings)
    if "metadata" in fields:
        fields["metadata"] = limits.check_metadata(fields["metadata"], settings=settings)
    if "tags" in fields:
        fields["tags"] = limits.check_tags(fields["tags"], settings=settings)
    if "status" in fields:
        if fields["status"] == "deleted":
            raise ValidationError("use DELETE /api/documents/{id} to move a document to the trash", field="status")
        _check_status(fields["status"], UPDATE_STATUSES)
    if "permission_mode" in fields and fields["permission_mode"] not in PERMISSION_MODES:
        raise ValidationError("permission_mode must be inherit or custom", field="permission_mode")
    if "visibility" in fields and fields["visibility"] is not None and fields["visibility"] not in VISIBILITIES:
        raise ValidationError("visibility must be private, workspace, public or null", field="visibility")
    if "sort_order" in fields and fields["sort_order"] is not None and int(fields["sort_order"]) < 0:
        raise ValidationError("sort_order must be >= 0", field="sort_order")
    beside = _beside(session, p, doc, fields)
    changed = {k: v for k, v in fields.items() if _differs(doc, k, v)}
    if beside is not None and (
        "parent_id" in changed or not tree.already_beside(session, doc.knowledge_base_id, doc.parent_id, doc.id, beside)
    ):
        changed["sort_order"] = None  # placed under the tree's lock, below
    moving = "parent_id" in changed
    if moving:
        tree.target_parent(session, p, doc.knowledge_base_id, changed["parent_id"])
        tree.check_move(session, doc.id, doc.knowledge_base_id, changed["parent_id"], settings)
    needed: set[Action] = set()
    if changed.keys() & _EDIT_FIELDS:
        needed.add(Action.EDIT)
    if changed.keys() & _MOVE_FIELDS:
        needed.add(Action.MOVE)
    if changed.keys() & _MANAGE_FIELDS:
        needed.add(Action.MANAGE)
    acc.require(*needed)
    if moving and not can_move_document(
        session, p, doc.id, new_parent_id=changed["parent_id"], knowledge_base_id=doc.knowledge_base_id
    ):
        raise PermissionDenied("not allowed to move the document there")
    if not changed:
        return doc
    doc = lock_document(session, doc_id)
    before = doc_state(doc, list(changed))
    if changed.keys() & _MOVE_FIELDS:
        tree.lock_tree(session, doc.knowledge_base_id)
        new_parent = changed.get("parent_id", doc.parent_id)
        doc.parent_id = new_parent
        session.add(doc)
        session.flush()
        position = fields.get("sort_order")
        doc.sort_order = tree.place_at(session, doc.knowledge_base_id, new_parent, doc.id, position, beside=beside)
    if changed.keys() & _MANAGE_FIELDS:
        # the permission service changes (and audits) access settings
        access_settings.update_document_access(
            session,
            p,
            doc.id,
            permission_mode=changed.get("permission_mode"),
            visibility=changed["visibility"] if "visibility" in changed else access_settings.UNSET,
        )
        doc = lock_document(session, doc_id)
    for k in ("title", "status", "tags"):
        if k in changed:
            setattr(doc, k, changed[k])
    if "metadata" in changed:
        doc.meta = changed["metadata"]
    doc.updated_by = actor.user_id
    doc.updated_at = utcnow()
    session.add(doc)
    session.flush()
    after = doc_state(doc, list(changed))
    record_change(
        session,
        actor,
        op=op,
        object_type="document",
        object_id=doc.id,
        summary=f"updated {', '.join(sorted(changed))} of {doc.title!r}",
        scope=scope_of(doc),
        before=before,
        after=after,
        reverts=reverts,
    )
    _enqueue_for(session, doc, set(changed))
    return doc


def _beside(session: Session, p: Principal, doc: Document, fields: dict[str, Any]) -> tuple[uuid.UUID, bool] | None:
    """``before_id`` or ``after_id`` (taken out of ``fields``) as ``(sibling, after?)``, checked:
    one of them and no ``sort_order``; the sibling readable (else 404, as any document the caller
    cannot read), live, another document, and under the parent the document will have."""
    given = [k for k in _BESIDE_FIELDS if k in fields]  # a null one was refused with the others
    if not given:
        return None
    key = given[0]
    if len(given) > 1 or "sort_order" in fields:
        raise ValidationError("give one of sort_order, before_id and after_id", field=key)
    anchor = access_document(session, p, fields.pop(key), Action.READ).document
    parent = fields["parent_id"] if "parent_id" in fields else doc.parent_id
    if (
        anchor.id == doc.id
        or anchor.knowledge_base_id != doc.knowledge_base_id
        or anchor.status == "deleted"
        or anchor.parent_id != parent
    ):
        raise ValidationError(f"{key} must name another document under the parent it is placed in", field=key)
    return anchor.id, key == "after_id"


def _differs(doc: Document, key: str, value: Any) -> bool:
    if key == "sort_order":
        return value is not None and int(value) != doc.sort_order
    cur = doc.meta if key == "metadata" else getattr(doc, key)
    if key == "tags":
        return list(cur or []) != list(value or [])
    return cur != value


def _enqueue_for(session: Session, doc: Document, changed: set[str]) -> None:
    """Index jobs for a field update (jobs contract of the indexing part)."""
    if changed & {"parent_id", "status", "permission_mode", "visibility", "title"}:
        # title: the ``path`` of every descendant's chunks names it
        enqueue_after_commit(session, "reindex_subtree", document_id=str(doc.id))
    elif changed & {"metadata", "tags"} and doc.type == "page":
        enqueue_after_commit(session, "index_document", document_id=str(doc.id))


def trash_document(session: Session, actor: Actor, doc_id: uuid.UUID, *, reverts: Change | None = None) -> Document:
    doc = access_document(session, actor.principal, doc_id, Action.DELETE, for_update=True).document
    before = doc_state(doc, ["status", "deleted_at"])
    doc.status = "deleted"
    doc.deleted_at = utcnow()
    doc.updated_by = actor.user_id
    doc.updated_at = utcnow()
    session.add(doc)
    session.flush()
    record_change(
        session,
        actor,
        op="document.trash",
        object_type="document",
        object_id=doc.id,
        summary=f"moved {doc.title!r} to the trash",
        scope=scope_of(doc),
        before=before,
        after=doc_state(doc, ["status", "deleted_at"]),
        reverts=reverts,
    )
    enqueue_after_commit(session, "reindex_subtree", document_id=str(doc.id))
    return doc


def _status_before_trash(session: Session, doc_id: uuid.UUID) -> str:
    row = session.exec(
        select(Change)
        .where(col(Change.object_id) == doc_id, col(Change.op) == "document.trash")
        .order_by(col(Change.created_at).desc())
        .limit(1)
    ).first()
    st = (row.before_state.get("status") if row else None) or "draft"
    return st if st in UPDATE_STATUSES else "draft"


def restore_from_trash(
    session: Session, actor: Actor, doc_id: uuid.UUID, *, status: str | None = None, reverts: Change | None = None
) -> Document:
    doc = _access_trashed(
        session,
        actor.principal,
        doc_id,
        "only a document that was itself deleted can be restored; restore its trashed ancestor",
    )
    if status is not None:
        _check_status(status, UPDATE_STATUSES)
    binned = _trashed_ancestor(session, actor.principal, doc) if doc.parent_id is not None else None
    if binned is not None and not can_create_document(session, actor.principal, doc.knowledge_base_id):
        # going to the root is a move there, which needs the right to create there
        # (docs/permissions.md#capability-matrix): a folder manager must not expose a page of a
        # private folder to the whole knowledge base. The same answer as a create under it.
        raise DocumentInTrash(f"{binned} is in the trash; restore it first", field="parent_id")
    before = doc_state(doc, ["status", "deleted_at", "parent_id", "sort_order"])
    doc.status = status or _status_before_trash(session, doc.id)
    doc.deleted_at = None
    if binned is not None:
        tree.lock_tree(session, doc.knowledge_base_id)
        doc.parent_id = None
        doc.sort_order = tree.next_sort_order(session, doc.knowledge_base_id, None)
    doc.updated_by = actor.user_id
    doc.updated_at = utcnow()
    session.add(doc)
    session.flush()
    record_change(
        session,
        actor,
        op="document.untrash",
        object_type="document",
        object_id=doc.id,
        summary=f"restored {doc.title!r} from the trash",
        scope=scope_of(doc),
        before=before,
        after=doc_state(doc, ["status", "deleted_at", "parent_id", "sort_order"]),
        reverts=reverts,
    )
    enqueue_after_commit(session, "reindex_subtree", document_id=str(doc.id))
    return doc


def _access_trashed(session: Session, principal: Principal, doc_id: uuid.UUID, not_in_trash: str) -> Document:
    """The document, locked: visible (404 otherwise), itself in the trash (NOT_IN_TRASH), and
    trash rights (403), in that order. ``Action.TRASH`` is also what shows it in the trash, which
    an archived knowledge base keeps listing; restoring and purging are writes, refused there as
    every other write (403: an archived knowledge base is read-only, docs/permissions.md#status)."""
    acc = access_document(session, principal, doc_id, None, for_update=True)
    if acc.document.status != "deleted":
        raise NotInTrash(not_in_trash)
    acc.require(Action.TRASH, message="only managers can restore or purge documents from the trash")
    if not acc.knowledge_base_active:
        raise PermissionDenied("the knowledge base is archived (read-only); make it active to restore or purge")
    return acc.document


def _trashed_ancestor(session: Session, principal: Principal, doc: Document) -> str | None:
    """The nearest ancestor in the trash as a refusal names it ("the parent 'X'"), or None.
    Named only to those who see it in the trash (who may restore it, as ``tree.target_parent``);
    for anyone else it stays "a folder above it", never its title."""
    chain = tree.ancestors(session, doc.id)
    ids = [r["id"] for r in chain[1:]]
    if not ids:
        return None
    binned = tree.in_trash(session, ids)
    row = next((r for r in chain[1:] if r["id"] in binned), None)
    if row is None:
        return None
    if filter_documents(session, principal, [row["id"]], Action.TRASH):
        return f"the parent {row['title']!r}"
    return "a folder above it"


def purge_document(session: Session, actor: Actor, doc_id: uuid.UUID) -> list[uuid.UUID]:
    """Remove a trashed document and its subtree for good; returns the removed ids."""
    doc = _access_trashed(session, actor.principal, doc_id, "move the document to the trash first")
    return remove_subtree(session, actor, doc, op="document.purge")


def remove_subtree(
    session: Session, actor: Actor, doc: Document, *, op: str, reverts: Change | None = None
) -> list[uuid.UUID]:
    """Delete ``doc`` and its descendants, recording one snapshot change per document (deepest
    first, so a revert — newest first — re-creates parents before children)."""
    nodes = tree.subtree(session, doc.id, doc.knowledge_base_id)
    nodes.sort(key=lambda n: -n[1])
    removed: list[uuid.UUID] = []
    for nid, _lvl in nodes:
        d = doc if nid == doc.id else session.get(Document, nid)
        if d is None:
            continue
        snap = snapshot(session, d)
        record_change(
            session,
            actor,
            op=op,
            object_type="document",
            object_id=d.id,
            summary=f"{'purged' if op == 'document.purge' else 'removed'} {d.title!r}",
            scope=scope_of(d),
            before={**snap, "snapshot": True},
            after={},
            before_version_id=d.current_version_id,
            reverts=reverts if nid == doc.id else None,
        )
        removed.append(d.id)
    # their assets stay (a revert re-attaches them) until the retention prunes them (openkb.assets)
    session.execute(
        text("UPDATE document_assets SET document_id = NULL, detached_at = now() WHERE document_id = ANY(:ids)"),
        {"ids": removed},
    )
    session.execute(text("UPDATE documents SET current_version_id = NULL WHERE id = ANY(:ids)"), {"ids": removed})
    session.execute(text("DELETE FROM documents WHERE id = ANY(:ids)"), {"ids": removed})
    gone = set(removed)
    for obj in list(session.identity_map.values()):
        if (isinstance(obj, Document) and obj.id in gone) or (
            isinstance(obj, DocumentVersion) and obj.document_id in gone
        ):
            session.expunge(obj)
    for rid in removed:
        enqueue_after_commit(session, "reindex_subtree", document_id=str(rid))
    return removed


def recreate_from_snapshot(
    session: Session, actor: Actor, snap: dict[str, Any], *, reverts: Change | None = None
) -> Document:
    """Re-create a removed document with its id, fields and last body (as version 1)."""
    p = actor.principal
    kb_access = access_knowledge_base(session, p, uuid.UUID(snap["knowledge_base_id"]))
    kb = kb_access.knowledge_base
    doc_id = uuid.UUID(snap["id"])
    if session.get(Document, doc_id) is not None:
        raise ValidationError("the document exists already")
    parent_id = uuid.UUID(snap["parent_id"]) if snap.get("parent_id") else None
    if parent_id is not None and session.get(Document, parent_id) is None:
        parent_id = None
    denied = "not allowed to re-create documents here"
    if parent_id is None:
        kb_access.require(KbAction.CREATE, message=denied)
    else:
        parent = access_document(session, p, parent_id, None)
        if parent.document.knowledge_base_id != kb.id:
            raise PermissionDenied(denied)
        # children of a purged subtree go back under their (trashed) parent: trash rights suffice
        parent.require_any(Action.CREATE_CHILD, Action.TRASH, message=denied)
    tree.lock_tree(session, kb.id)
    doc = Document(
        id=doc_id,
        tenant_id=kb.tenant_id,
        workspace_id=kb.workspace_id,
        knowledge_base_id=kb.id,
        parent_id=parent_id,
        type=snap["type"],
        title=snap["title"],
        slug=snap.get("slug") or new_slug(),
        status=snap["status"],
        permission_mode=snap.get("permission_mode") or "inherit",
        visibility=snap.get("visibility"),
        sort_order=int(snap.get("sort_order") or 0),
        external_key=snap.get("external_key"),
        meta=snap.get("metadata") or {},
        tags=snap.get("tags") or [],
        index_status="pending" if snap["type"] == "page" else "indexed",
        deleted_at=None,
        created_by=_user_or(session, snap.get("created_by"), actor.user_id),
        updated_by=actor.user_id,
    )
    if snap.get("external_key"):
        taken = session.exec(
            select(Document.id).where(
                col(Document.knowledge_base_id) == kb.id, col(Document.external_key) == snap["external_key"]
            )
        ).first()
        if taken is not None:
            doc.external_key = None
    session.add(doc)
    session.flush()
    version = None
    if doc.type == "page":
        body = snap.get("markdown") or ""
        version = commit_version(session, actor, doc, title=snap.get("title") or doc.title, markdown=body)
    if snap.get("status") == "deleted":
        doc.deleted_at = utcnow()
    asset_ids = [uuid.UUID(a) for a in snap.get("asset_ids") or ()]
    if asset_ids:
        session.execute(
            text(
                "UPDATE document_assets SET document_id = :d, detached_at = NULL "
                "WHERE id = ANY(:ids) AND document_id IS NULL"
            ),
            {"d": doc.id, "ids": asset_ids},
        )
    session.add(doc)
    session.flush()
    record_change(
        session,
        actor,
        op="document.create",
        object_type="document",
        object_id=doc.id,
        summary=f"re-created {doc.type} {doc.title!r}",
        scope=scope_of(doc),
        before={},
        after={**doc_state(doc), "type": doc.type, "external_key": doc.external_key},
        after_version_id=version.id if version else None,
        reverts=reverts,
    )
    enqueue_after_commit(session, "reindex_subtree", document_id=str(doc.id))
    return doc


def _user_or(session: Session, raw: str | None, fallback: uuid.UUID) -> uuid.UUID:
    from openkb.models import User

    if raw:
        uid = uuid.UUID(raw)
        if session.get(User, uid) is not None:
            return uid
    return fallback


def version_ids(session: Session, doc_id: uuid.UUID) -> list[uuid.UUID]:
    return list(session.exec(select(DocumentVersion.id).where(col(DocumentVersion.document_id) == doc_id)).all())
