"""The app-facing knowledge API (docs/apps.md#api): collections, documents and search.

Every method takes an ``AppCaller`` (the installation acting as its user, with the grants of
this call) and works through OpenKB's own services — knowledge bases and folders are the
collections, ``upsert_by_key`` is the keyed write, the change log records every write with the
installation as actor — so an app can never do what its user could not.

The two failure modes (docs/apps.md#two-failure-modes):

* query methods (``collections_list``, ``search``) leave out what is not granted and never say
  whether it exists;
* single-object methods raise ``KNOWLEDGE_PERMISSION_MISSING`` with ``lacks knowledge
  permission <string>``; what the *user* may not see is ``NOT_FOUND`` as everywhere else.

Order of checks for a ref: decode (NotFound), the user's ``access_*`` (NotFound), then the
grant by location. For a builtin name (``diary``/``keep``) the grant is checked first: naming
a builtin reveals nothing.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import UUID as PGUUID
from sqlmodel import Session, col, select

from openkb.apps import plaintext, quotas
from openkb.apps import reach as RC
from openkb.apps import refs as R
from openkb.apps.registry import AppCaller, check_source_uri
from openkb.config import Settings
from openkb.content import limits, tree
from openkb.content.actor import Actor, parse_run_id
from openkb.content.documents import create_document, trash_document
from openkb.content.knowledge_bases import create_knowledge_base
from openkb.content.upsert import UNSET, upsert_by_key
from openkb.content.versions import INDEX_ONLY, current_version, is_index_only, save_version, sha256_hex
from openkb.context import AppContext
from openkb.errors import (
    CollectionNotNestable,
    DocumentInTrash,
    KnowledgePermissionMissing,
    NotFound,
    PermissionDenied,
    ValidationError,
)
from openkb.models import AppCollection, AppDocument, DocumentChunk, KnowledgeBase
from openkb.permissions import (
    Action,
    access_document,
    access_knowledge_base,
    filter_documents,
    filter_readable_documents,
    knowledge_base_capabilities,
)
from openkb.permissions.rules import KbAction
from openkb.permissions.sql import READABLE_BINDS, READABLE_CTES, readable_params

MAX_COLLECTION_DEPTH = 5  # the top-level collection is level 1
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")  # ASCII digits; \Z: ``$`` also matches before a final newline


# --- actors and runs --------------------------------------------------------------------------


def actor_for(caller: AppCaller, run_id: str | None = None) -> Actor:
    """The installation's writes: the user's principal, a run named per installation (two apps
    sending ``nightly`` get two runs), and the installation on every change row."""
    rid: uuid.UUID | None = None
    if run_id is not None and str(run_id).strip():
        try:
            rid = uuid.UUID(str(run_id).strip())
        except ValueError:
            rid = parse_run_id(caller.tenant_id, f"app:{caller.installation_id}:{str(run_id).strip()}")
    return Actor(
        principal=caller.principal,
        run_id=rid or uuid.uuid4(),
        source="api",
        app_installation_id=caller.installation_id,
    )


# --- collections ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Coll:
    knowledge_base_id: uuid.UUID
    folder_id: uuid.UUID | None
    chain: tuple[uuid.UUID, ...]  # the folder and its ancestors, innermost first (empty: a knowledge base)
    builtin: str | None

    @property
    def depth(self) -> int:
        return 1 + len(self.chain)


def resolve_collection(session: Session, caller: AppCaller, value: str, action: str, *, verify_kb: bool = True) -> Coll:
    """``diary``, ``keep`` or a collection ref, for ``action`` (``read``/``write``).
    ``verify_kb=False``: the caller's next step is a content service that opens the knowledge
    base with the same ``access_knowledge_base`` (a keyed upsert), so it is not asked twice."""
    if value in ("diary", "keep"):
        RC.require(caller, f"collections.{action}:{value}")
        kb_id = caller.diary_kb_id if value == "diary" else caller.keep_kb_id
        if kb_id is None:
            raise NotFound("collection not found")
        if verify_kb:
            access_knowledge_base(session, caller.principal, kb_id)
        return Coll(kb_id, None, (), value)
    kind, oid = caller.read_ref(value, R.KB + R.FOLDER, "collection")
    if kind == R.KB:
        access_knowledge_base(session, caller.principal, oid)  # before the grant: NotFound first
        RC.check(caller, action, oid, ())
        return Coll(oid, None, (), RC.builtin_of(caller, oid, None))
    doc = access_document(session, caller.principal, oid).document
    if doc.type != "folder" or doc.status == "deleted":
        raise NotFound("collection not found")
    loc = RC.locate(session, [oid])[oid]
    RC.check(caller, action, loc.knowledge_base_id, loc.chain)
    return Coll(loc.knowledge_base_id, oid, loc.chain, None)


def coll_ref(caller: AppCaller, kb_id: uuid.UUID, folder_id: uuid.UUID | None) -> str:
    return caller.ref(R.FOLDER, folder_id) if folder_id is not None else caller.ref(R.KB, kb_id)


def collections_list(session: Session, caller: AppCaller) -> list[dict[str, Any]]:
    """Every collection the app may read or write (a query method: the rest is left out), flat,
    with ``parent`` the ref of its containing collection when that one is listed too."""
    roots = [(kb, doc) for kb, doc, p in RC.roots(caller, "read") + RC.roots(caller, "write") if p in caller.grants]
    if not roots:
        return []
    kb_ids = sorted({kb for kb, _ in roots}, key=str)
    caps = knowledge_base_capabilities(session, caller.principal, kb_ids)
    kbs = {
        k.id: k
        for k in session.exec(select(KnowledgeBase).where(col(KnowledgeBase.id).in_(kb_ids))).all()
        if KbAction.READ in caps.get(k.id, frozenset())
    }
    if not kbs:
        return []
    rows = session.execute(
        text(
            "SELECT id, knowledge_base_id, parent_id, title FROM documents "
            "WHERE knowledge_base_id = ANY(:kbs) AND type = 'folder' AND status <> 'deleted'"
        ),
        {"kbs": list(kbs)},
    ).all()
    readable = {d for d in filter_readable_documents(session, caller.principal, [r.id for r in rows])}
    locs = RC.locate(session, [r.id for r in rows if r.id in readable])
    # ``canWrite`` of a folder: the app's write reach *and* the user may create documents in it
    # (a folder of a knowledge base the user only reads is not writable, whatever the switches)
    creatable = filter_documents(session, caller.principal, list(locs), Action.CREATE_CHILD)
    out: list[dict[str, Any]] = []
    listed: set[tuple[uuid.UUID, uuid.UUID | None]] = set()
    for kb in kbs.values():
        can_r, can_w = RC.reaches(caller, "read", kb.id, ()), RC.reaches(caller, "write", kb.id, ())
        if can_r or can_w:
            out.append(_coll_out(caller, kb.id, None, kb.title, None, can_w and KbAction.CREATE in caps[kb.id]))
            listed.add((kb.id, None))
    for r in rows:
        loc = locs.get(r.id)
        if loc is None:
            continue
        can_r, can_w = (
            RC.reaches(caller, "read", loc.knowledge_base_id, loc.chain),
            RC.reaches(caller, "write", loc.knowledge_base_id, loc.chain) and loc.id in creatable,
        )
        if can_r or can_w:
            listed.add((loc.knowledge_base_id, loc.id))
            out.append(_coll_out(caller, loc.knowledge_base_id, loc.id, r.title, loc.ancestors, can_w))
    # a parent the app cannot see is null (docs/apps.md#collections)
    for item in out:
        p = item.pop("_parent")
        item["parent"] = coll_ref(caller, *p) if p is not None and p in listed else None
    return out


def _coll_out(
    caller: AppCaller,
    kb_id: uuid.UUID,
    folder_id: uuid.UUID | None,
    name: str,
    ancestors: tuple[uuid.UUID, ...] | None,
    can_write: bool,
) -> dict[str, Any]:
    parent: tuple[uuid.UUID, uuid.UUID | None] | None = None
    if folder_id is not None:
        parent = (kb_id, ancestors[0]) if ancestors else (kb_id, None)
    return {
        "ref": coll_ref(caller, kb_id, folder_id),
        "name": name,
        "builtin": RC.builtin_of(caller, kb_id, folder_id),
        "kind": "folder" if folder_id is not None else "knowledge_base",
        "canWrite": bool(can_write),
        "_parent": parent,
    }


def collections_create(
    session: Session,
    caller: AppCaller,
    name: str,
    *,
    parent: str | None = None,
    run_id: str | None = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """A new collection of the app: top level = a private knowledge base in the user's personal
    space; with ``parent`` = a folder in it (write grant on the parent, not in ``diary``, at
    most 5 levels)."""
    RC.require(caller, "collections.create")
    name = limits.check_title(name, "name", settings)
    actor = actor_for(caller, run_id)
    if parent is None:
        space = session.execute(
            text("SELECT workspace_id FROM app_personal_spaces WHERE tenant_id = :t AND user_id = :u"),
            {"t": caller.tenant_id, "u": caller.user_id},
        ).scalar()
        if space is None:
            raise NotFound("the user has no personal space")
        quotas.charge(session, caller, len(name), settings)
        kb = create_knowledge_base(session, actor, workspace_id=space, title=name, visibility="private", cfg=settings)
        session.add(AppCollection(installation_id=caller.installation_id, knowledge_base_id=kb.id))
        session.flush()
        return {"ref": caller.ref(R.KB, kb.id), "name": kb.title, "parent": None, "runId": str(actor.run_id)}
    if parent == "diary":
        RC.require(caller, "collections.write:diary")
        raise CollectionNotNestable("diary has no sub-collections")
    p = resolve_collection(session, caller, parent, "write")
    if p.builtin == "diary":
        raise CollectionNotNestable("diary has no sub-collections")
    if p.depth + 1 > MAX_COLLECTION_DEPTH:
        raise CollectionNotNestable(f"collections nest at most {MAX_COLLECTION_DEPTH} levels")
    quotas.charge(session, caller, len(name), settings)
    doc, _ = create_document(
        session, actor, knowledge_base_id=p.knowledge_base_id, title=name, type="folder", parent_id=p.folder_id,
        settings=settings,
    )  # fmt: skip
    session.add(
        AppCollection(installation_id=caller.installation_id, knowledge_base_id=p.knowledge_base_id, document_id=doc.id)
    )
    _remember_writer(session, caller, doc.id, None, None)
    session.flush()
    return {
        "ref": caller.ref(R.FOLDER, doc.id),
        "name": doc.title,
        "parent": parent if parent == "keep" else coll_ref(caller, p.knowledge_base_id, p.folder_id),
        "runId": str(actor.run_id),
    }


# --- documents --------------------------------------------------------------------------------


def _writer_of(
    caller: AppCaller, doc_id: uuid.UUID, origin: str | None, source: str | None
) -> tuple[uuid.UUID, str, str]:
    return doc_id, origin or f"app:{caller.app_id}", source or "app"


def _remember_writer(
    session: Session, caller: AppCaller, doc_id: uuid.UUID, origin: str | None, source: str | None
) -> None:
    _, origin, source = _writer_of(caller, doc_id, origin, source)
    session.add(AppDocument(document_id=doc_id, installation_id=caller.installation_id, origin=origin, source=source))


def _require_own_or_manage(caller: AppCaller, loc: RC.Loc) -> None:
    """Overwriting or deleting what another writer wrote needs ``changes.manage``."""
    if loc.writer != caller.installation_id:
        RC.require(caller, "changes.manage")


def _meta_date(meta: dict[str, Any] | None, key: str | None, builtin: str | None) -> dict[str, Any] | None:
    """Diary documents are keyed by a real date and carry ``meta.date`` (the key when not
    given). The key is taken stripped, as the keyed write stores it (``limits.check_name``), so
    ``meta.date`` is the stored key; shaped like a date is not enough (``2026-02-31``,
    ``0000-01-01`` are refused)."""
    if builtin != "diary":
        return meta
    day = key.strip() if isinstance(key, str) else None
    try:
        if day is None or not _DATE.match(day):
            raise ValueError(day)
        date.fromisoformat(day)
    except ValueError:
        raise ValidationError("diary documents are keyed by their date (YYYY-MM-DD)", field="key") from None
    m = dict(meta or {})
    m.setdefault("date", day)
    return m


def documents_upsert(
    session: Session,
    caller: AppCaller,
    *,
    collection: str | None = None,
    key: str | None = None,
    ref: str | None = None,
    title: str,
    body: str | None = None,
    text_: str | None = None,
    source_uri: str | None = None,
    meta: dict[str, Any] | None = None,
    origin: str | None = None,
    source: str | None = None,
    run_id: str | None = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """``key`` -> one deterministic document per (collection's knowledge base, key): created,
    updated or unchanged (unchanged writes and re-indexes nothing, and is not counted against
    the quota). ``ref`` -> update that document. Neither -> a new document.

    ``text`` + ``sourceUri``: imported content whose original lives at an http(s) URL on the
    installation's allowed hosts; the URL is kept in ``meta.sourceUri`` and ``meta.indexOnly``
    is true. The text is plain text, indexed as it is (``openkb.apps.plaintext``: never read as
    Markdown, so HTML or ``$`` in it are just characters); ``documents.get`` gives it back as
    ``text`` with its ``sourceUri``."""
    if (origin is not None or source is not None) and not caller.has("origin.override"):
        raise RC.missing("origin.override")
    if meta is not None and INDEX_ONLY in meta:
        raise ValidationError(f"meta.{INDEX_ONLY} is set by OpenKB (send text and sourceUri)", field="meta")
    written = len(text_ if text_ is not None else body or "") + len(title or "")
    if text_ is not None:
        if body is not None:
            raise ValidationError("give body or text, not both", field="text")
        if source_uri is None:
            raise ValidationError("text needs a sourceUri", field="sourceUri")
        meta = {**(meta or {}), "sourceUri": check_source_uri(caller, source_uri), INDEX_ONLY: True}
        body = plaintext.to_markdown(text_)
    elif source_uri is not None:
        raise ValidationError("sourceUri goes with text", field="sourceUri")
    if ref is not None and (key is not None or collection is not None):
        raise ValidationError("give ref alone, or collection with an optional key", field="ref")
    actor = actor_for(caller, run_id)
    if ref is not None:
        return _update_by_ref(session, caller, actor, ref, title, body, meta, written, settings)
    if collection is None:
        raise ValidationError("collection is required", field="collection")
    coll = resolve_collection(session, caller, collection, "write", verify_kb=key is None)
    meta = _meta_date(meta, key, coll.builtin)
    if key is None:
        quotas.charge(session, caller, written, settings)
        doc, _ = create_document(
            session, actor, knowledge_base_id=coll.knowledge_base_id, parent_id=coll.folder_id, title=title,
            markdown=body or "", metadata=meta, source="api", settings=settings,
        )  # fmt: skip
        _remember_writer(session, caller, doc.id, origin, source)
        session.flush()
        return {"status": "created", "ref": caller.ref(R.DOCUMENT, doc.id), "runId": str(actor.run_id)}
    key = limits.check_name(key, "key", settings)
    # the caller's statement took this key's lock when it looked for this very key
    locked = _locked(caller, coll, key)
    existing = _prelocated(caller, coll, key)
    if existing is _UNKNOWN:
        existing = RC.locate_key(session, coll.knowledge_base_id, key)
    if existing is not None and not RC.reaches(caller, "write", existing.knowledge_base_id, existing.chain):
        # moved out of reach: the user's right to see it comes first (NotFound), then the place.
        # Inside reach, ``upsert_by_key`` itself opens the document for the user (EDIT).
        access_document(session, caller.principal, existing.id, None)
        RC.check(caller, "write", existing.knowledge_base_id, existing.chain)

    if existing is not None and existing.ancestors and _below_trash(session, existing):
        # the user's right to see it first (NotFound), then the answer the content service
        # gives for a keyed document in the trash (docs/apps.md#api)
        access_document(session, caller.principal, existing.id, None)
        raise DocumentInTrash("the document with this key is in the trash (a folder above it is); restore it first")

    def write() -> Any:
        return upsert_by_key(
            session, actor, coll.knowledge_base_id, key, title=title, markdown=body or "", metadata=meta,
            parent_id=UNSET if existing is not None else coll.folder_id, settings=settings, key_locked=locked,
        )  # fmt: skip

    if existing is not None and existing.writer != caller.installation_id and not caller.has("changes.manage"):
        # someone else's document: only an unchanged write is allowed, so try it in a savepoint
        # that a real change rolls back (the common, own-document path pays no savepoint)
        with session.begin_nested():
            res = write()
            if res.status != "unchanged":
                raise RC.missing("changes.manage")
    else:
        res = write()
    if existing is None and res.status != "created":
        _appeared(session, caller, coll, key, res.status)
    if meta is None and res.status != "created":
        _refuse_markdown_over_text(res.document.meta, body)
    if res.status == "created":  # the charge records the writer too (one statement)
        quotas.charge(session, caller, written, settings, writer_of=_writer_of(caller, res.document.id, origin, source))
    elif res.status != "unchanged":
        quotas.charge(session, caller, written, settings)
    return {"status": res.status, "ref": caller.ref(R.DOCUMENT, res.document.id), "runId": str(actor.run_id)}


_UNKNOWN: Any = object()


def _below_trash(session: Session, loc: RC.Loc) -> bool:
    """Whether a folder above the document is in the trash (its own status is ``loc.status``,
    which ``upsert_by_key`` answers for). Only asked for a document in a folder."""
    return bool(tree.in_trash(session, list(loc.ancestors)))


def _appeared(session: Session, caller: AppCaller, coll: Coll, key: str, status: str) -> None:
    """The key had no document when this call looked, yet ``upsert_by_key`` found one: another
    writer created it meanwhile (it held the key's lock; this call's lookup ran before it
    committed). Decide on it now as if it had been found: its place must be in reach, and a
    change to another writer's document needs ``changes.manage``. Raising undoes the write with
    the call's transaction (the adapter rolls back on an error). Rare: it costs a statement
    only then."""
    loc = RC.locate_key(session, coll.knowledge_base_id, key)
    if loc is None:
        return
    RC.check(caller, "write", loc.knowledge_base_id, loc.chain)
    if status != "unchanged":
        _require_own_or_manage(caller, loc)


def _locked(caller: AppCaller, coll: Coll, key: str) -> bool:
    """Whether ``resolve_caller(keyed=...)`` took this key's advisory lock for this write (the
    lock of the key in the builtin collection's knowledge base, ``upsert_by_key``'s own)."""
    k = caller.keyed
    return k is not None and coll.builtin is not None and (k[0], k[1]) == (coll.builtin, key)


def _prelocated(caller: AppCaller, coll: Coll, key: str) -> Any:
    """The keyed document ``resolve_caller(keyed=...)`` found in its own statement, as
    ``locate_key`` would answer (None: no such key), or ``_UNKNOWN`` when that statement did
    not look for this key or the document sits in a folder (its ancestors need ``locate_key``)."""
    k = caller.keyed
    if k is None or coll.builtin is None or (k[0], k[1]) != (coll.builtin, key):
        return _UNKNOWN
    row = k[2]
    if row is None:
        return None
    if row.k_parent is not None or row.k_kb != coll.knowledge_base_id:
        return _UNKNOWN
    return RC.Loc(row.k_id, row.k_kb, row.k_type, row.k_status, key, row.k_writer, ())


def _update_by_ref(
    session: Session,
    caller: AppCaller,
    actor: Actor,
    ref: str,
    title: str,
    body: str | None,
    meta: dict[str, Any] | None,
    written: int,
    settings: Settings | None,
) -> dict[str, Any]:
    _, doc_id = caller.read_ref(ref, R.DOCUMENT, "document")
    acc = _access_page(session, caller, doc_id)
    loc = RC.locate(session, [doc_id])[doc_id]
    RC.check(caller, "write", loc.knowledge_base_id, loc.chain)
    doc = acc.document
    if meta is None:
        _refuse_markdown_over_text(doc.meta, body)
    cur = current_version(session, doc)
    text_ = body if body is not None else (cur.markdown if cur else "")  # no body: keep it

    def write() -> str:
        if doc.external_key is not None:
            return upsert_by_key(
                session, actor, doc.knowledge_base_id, doc.external_key, title=title, markdown=text_,
                metadata=meta, settings=settings,
            ).status  # fmt: skip
        status = "unchanged"
        if (cur is None or text_ != cur.markdown) or title != doc.title:
            r = save_version(
                session, actor, doc.id, markdown=text_, markdown_hash=sha256_hex(text_),
                base_version_id=cur.id if cur else None, base_version_no=0 if cur is None else None,
                title=title, settings=settings, index_only_writer=True,
            )  # fmt: skip
            status = "unchanged" if r.status == "unchanged" else "updated"
        if meta is not None and meta != doc.meta:
            from openkb.content.documents import update_document

            update_document(session, actor, doc.id, {"metadata": meta}, settings=settings)
            status = "updated"
        return status

    if loc.writer != caller.installation_id and not caller.has("changes.manage"):
        with session.begin_nested():  # someone else's document: only "unchanged" may pass
            status = write()
            if status != "unchanged":
                raise RC.missing("changes.manage")
    else:
        status = write()
    if status != "unchanged":
        quotas.charge(session, caller, written, settings)
    return {"status": status, "ref": ref, "runId": str(actor.run_id)}


def _access_page(session: Session, caller: AppCaller, doc_id: uuid.UUID) -> Any:
    """A live page the user can see (a trashed one is not found for an app: restoring from the
    trash is the user's business); the caller ``require``s the action it needs."""
    try:
        acc = access_document(session, caller.principal, doc_id, Action.READ)
    except PermissionDenied:
        # seen but not readable: in the trash, or below a trashed folder (the user may restore it)
        raise NotFound("document not found") from None
    if acc.document.status == "deleted" or acc.document.type != "page":
        raise NotFound("document not found")
    return acc


def _chunks(session: Session, doc: Any, lo: int | None, hi: int | None) -> list[dict[str, Any]]:
    q = select(DocumentChunk).where(
        col(DocumentChunk.document_id) == doc.id, col(DocumentChunk.version_id) == doc.current_version_id
    )
    if lo is not None:
        q = q.where(col(DocumentChunk.ordinal) >= lo)
    if hi is not None:
        q = q.where(col(DocumentChunk.ordinal) <= hi)
    rows = session.exec(q.order_by(col(DocumentChunk.ordinal))).all()
    return [{"index": c.ordinal, "text": c.content_markdown, "headingPath": list(c.heading_path)} for c in rows]


def _doc_out(session: Session, caller: AppCaller, loc: RC.Loc, doc: Any, *, body: bool = True) -> dict[str, Any]:
    kb_id, folder = loc.collection()
    out: dict[str, Any] = {
        "ref": caller.ref(R.DOCUMENT, doc.id),
        "title": doc.title,
        "collection": coll_ref(caller, kb_id, folder),
        "key": doc.external_key,
        "meta": doc.meta or {},
        "updatedAt": doc.updated_at,
        "createdAt": doc.created_at,
    }
    if body:
        cur = current_version(session, doc)
        if is_index_only(doc.meta):  # the text it was given, not Markdown (docs/apps.md#api)
            out["text"] = plaintext.from_markdown(cur.markdown if cur else "")
            out["sourceUri"] = doc.meta["sourceUri"]
        else:
            out["body"] = cur.markdown if cur else ""
    return out


def _refuse_markdown_over_text(meta: dict[str, Any] | None, body: str | None) -> None:
    """A ``body`` (Markdown) without ``meta`` on an index-only document would leave it marked
    index-only around Markdown; it is rewritten with ``text`` (or with ``meta`` to make it an
    ordinary page). ``meta is None`` at the caller: a text write always carries its meta."""
    if body is not None and is_index_only(meta):
        raise ValidationError("this document is index-only: send text and sourceUri (or a new meta)", field="body")


def documents_get(
    session: Session, caller: AppCaller, ref: str, *, range_from: int | None = None, range_to: int | None = None
) -> dict[str, Any]:
    """The whole document, or its chunks ``from``..``to`` (inclusive, by chunk index)."""
    _, doc_id = caller.read_ref(ref, R.DOCUMENT, "document")
    doc = _access_page(session, caller, doc_id).document
    loc = RC.locate(session, [doc_id])[doc_id]
    RC.check(caller, "read", loc.knowledge_base_id, loc.chain)
    if range_from is None and range_to is None:
        return _doc_out(session, caller, loc, doc)
    out = _doc_out(session, caller, loc, doc, body=False)
    out["chunks"] = _chunks(session, doc, range_from, range_to)
    return out


def documents_get_by_key(session: Session, caller: AppCaller, collection: str, key: str) -> dict[str, Any] | None:
    coll = resolve_collection(session, caller, collection, "read")
    loc = RC.locate_key(session, coll.knowledge_base_id, key)
    if loc is None or loc.status == "deleted":
        return None
    try:
        doc = access_document(session, caller.principal, loc.id, Action.READ).document
    except (NotFound, PermissionDenied):
        # seen but not readable: below a folder in the trash (as ``_access_page``: not found)
        return None
    if not RC.reaches(caller, "read", loc.knowledge_base_id, loc.chain):
        return None
    return _doc_out(session, caller, loc, doc)


def parse_time(value: Any, end: bool, field: str) -> datetime | None:
    """Milliseconds or ISO; a date alone means that whole day (its end for ``to``)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValidationError(f"{field} must be milliseconds or an ISO date", field=field)
    if isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(value / 1000, UTC)
        except (OverflowError, OSError, ValueError):  # past the year 9999, NaN, infinity
            raise ValidationError(f"{field} is out of range as milliseconds: {value!r:.40}", field=field) from None
    if isinstance(value, str):
        v = value.strip()
        if _DATE.match(v):
            try:
                d = date.fromisoformat(v)
            except ValueError:  # shaped like a date, not one (2026-13-45)
                raise ValidationError(f"{field} is not a date: {v!r}", field=field) from None
            # the end of the day is its last microsecond, not the next day's start minus one:
            # 9999-12-31 has no next day (OverflowError)
            return datetime.combine(d, time.max if end else time.min, UTC)
        try:
            dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            raise ValidationError(f"{field} must be milliseconds or an ISO date", field=field) from None
        return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
    raise ValidationError(f"{field} must be milliseconds or an ISO date", field=field)


def time_range(raw: dict[str, Any] | None) -> tuple[datetime | None, datetime | None]:
    """``from``/``to`` as given: a bound that is present counts, ``0`` (the epoch) included."""
    if not raw:
        return None, None
    unknown = set(raw) - {"from", "to"}
    if unknown:
        raise ValidationError("timeRange has from and to", field="timeRange")
    return parse_time(raw.get("from"), False, "timeRange.from"), parse_time(raw.get("to"), True, "timeRange.to")


# the date a document stands for: meta.date (diary) when it is a valid date, else when it was
# updated (trap: a user may store any text there, e.g. 2026-02-31: it must not break the query)
DOC_TIME = (
    "CASE WHEN d.metadata->>'date' ~ '^\\d{4}-\\d{2}-\\d{2}' "
    "AND pg_input_is_valid(substring(d.metadata->>'date' from 1 for 10), 'date') "
    "THEN (substring(d.metadata->>'date' from 1 for 10))::date::timestamp AT TIME ZONE 'UTC' "
    "ELSE d.updated_at END"
)


def _time_range_conds(conds: list[str], params: dict[str, Any], lo: datetime | None, hi: datetime | None) -> None:
    """``timeRange`` on a document's date (``meta.date``, else its update time), for both the
    listing and the newest-first search."""
    if lo is not None:
        conds.append(f"({DOC_TIME}) >= :lo")
        params["lo"] = lo
    if hi is not None:
        conds.append(f"({DOC_TIME}) <= :hi")
        params["hi"] = hi


def documents_list(
    session: Session,
    caller: AppCaller,
    collection: str,
    *,
    time_from: Any = None,
    time_to: Any = None,
    limit: int = 200,
) -> list[dict[str, Any]]:
    """Pages directly in the collection (not in its sub-collections), newest first, each with
    ``updatedAt``. A named collection that is not granted is a single-object failure."""
    coll = resolve_collection(session, caller, collection, "read")
    lo, hi = time_range({"from": time_from, "to": time_to})
    limit = max(1, min(int(limit), 1000))
    conds = ["d.knowledge_base_id = :kb", "d.type = 'page'", "d.status <> 'deleted'"]
    params: dict[str, Any] = {"kb": coll.knowledge_base_id, "lim": limit}
    if coll.folder_id is None:
        conds.append("d.parent_id IS NULL")
    else:
        conds.append("d.parent_id = :parent")
        params["parent"] = coll.folder_id
    _time_range_conds(conds, params, lo, hi)
    # the read rule inside the statement (``openkb.permissions.sql``), so LIMIT counts readable
    # pages only: newer pages the user may not read do not crowd out the ones they may
    rows = session.execute(
        text(
            f"WITH RECURSIVE rp_candidates AS (SELECT d.id FROM documents d WHERE {' AND '.join(conds)}),\n"
            f"{READABLE_CTES}\n"
            f"SELECT d.id, d.title, d.external_key, d.metadata, d.updated_at, d.created_at FROM documents d "
            f"JOIN rp_readable r ON r.id = d.id ORDER BY ({DOC_TIME}) DESC, d.id LIMIT :lim"
        ).bindparams(*READABLE_BINDS),
        params | readable_params(caller.principal),
    ).all()
    cref = coll_ref(caller, coll.knowledge_base_id, coll.folder_id)
    return [
        {
            "ref": caller.ref(R.DOCUMENT, r.id),
            "title": r.title,
            "collection": cref,
            "key": r.external_key,
            "meta": r.metadata or {},
            "updatedAt": r.updated_at,
            "createdAt": r.created_at,
        }
        for r in rows
    ]


def documents_delete(
    session: Session, caller: AppCaller, ref: str, *, run_id: str | None = None, settings: Settings | None = None
) -> dict[str, Any]:
    """To the trash (revertible from the change log)."""
    _, doc_id = caller.read_ref(ref, R.DOCUMENT, "document")
    _access_page(session, caller, doc_id)
    loc = RC.locate(session, [doc_id])[doc_id]
    RC.check(caller, "write", loc.knowledge_base_id, loc.chain)
    _require_own_or_manage(caller, loc)
    quotas.charge(session, caller, 0, settings)
    actor = actor_for(caller, run_id)
    trash_document(session, actor, doc_id)
    return {"status": "deleted", "ref": ref, "runId": str(actor.run_id)}


# --- search -----------------------------------------------------------------------------------


def granted_read_roots(
    session: Session, caller: AppCaller, collections: list[str] | None
) -> list[tuple[uuid.UUID, uuid.UUID | None]]:
    """Where a search looks: the named collections that are granted (others are left out, as a
    query method must), or every granted read root."""
    granted = [(kb, doc) for kb, doc, p in RC.roots(caller, "read") if p in caller.grants]
    if collections is None:
        return granted
    out = []
    for c in collections:
        try:
            coll = resolve_collection(session, caller, c, "read")
        except (NotFound, KnowledgePermissionMissing):
            continue
        out.append((coll.knowledge_base_id, coll.folder_id))
    return out


def search(
    ctx: AppContext,
    session: Session,
    caller: AppCaller,
    query: str,
    *,
    collections: list[str] | None = None,
    time_from: Any = None,
    time_to: Any = None,
    limit: int = 10,
) -> list[dict[str, Any]]:
    """Full-text + semantic search over the granted collections and their sub-collections;
    ``timeRange`` on ``meta.date`` (else the update time); an empty query lists newest first.
    Results the app may not read are left out without a trace."""
    from openkb.retrieval.service import search_documents

    if not isinstance(limit, int) or not 1 <= limit <= 100:
        raise ValidationError("limit must be between 1 and 100", field="limit")
    lo, hi = time_range({"from": time_from, "to": time_to})
    roots = granted_read_roots(session, caller, collections)
    if not roots:
        return []
    kb_ids = sorted({kb for kb, _ in roots}, key=str)
    q = (query or "").strip()
    if not q:
        return _recent(session, caller, roots, kb_ids, lo, hi, limit)
    hits = search_documents(ctx, session, caller.principal, q, knowledge_base_ids=kb_ids, top_k=min(100, limit * 3))
    ids = [uuid.UUID(h.document_id) for h in hits]
    keep = inside_roots(session, caller, roots, ids, lo, hi)
    out = []
    for h in hits:
        did = uuid.UUID(h.document_id)
        loc = keep.get(did)
        if loc is None:
            continue
        kb_id, folder = loc.collection()
        out.append(
            {
                "document": caller.ref(R.DOCUMENT, did),
                "title": h.title,
                "collection": coll_ref(caller, kb_id, folder),
                "text": plaintext.from_markdown(h.content) if is_index_only(h.metadata) else h.content,
                "locator": {"headingPath": h.heading_path},
                "meta": h.metadata,
                "score": h.score,
            }
        )
        if len(out) >= limit:
            break
    return out


def inside_roots(
    session: Session,
    caller: AppCaller,
    roots: list[tuple[uuid.UUID, uuid.UUID | None]],
    ids: list[uuid.UUID],
    lo: datetime | None,
    hi: datetime | None,
) -> dict[uuid.UUID, RC.Loc]:
    """The documents among ``ids`` inside one of ``roots`` (and the time range)."""
    locs = RC.locate(session, ids)
    times: dict[uuid.UUID, datetime] = {}
    if (lo or hi) and ids:
        times = {
            r.id: r.doc_time
            for r in session.execute(
                text(f"SELECT d.id, ({DOC_TIME}) AS doc_time FROM documents d WHERE d.id = ANY(:ids)"), {"ids": ids}
            )
        }
    out = {}
    for did, loc in locs.items():
        if not any(kb == loc.knowledge_base_id and (f is None or f in loc.chain) for kb, f in roots):
            continue
        t = times.get(did)
        if (lo and (t is None or t < lo)) or (hi and (t is None or t > hi)):
            continue
        out[did] = loc
    return out


def _recent(
    session: Session,
    caller: AppCaller,
    roots: list[tuple[uuid.UUID, uuid.UUID | None]],
    kb_ids: list[uuid.UUID],
    lo: datetime | None,
    hi: datetime | None,
    limit: int,
) -> list[dict[str, Any]]:
    """An empty query: the newest pages inside the roots the user may read. The roots (a whole
    knowledge base, or everything below a folder) and the read rule (``openkb.permissions.sql``)
    are conditions of the statement, so pages elsewhere in the knowledge base or unreadable do
    not use up ``limit``. The search check (``for_search``: also no archived knowledge base) and
    ``inside_roots`` still decide last; whatever they drop is made up by the next batch, read
    after the last row of the one before."""
    whole = [kb for kb, f in roots if f is None]
    folders = [f for _, f in roots if f is not None]
    conds = [
        "d.knowledge_base_id = ANY(:kbs)", "d.type = 'page'", "d.status IN ('published', 'draft')",
        "(d.knowledge_base_id = ANY(:whole) OR d.parent_id IN (SELECT id FROM below))",
    ]  # fmt: skip
    params: dict[str, Any] = {"kbs": kb_ids, "whole": whole, "folders": folders, "lim": limit}
    _time_range_conds(conds, params, lo, hi)
    out: list[dict[str, Any]] = []
    after: tuple[datetime, datetime, uuid.UUID] | None = None
    while len(out) < limit:
        where = list(conds)
        if after is not None:
            where.append(f"(({DOC_TIME}), d.updated_at, d.id) < (:at, :au, :ai)")
            params |= {"at": after[0], "au": after[1], "ai": after[2]}
        rows = session.execute(_recent_statement(" AND ".join(where)), params | readable_params(caller.principal)).all()
        ids = [r.id for r in rows]
        readable = set(filter_readable_documents(session, caller.principal, ids, for_search=True))
        inside = inside_roots(session, caller, roots, [i for i in ids if i in readable], None, None)
        for r in rows:
            loc = inside.get(r.id)
            if loc is None:
                continue
            kb_id, folder = loc.collection()
            text_ = plaintext.from_markdown(r.markdown or "") if is_index_only(r.metadata) else r.markdown or ""
            out.append(
                {
                    "document": caller.ref(R.DOCUMENT, r.id),
                    "title": r.title,
                    "collection": coll_ref(caller, kb_id, folder),
                    "text": text_[:1000],
                    "locator": None,
                    "meta": r.metadata or {},
                }
            )
        if len(rows) < limit:
            break
        after = (rows[-1].doc_time, rows[-1].updated_at, rows[-1].id)
    return out[:limit]


def _recent_statement(where: str) -> Any:
    """``_recent``'s statement for one set of conditions (they vary with the time range and the
    batch): ``below`` is every document under a granted folder root."""
    return text(
        "WITH RECURSIVE below(id) AS (SELECT unnest(CAST(:folders AS uuid[])) UNION "
        "SELECT c.id FROM documents c JOIN below b ON c.parent_id = b.id),\n"
        f"rp_candidates AS (SELECT d.id FROM documents d WHERE {where}),\n{READABLE_CTES}\n"
        f"SELECT d.id, d.title, d.metadata, v.markdown, ({DOC_TIME}) AS doc_time, d.updated_at FROM documents d "
        "JOIN rp_readable r ON r.id = d.id LEFT JOIN document_versions v ON v.id = d.current_version_id "
        "ORDER BY doc_time DESC, d.updated_at DESC, d.id DESC LIMIT :lim"
    ).bindparams(
        bindparam("kbs", type_=ARRAY(PGUUID(as_uuid=True))),
        bindparam("whole", type_=ARRAY(PGUUID(as_uuid=True))),
        bindparam("folders", type_=ARRAY(PGUUID(as_uuid=True))),
        *READABLE_BINDS,
    )
