"""Export a knowledge base, a folder or a page as a zip of Markdown files with their assets
(docs/export.md).

Two steps, so an adapter can refuse before it starts sending bytes:

1. :func:`plan_export` (one unit of work): authorize, decide what goes in, name every file, size
   it, write the audit row. Everything a stream needs is in the plan (ids, version ids, paths,
   blob keys) — no Markdown body is loaded here.
2. :func:`iter_export` streams the zip: bodies are read in small batches of the planned version
   ids, blobs chunk by chunk, and the zip is written into a small buffer that is handed out as it
   fills. Nothing is ever built whole in memory, whatever the size of the export.

What goes in (docs/permissions.md): only what the caller may read, decided by the one
permission service (``access_tree``): an unreadable page or folder is left out and *counted*,
never named. Unpublished pages (drafts, archived; their readers are editors and above) go in
only with ``include_drafts``. A readable page whose folder is left out is placed under its
nearest exported ancestor, as the tree shows it (docs/permissions.md#the-folder-gate-rule).
Share-link visitors, anonymous callers and keys cannot export: an export is a copy that leaves
the instance, so it needs an account.

Deterministic: members in path order, fixed timestamps and attributes, sorted JSON and YAML keys
and no export time in the manifest, so exporting the same content twice gives the same bytes.

Trap: the plan is decided in one transaction and the stream may read in another (the HTTP
response streams after the request's unit of work committed). It reads exactly the planned
version ids, which never change once written, so a save in between does not mix two states;
an asset deleted in between ends the stream with an error the client sees as a broken download.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import posixpath
import re
import uuid
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from sqlalchemy import text
from sqlmodel import Session, col, select

from openkb.audit import record_audit
from openkb.config import Settings, get_settings
from openkb.errors import ExportTooLarge, NotFound, PermissionDenied, ValidationError
from openkb.exporting.format import ASSETS_DIR, FORMAT, FORMAT_VERSION, MANIFEST
from openkb.exporting.links import rewrite_links
from openkb.exporting.names import Namer, safe_name
from openkb.importing.service import find_knowledge_base, operator_actor
from openkb.models import Document, DocumentAsset, KnowledgeBase
from openkb.permissions import Action, Principal, access_knowledge_base, access_subtree, access_tree
from openkb.permissions.service import filter_readable_documents
from openkb.storage import BlobStore

__all__ = [
    "ASSETS_DIR",
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "ExportPlan",
    "Target",
    "export_tree",
    "front_matter",
    "iter_export",
    "plan_export",
]

ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the zip format's earliest time: no clock in the bytes
CHUNK = 1 << 16
_LEVEL = 1  # deflate level of the Markdown: 3x faster than the default 6, a few % larger
_BATCH = 200  # bodies per query while streaming
_SEVERITY = {"published": 0, "draft": 1, "archived": 2, "deleted": 3}
# already compressed: stored as they are (deflating them again costs time and saves nothing)
_STORED_PREFIXES = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "video/", "audio/")
_STORED_TYPES = {"application/zip", "application/gzip", "application/x-7z-compressed", "application/pdf"}
_LINK = "openkb://document/"
_YAML_RAW = re.compile("[\x7f-\x9f\u2028\u2029\ufffe\uffff\ud800-\udfff]")


@dataclass(frozen=True)
class Target:
    kind: str  # knowledge_base | document
    id: uuid.UUID


@dataclass
class ExportDoc:
    id: str
    type: str  # page | folder
    title: str
    status: str
    parent: str | None  # the exported parent's id (nearest exported ancestor), None at the top
    path: str  # "a/b.md" for a page, "a/b/" for a folder
    dir: str  # where its children go: "a/b/"
    version_id: str | None = None
    version_no: int | None = None
    markdown_hash: str | None = None
    size: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    assets: list[str] = field(default_factory=list)  # asset paths this page has (links and attachments)
    sha256: str | None = None  # of the written .md file, filled while streaming
    bytes: int = 0


@dataclass
class ExportAsset:
    path: str
    sha256: str
    size: int
    mime_type: str
    filename: str | None
    object_key: str
    ids: list[str] = field(default_factory=list)


@dataclass
class ExportPlan:
    source: dict[str, Any]
    include_drafts: bool
    docs: list[ExportDoc]
    assets: dict[str, ExportAsset]
    left_out: dict[str, int]
    total_bytes: int
    filename: str
    links: dict[str, str] = field(default_factory=dict)  # document id -> path
    asset_paths: dict[str, str] = field(default_factory=dict)  # asset id -> path
    done_bytes: int = 0
    written: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "pages": sum(1 for d in self.docs if d.type == "page"),
            "folders": sum(1 for d in self.docs if d.type == "folder"),
            "assets": len(self.assets),
            "bytes": self.total_bytes,
            "left_out": dict(self.left_out),
            "include_drafts": self.include_drafts,
            "filename": self.filename,
        }


# -- plan --------------------------------------------------------------------------------------


def _require_account(principal: Principal) -> None:
    if principal.kind != "user" or principal.user_id is None or principal.share_link_id is not None:
        raise PermissionDenied("exporting needs a signed-in account; share links and visitors can only read")


def plan_export(
    session: Session,
    principal: Principal,
    target: Target,
    *,
    include_drafts: bool = False,
    max_bytes: int | None = None,
    settings: Settings | None = None,
) -> ExportPlan:
    """Decide and size an export of ``target`` for ``principal``; audited as ``content.exported``.

    NotFound when the target does not exist or the caller cannot read it (the same answer);
    ExportTooLarge past ``max_bytes`` (default: the ``max_export_bytes`` setting); PermissionDenied for share-link visitors and anonymous
    callers."""
    _require_account(principal)
    top: Document | None = None
    if target.kind == "knowledge_base":
        kb = access_knowledge_base(session, principal, target.id).knowledge_base
        tree = access_tree(session, principal, kb.id, (Action.READ,))
    elif target.kind == "document":
        # the document is readable; its knowledge base need not be (a custom page can be more
        # open than its knowledge base: docs/permissions.md#the-folder-gate-rule)
        acc, tree = access_subtree(session, principal, target.id, (Action.READ,))
        top = acc.document
        kb = session.get(KnowledgeBase, top.knowledge_base_id)
        if kb is None:
            raise NotFound("document not found")
    else:
        raise NotFound("nothing to export")
    rows = session.exec(
        select(
            Document.id,
            Document.parent_id,
            Document.type,
            Document.title,
            Document.status,
            Document.current_version_id,
            Document.meta,
            Document.tags,
        )
        .where(col(Document.knowledge_base_id) == kb.id)
        .order_by(col(Document.sort_order), col(Document.created_at), col(Document.id))
    ).all()
    by_id = {str(r[0]): r for r in rows}
    children: dict[str | None, list[str]] = {}
    for r in rows:
        pid = str(r[1]) if r[1] is not None and str(r[1]) in by_id else None
        children.setdefault(pid, []).append(str(r[0]))

    left_out = {"unreadable": 0, "drafts": 0, "archived": 0, "assets_unreadable": 0}
    docs: list[ExportDoc] = []
    exported: dict[str, ExportDoc] = {}
    namers: dict[str | None, Namer] = {None: Namer((ASSETS_DIR, MANIFEST))}
    start = [str(top.id)] if top is not None else children.get(None, [])
    start_status = _effective_status(session, top) if top is not None else "published"
    if top is not None and start_status != "published" and not include_drafts:
        raise ValidationError(f"this document is {start_status}: export it with include_drafts", field="include_drafts")

    # depth-first in tree order; ``up``: the nearest exported ancestor, ``status``: the most hidden
    # status on the path so far (a draft folder makes its subtree drafts: docs/permissions.md#status)
    stack: list[tuple[str, str | None, str]] = [(d, None, start_status) for d in reversed(start)]
    while stack:
        did, up, inherited = stack.pop()
        r = by_id[did]
        own = r[4]
        status = own if _SEVERITY.get(own, 0) > _SEVERITY[inherited] else inherited
        if status == "deleted":
            continue  # the trash is not content
        here = up
        if not tree.allows(did, Action.READ):
            left_out["unreadable"] += 1
        elif status != "published" and not include_drafts:
            left_out["drafts" if status == "draft" else "archived"] += 1
        else:
            parent_dir = exported[up].dir if up is not None else ""
            stem = namers.setdefault(up, Namer()).take(r[3])
            is_page = r[2] == "page"
            d = ExportDoc(
                id=did,
                type=r[2],
                title=r[3],
                status=own,
                parent=up,
                path=parent_dir + stem + (".md" if is_page else "/"),
                dir=parent_dir + stem + "/",
                version_id=str(r[5]) if is_page and r[5] is not None else None,
                meta=dict(r[6] or {}),
                tags=list(r[7] or []),
            )
            docs.append(d)
            exported[did] = d
            here = did
        for child in reversed(children.get(did, [])):
            stack.append((child, here, status))

    _load_versions(session, docs)
    assets = _plan_assets(session, principal, kb.id, docs, left_out)
    total = sum(d.size for d in docs) + sum(a.size for a in assets.values())
    max_bytes = max_bytes or (settings or get_settings()).max_export_bytes
    if total > max_bytes:
        raise ExportTooLarge(
            f"this export holds {total:,} bytes of pages and assets; the cap is {max_bytes:,} bytes. "
            "Export its folders one at a time (openkb export FOLDER_ID, GET /api/documents/{id}/export)"
            + (" or leave the drafts out" if include_drafts else ""),
            limit="max_export_bytes",
            max=max_bytes,
            size=total,
        )
    title = top.title if top is not None else kb.title
    plan = ExportPlan(
        source={
            "type": target.kind,
            "id": str(target.id),
            "knowledge_base_id": str(kb.id),
            "title": title,
        },
        include_drafts=include_drafts,
        docs=docs,
        assets=assets,
        left_out=left_out,
        total_bytes=total,
        filename=safe_name(title) + ".zip",
        links={d.id: d.path for d in docs},
        asset_paths={aid: a.path for a in assets.values() for aid in a.ids},
    )
    s = plan.summary()
    record_audit(
        session,
        tenant_id=kb.tenant_id,
        actor=principal,
        action="content.exported",
        object_type=target.kind,
        object_id=target.id,
        metadata={k: s[k] for k in ("pages", "folders", "assets", "bytes", "left_out", "include_drafts")}
        | {"knowledge_base_id": str(kb.id)},
    )
    return plan


def _effective_status(session: Session, doc: Document) -> str:
    status, seen, cur = doc.status, 0, doc.parent_id
    while cur is not None and seen < 1000:
        row = session.exec(select(Document.status, Document.parent_id).where(col(Document.id) == cur)).first()
        if row is None:
            break
        if _SEVERITY.get(row[0], 0) > _SEVERITY.get(status, 0):
            status = row[0]
        cur, seen = row[1], seen + 1
    return status


def _load_versions(session: Session, docs: list[ExportDoc]) -> None:
    # ids travel as text both ways: parsing thousands of uuid objects costs more than the query
    by_version = {d.version_id: d for d in docs if d.version_id}
    ids = list(by_version)
    for i in range(0, len(ids), 1000):
        rows = session.execute(
            text(
                "SELECT id::text, version_no, markdown_hash, octet_length(markdown) FROM document_versions "
                "WHERE id = ANY(CAST(:ids AS uuid[]))"
            ),
            {"ids": ids[i : i + 1000]},
        ).all()
        for vid, no, h, size in rows:
            d = by_version[vid]
            d.version_no, d.markdown_hash, d.size = no, h, int(size or 0)


def _asset_file_name(a: DocumentAsset) -> str:
    if a.filename:
        return safe_name(a.filename)
    ext = mimetypes.guess_extension(a.mime_type or "") or ""
    return "asset" + ext


def _plan_assets(
    session: Session, principal: Principal, kb_id: uuid.UUID, docs: list[ExportDoc], left_out: dict[str, int]
) -> dict[str, ExportAsset]:
    """Each page's assets: those attached to it, and those its body shows (``asset://``) that the
    caller may read (attached to a readable document, or their own unattached upload)."""
    pages = {d.id: d for d in docs if d.type == "page"}
    wanted: dict[str, set[str]] = {pid: set() for pid in pages}
    rows: dict[str, DocumentAsset] = {}
    attached = select(DocumentAsset).join(Document, col(Document.id) == col(DocumentAsset.document_id))
    for a in session.exec(attached.where(col(Document.knowledge_base_id) == kb_id)):
        if (pid := str(a.document_id)) in wanted:  # the knowledge base's assets, of exported pages
            rows[str(a.id)] = a
            wanted[pid].add(str(a.id))
    # the ids the bodies refer to, found by PostgreSQL: no body crosses the wire for this
    by_version = {d.version_id: d.id for d in pages.values() if d.version_id}
    vids = list(by_version)
    referenced: dict[str, set[str]] = {}
    for i in range(0, len(vids), 1000):
        found = session.execute(
            text(
                "SELECT v.id::text, lower(m[1]) FROM document_versions v, "
                "regexp_matches(v.markdown, 'asset://([0-9a-fA-F-]{36})', 'g') AS m "
                "WHERE v.id = ANY(CAST(:ids AS uuid[])) AND strpos(v.markdown, 'asset://') > 0"
            ),
            {"ids": vids[i : i + 1000]},
        ).all()
        for vid, aid in found:
            referenced.setdefault(by_version[vid], set()).add(aid)
    others = {aid for ids in referenced.values() for aid in ids} - set(rows)
    valid: list[uuid.UUID] = []
    for aid in others:
        try:
            valid.append(uuid.UUID(aid))
        except ValueError:
            continue
    if valid:
        extra = session.exec(select(DocumentAsset).where(col(DocumentAsset.id).in_(valid))).all()
        docs_of = {a.document_id for a in extra if a.document_id is not None}
        readable = filter_readable_documents(session, principal, docs_of) if docs_of else set()
        for a in extra:
            if a.document_id is not None:
                ok = a.document_id in readable
            else:
                ok = a.created_by == principal.user_id and a.tenant_id == principal.tenant_id
            if ok:
                rows[str(a.id)] = a
    unreadable: set[str] = set()
    for pid, ids in referenced.items():
        for aid in ids:
            if aid in rows:
                wanted[pid].add(aid)
            else:
                unreadable.add(aid)
    left_out["assets_unreadable"] = len(unreadable)
    out: dict[str, ExportAsset] = {}
    for pid, ids in wanted.items():
        for aid in ids:
            a = rows[aid]
            sha = a.sha256 or hashlib.sha256(aid.encode()).hexdigest()
            path = f"{ASSETS_DIR}/{sha[:16]}/{_asset_file_name(a)}"
            e = out.get(path)
            if e is None:
                e = out[path] = ExportAsset(path, a.sha256 or "", a.size_bytes, a.mime_type, a.filename, a.object_key)
            if aid not in e.ids:
                e.ids.append(aid)
            pages[pid].assets.append(path)
    for e in out.values():
        e.ids.sort()
    for d in pages.values():
        d.assets = sorted(set(d.assets))
    return out


# -- the files ---------------------------------------------------------------------------------


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _sorted(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _str(value: str) -> str:
    # JSON's string syntax is YAML's double-quoted one, except for what YAML refuses to read raw
    # (C1 controls, non-characters) or folds as a line break (NEL, U+2028/9): \u escapes
    return _YAML_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False))


def _flow(value: Any) -> str:
    """``value`` (JSON data) as YAML flow: JSON's syntax, with floats YAML 1.1 reads as floats."""
    if isinstance(value, (dict, list)):
        out = json.dumps(value, ensure_ascii=False, sort_keys=True)
        if "e+" not in out and "e-" not in out:  # no float in exponent form (YAML 1.1 needs a dot)
            return _YAML_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", out)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        r = repr(value)
        return r.replace("e", ".0e") if "e" in r and "." not in r else r
    if isinstance(value, str):
        return _str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_str(str(k))}: {_flow(value[k])}" for k in sorted(value, key=str)) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return _str(str(value))


def front_matter(title: str, status: str, tags: list[str], meta: dict[str, Any]) -> str:
    """YAML front matter: ``title``, ``status``, ``tags``, ``metadata`` in this order, each on one
    line in flow style (metadata's keys sorted), so the same page always gives the same bytes and
    any YAML reader gets the values back exactly (a block-style dumper is 10x slower and folds
    long titles)."""
    return f"---\ntitle: {_flow(title)}\nstatus: {_flow(status)}\ntags: {_flow(list(tags))}\nmetadata: {_flow(meta)}\n---\n"


def _rel(path: str, from_dir: str) -> str:
    rel = posixpath.relpath(path.rstrip("/"), from_dir.rstrip("/") or ".")
    return rel + ("/" if path.endswith("/") else "")


def page_markdown(body: str, doc: ExportDoc, plan: ExportPlan) -> str:
    """The stored body with ``openkb://document/<id>`` and ``asset://<id>`` of exported objects
    as relative links; links to what is not in the export stay as they are."""
    here = posixpath.dirname(doc.path)

    def resolve(u: str) -> str | None:
        if u.startswith(_LINK):
            ref, hash_, frag = u[len(_LINK) :].partition("#")
            path = plan.links.get(ref.strip("/").lower())
            return None if path is None else _rel(path, here) + hash_ + frag
        if u.startswith("asset://"):
            ref = u[len("asset://") :].split("#", 1)[0].split("?", 1)[0].lower()
            path = plan.asset_paths.get(ref)
            return None if path is None else _rel(path, here)
        return None

    return rewrite_links(body, resolve)


def manifest_bytes(plan: ExportPlan) -> bytes:
    docs = []
    for d in plan.docs:
        e: dict[str, Any] = {"path": d.path, "type": d.type, "id": d.id, "parent_id": d.parent, "title": d.title}
        e["status"] = d.status
        if d.type == "page":
            e |= {
                "version_id": d.version_id,
                "version_no": d.version_no,
                "markdown_sha256": d.markdown_hash,
                "sha256": d.sha256,
                "bytes": d.bytes,
                "assets": d.assets,
            }
        else:
            e |= {"tags": d.tags, "metadata": _sorted(d.meta)}
        docs.append(e)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "source": plan.source,
        "include_drafts": plan.include_drafts,
        "documents": docs,
        "assets": [
            {
                "path": a.path,
                "sha256": a.sha256,
                "bytes": a.size,
                "mime_type": a.mime_type,
                "filename": a.filename,
                "ids": a.ids,
            }
            for a in sorted(plan.assets.values(), key=lambda a: a.path)
        ],
        "left_out": dict(sorted(plan.left_out.items())),
        "counts": {k: plan.summary()[k] for k in ("pages", "folders", "assets")},
    }
    # one document or asset per line: readable, diffable, and JSON's fast encoder (indent is slow)
    lines = []
    for k in sorted(manifest):
        v = manifest[k]
        if isinstance(v, list) and v:
            items = ",\n  ".join(json.dumps(x, ensure_ascii=False, sort_keys=True) for x in v)
            lines.append(f"{json.dumps(k)}: [\n  {items}\n ]")
        else:
            lines.append(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False, sort_keys=True)}")
    return ("{\n " + ",\n ".join(lines) + "\n}\n").encode()


# -- the zip -----------------------------------------------------------------------------------


class _Sink:
    """A write-only stream the zip writes into; the generator hands its bytes out as they come.
    No ``tell``/``seek``: zipfile then writes each member's sizes after its data (data
    descriptors), the form a zip written to a pipe has."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0

    def write(self, b: bytes) -> int:
        if b:
            self.parts.append(bytes(b))
            self.size += len(b)
        return len(b)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data = b"".join(self.parts)
        self.parts, self.size = [], 0
        return data


def _info(path: str, *, stored: bool = False) -> zipfile.ZipInfo:
    zi = zipfile.ZipInfo(path, ZIP_TIME)
    zi.create_system = 3  # unix, whatever the exporting machine is
    if path.endswith("/"):
        zi.external_attr = (0o40755 << 16) | 0x10
        zi.compress_type = zipfile.ZIP_STORED
    else:
        zi.external_attr = 0o100644 << 16
        zi.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    return zi


def _stored(mime: str) -> bool:
    return mime in _STORED_TYPES or mime.startswith(_STORED_PREFIXES)


def iter_export(
    session: Session,
    plan: ExportPlan,
    blobs: BlobStore,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[bytes]:
    """The zip's bytes, in pieces of about ``CHUNK``; ``progress(done, total)`` in planned bytes."""
    sink = _Sink()
    zf = zipfile.ZipFile(sink, "w", zipfile.ZIP_DEFLATED, allowZip64=True)
    members: list[tuple[str, str, Any]] = [(d.path, "folder", d) for d in plan.docs if d.type == "folder"]
    members += [(d.path, "page", d) for d in plan.docs if d.type == "page"]
    members += [(a.path, "asset", a) for a in plan.assets.values()]
    members.sort(key=lambda m: m[0])
    pages = [m[2] for m in members if m[1] == "page"]
    bodies: dict[str, str] = {}
    next_page = 0

    def tell() -> None:
        if progress is not None:
            progress(plan.done_bytes, plan.total_bytes)

    for path, kind, item in members:
        if kind == "folder":
            zf.writestr(_info(path), b"")
        elif kind == "page":
            if item.id not in bodies:
                batch = pages[next_page : next_page + _BATCH]
                next_page += len(batch)
                bodies = _bodies(session, batch)
            body = page_markdown(bodies.pop(item.id, ""), item, plan)
            data = (front_matter(item.title, item.status, item.tags, item.meta) + "\n" + body).encode()
            item.sha256, item.bytes = hashlib.sha256(data).hexdigest(), len(data)
            zf.writestr(_info(path), data, compresslevel=_LEVEL)
            plan.done_bytes += item.size
        else:
            try:
                chunks = blobs.open(item.object_key)
            except NotFound:
                # the row outlived its blob (a restore without the blob store, a deleted file):
                # the export goes on without it, and the manifest counts it
                plan.left_out["assets_missing"] = plan.left_out.get("assets_missing", 0) + 1
                del plan.assets[path]
                continue
            with zf.open(_info(path, stored=_stored(item.mime_type)), "w") as f:
                for chunk in chunks:
                    f.write(chunk)
                    plan.done_bytes += len(chunk)
                    if sink.size >= CHUNK:
                        tell()
                        yield sink.take()
        if sink.size >= CHUNK:
            tell()
            yield sink.take()
    zf.writestr(_info(MANIFEST), manifest_bytes(plan))
    zf.close()
    tell()
    yield sink.take()


def _bodies(session: Session, batch: list[ExportDoc]) -> dict[str, str]:
    by_version = {d.version_id: d.id for d in batch if d.version_id}
    if not by_version:
        return {}
    rows = session.execute(
        text("SELECT id::text, markdown FROM document_versions WHERE id = ANY(CAST(:ids AS uuid[]))"),
        {"ids": list(by_version)},
    ).all()
    return {by_version[vid]: md for vid, md in rows}


def export_tree(
    session: Session,
    principal: Principal,
    target: Target,
    out_stream: BinaryIO,
    blobs: BlobStore,
    *,
    include_drafts: bool = False,
    max_bytes: int | None = None,
    settings: Settings | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ExportPlan:
    """Plan, audit and write the whole zip to ``out_stream`` (any writable stream; it is never
    sought). Returns the plan (its ``summary()`` and ``written`` byte count)."""
    plan = plan_export(
        session, principal, target, include_drafts=include_drafts, max_bytes=max_bytes, settings=settings
    )
    for chunk in iter_export(session, plan, blobs, progress=progress):
        out_stream.write(chunk)
        plan.written += len(chunk)
    return plan


def operator_target(session: Session, ref: str, as_user: str | None) -> tuple[Target, Principal]:
    """What ``openkb export REF`` exports and as whom: ``ref`` is a document id, or a knowledge
    base id or slug; the export acts as ``as_user`` or the knowledge base's creator, whose
    permissions apply (the operator administers every tenant, but a read needs a reader)."""
    doc = None
    try:
        doc = session.get(Document, uuid.UUID(ref))
    except ValueError:
        pass
    if doc is not None:
        kb = session.get(KnowledgeBase, doc.knowledge_base_id)
        target = Target("document", doc.id)
    else:
        kb = find_knowledge_base(session, ref)
        target = Target("knowledge_base", kb.id)
    if kb is None:
        raise NotFound(f"nothing to export: no knowledge base or document {ref!r}")
    return target, operator_actor(session, kb, as_user, None).principal
