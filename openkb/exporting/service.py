"""Export a knowledge base, a folder or a page as a zip of Markdown files with their assets
(docs/export.md).

Two steps, so an adapter can refuse before it starts sending bytes:

1. :func:`plan_export` (one unit of work): authorize, decide what goes in, name every file, size
   it, write the audit row. Everything a stream needs is in the plan (ids, version ids, paths,
   blob keys) — no Markdown body is loaded here.
2. :func:`iter_export` streams the zip: bodies (with their export forms) are read in small
   batches of the planned version ids (by a reader thread, a batch ahead of the thread that writes
   the zip) and blobs chunk by chunk, and the zip is written into a small buffer handed out as it
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
import re
import unicodedata
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from sqlalchemy import text
from sqlmodel import Session, col, select

from openkb.audit import record_audit
from openkb.config import Settings, get_settings
from openkb.content.knowledge_bases import find_knowledge_base
from openkb.errors import ExportTooLarge, NotFound, PermissionDenied, ValidationError
from openkb.exporting.ahead import ahead
from openkb.exporting.format import ASSETS_DIR, FORMAT, FORMAT_VERSION, MANIFEST
from openkb.exporting.forms import FORM, ExportForm, make_form, stored_blocks
from openkb.exporting.links import rewrite_links
from openkb.exporting.names import (
    MAX_NAME_CHARS,
    MAX_PATH_CHARS,
    MAX_TOP_CHARS,
    Namer,
    fit,
    safe_name,
    units,
)
from openkb.exporting.zipwriter import Deflated, ZipStream
from openkb.importing.service import operator_actor
from openkb.markdown._inline import destination
from openkb.models import Document, KnowledgeBase
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


@dataclass(slots=True)
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
    line: str | None = None  # its manifest line, written once the page is (``_page_line``)


@dataclass(slots=True)
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
    principal: Principal | None = None  # whose reads decide the assets found while streaming
    max_bytes: int = 0
    # asset ids shown by a page but not exported -> the left_out key that counts them
    assets_left_out: dict[str, str] = field(default_factory=dict)
    done_bytes: int = 0
    written: int = 0
    # what the export's references resolve to, by the forms' keys ("d<document id>", "a<asset
    # id>"): the path each one points to
    ref_paths: dict[str, str] = field(default_factory=dict)
    # (path, from folder) -> the relative link as the body's destination and as its stored block
    dests: dict[tuple[str, str], tuple[bytes, bytes]] = field(default_factory=dict)

    def key_refs(self) -> None:
        """Fill ``ref_paths`` from the link maps (once the plan is made; shown assets add theirs)."""
        self.ref_paths = {"d" + k: v for k, v in self.links.items()}
        self.ref_paths.update(("a" + k, v) for k, v in self.asset_paths.items())

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
    audit: bool = True,
) -> ExportPlan:
    """Decide and size an export of ``target`` for ``principal``; audited as ``content.exported``
    (``audit=False`` only for a size preview that sends nothing: ``HEAD`` on the export routes).

    NotFound when the target does not exist or the caller cannot read it (the same answer);
    ExportTooLarge past ``max_bytes`` (default: the ``max_export_bytes`` setting); PermissionDenied
    for share-link visitors and anonymous callers.

    Trap: no body is read here. The assets a page *shows* from elsewhere (``asset://`` of an
    asset attached to another page, or an unattached upload) are found while streaming, where
    the bodies are read anyway; finding them here cost a second read of every body (half an
    export's time). So the size and the cap count the pages and their attached assets; an asset
    found while streaming that would pass the cap is left out and counted (docs/export.md)."""
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
    readable = tree.ids_allowing(Action.READ)
    # the tree with each page's current version (number, hash, size) in one statement; ids as
    # text both ways: parsing thousands of uuid objects costs more than the query; through the
    # session's own psycopg connection (same transaction, after its pending writes): plain
    # tuples, no result rows to wrap
    session.flush()
    with session.connection().connection.driver_connection.cursor() as cur:
        rows = cur.execute(_TREE_SQL, (str(kb.id),)).fetchall()
    if rows:
        # the metadata arrive as JSON text and are parsed in one call: a parse per row (what the
        # driver does with jsonb) cost ten times as much, most of it calls, not parsing
        metas = json.loads("[" + ",".join(r[5] or "null" for r in rows) + "]")
        rows = [(*r[:5], m, *r[6:]) for r, m in zip(rows, metas, strict=True)]
    by_id = {r[0]: r for r in rows}
    children: dict[str | None, list[str]] = {}
    for r in rows:
        children.setdefault(r[1] if r[1] in by_id else None, []).append(r[0])

    left_out = {"unreadable": 0, "drafts": 0, "archived": 0, "assets_unreadable": 0}
    start = [str(top.id)] if top is not None else children.get(None, [])
    start_status = _effective_status(session, top) if top is not None else "published"
    if top is not None and start_status != "published" and not include_drafts:
        raise ValidationError(f"this document is {start_status}: export it with include_drafts", field="include_drafts")

    # depth-first in tree order; ``up``: the nearest exported ancestor, ``status``: the most hidden
    # status on the path so far (a draft folder makes its subtree drafts: docs/permissions.md#status)
    chosen: list[tuple[str, str | None, str]] = []  # (id, exported parent, own status) in tree order
    stack: list[tuple[str, str | None, str]] = [(d, None, start_status) for d in reversed(start)]
    while stack:
        did, up, inherited = stack.pop()
        r = by_id[did]
        own = r[4]
        status = own if _SEVERITY.get(own, 0) > _SEVERITY[inherited] else inherited
        if status == "deleted":
            continue  # the trash is not content
        here = up
        if did not in readable:
            left_out["unreadable"] += 1
        elif status != "published" and not include_drafts:
            left_out["drafts" if status == "draft" else "archived"] += 1
        else:
            chosen.append((did, up, own))
            here = did
        for child in reversed(children.get(did, [])):
            stack.append((child, here, status))

    title = top.title if top is not None else kb.title
    stem = fit(safe_name(title), MAX_TOP_CHARS)  # the zip's name: the top folder once unzipped
    docs = _name_tree(chosen, by_id)
    assets = _plan_assets(session, kb.id, docs)
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
        filename=stem + ".zip",
        links={d.id: d.path for d in docs},
        asset_paths={aid: a.path for a in assets.values() for aid in a.ids},
        principal=principal,
        max_bytes=max_bytes,
    )
    if audit:
        s = plan.summary()
        record_audit(
            session,
            tenant_id=kb.tenant_id,
            actor=principal,
            action="content.exported",
            object_type=target.kind,
            object_id=target.id,
            metadata={k: s[k] for k in ("pages", "folders", "assets", "bytes", "include_drafts")}
            | {"left_out": {k: left_out[k] for k in ("unreadable", "drafts", "archived")}}
            | {"knowledge_base_id": str(kb.id)},
        )
    return plan


def _name_tree(chosen: list[tuple[str, str | None, str]], by_id: dict[str, Any]) -> list[ExportDoc]:
    """The exported documents with their paths, in tree order.

    Each name gets a budget that keeps every path under it within ``MAX_PATH_CHARS``, with a
    top folder of ``MAX_TOP_CHARS`` (reserved whatever the zip is called, so names depend on
    the tree alone: an export of an imported copy names the same). The budget is what the names
    under it need uncut, when that leaves room; else a fair share of what is left among the
    levels under it, so the deepest page of a deep tree still fits (docs/export.md#the-zip).
    Heights and needs are of the exported tree, for the same reason."""
    kids: dict[str | None, list[str]] = {}
    for did, up, _own in chosen:
        kids.setdefault(up, []).append(did)
    height: dict[str, int] = {}
    need: dict[str, int] = {}  # units the names under it take uncut (the longest path down)
    for did, _up, _own in reversed(chosen):  # children come after their parent in tree order
        below = kids.get(did)
        if below:
            height[did] = 1 + max(height[c] for c in below)
            need[did] = max(2 + min(len(by_id[c][3]), MAX_NAME_CHARS) + need[c] for c in below)
        else:
            height[did] = need[did] = 0
    room = MAX_PATH_CHARS - MAX_TOP_CHARS - 1 - len(".md")
    docs: list[ExportDoc] = []
    exported: dict[str, ExportDoc] = {}
    dir_units: dict[str | None, int] = {None: 0}
    namers: dict[str | None, Namer] = {None: Namer((ASSETS_DIR, MANIFEST))}
    for did, up, own in chosen:
        namer = namers.get(up)
        if namer is None:
            namer = namers[up] = Namer()
        left = room - dir_units[up]
        budget = max(left - need[did], left // (height[did] + 1) - 1)
        stem = namer.take(by_id[did][3], min(MAX_NAME_CHARS, budget))
        dir_units[did] = dir_units[up] + units(stem) + 1
        r = by_id[did]
        parent_dir = exported[up].dir if up is not None else ""
        is_page = r[2] == "page"
        here = parent_dir + stem
        # positional (a third cheaper than keywords, per page): id, type, title, status, parent,
        # path, dir, version_id, version_no, markdown_hash, size, meta, tags, assets; meta and
        # tags are the row's own objects (fresh from the driver): no copies
        if is_page:
            d = ExportDoc(
                did,
                "page",
                r[3],
                own,
                up,
                here + ".md",
                here + "/",
                r[7],
                r[8],
                r[9],
                int(r[10] or 0),
                r[5] or {},
                r[6] or [],
                [],
            )
        else:
            d = ExportDoc(
                did, r[2], r[3], own, up, here + "/", here + "/", None, None, None, 0, r[5] or {}, r[6] or [], []
            )
        docs.append(d)
        exported[did] = d
    return docs


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


def _asset_file_name(filename: str | None, mime_type: str | None) -> str:
    if filename:
        return safe_name(filename, keep_extension=True)
    ext = mimetypes.guess_extension(mime_type or "") or ""
    return "asset" + ext


# an asset row as the export needs it: id, document_id, object_key, filename, mime_type,
# size_bytes, sha256 (ids as text); ordered by content and name, so that names a case-insensitive
# file system would confuse are numbered alike in every export of the same content (a copy too)
_ASSET_COLS = "a.id::text, a.document_id::text, a.object_key, a.filename, a.mime_type, a.size_bytes, a.sha256"
_ATTACHED_SQL = text(
    f"SELECT {_ASSET_COLS} FROM document_assets a JOIN documents d ON d.id = a.document_id "
    "WHERE d.knowledge_base_id = CAST(:kb AS uuid) ORDER BY a.sha256, a.filename, a.id"
)
_BY_ID_SQL = text(
    f"SELECT {_ASSET_COLS}, a.created_by::text, a.tenant_id::text FROM document_assets a "
    "WHERE a.id = ANY(CAST(:ids AS uuid[])) ORDER BY a.id"
)
_TREE_SQL = (
    "SELECT d.id::text, d.parent_id::text, d.type, d.title, d.status, d.metadata::text, d.tags, "
    "v.id::text, v.version_no, v.markdown_hash, octet_length(v.markdown) "
    "FROM documents d LEFT JOIN document_versions v ON v.id = d.current_version_id "
    "WHERE d.knowledge_base_id = %s::uuid "
    "ORDER BY d.sort_order, d.created_at, d.id"
)


class _Assets(dict[str, ExportAsset]):
    """The export's assets by path, and each path case-folded (NFC, ``casefold``) -> the path."""

    def __init__(self) -> None:
        super().__init__()
        self.folded: dict[str, str] = {}


def _fold(path: str) -> str:
    return unicodedata.normalize("NFC", path).casefold()


def _numbered(name: str, n: int) -> str:
    """``logo (2).png``: the number before the extension, which the file keeps."""
    stem, ext = name, ""
    if "." in name[1:] and 1 < len(name) - name.rindex(".") <= 12:
        stem, ext = name[: name.rindex(".")], name[name.rindex(".") :]
    return fit(f"{stem} ({n}){ext}", MAX_NAME_CHARS, keep_extension=True)


def _add_asset(assets: dict[str, ExportAsset], row: Any) -> ExportAsset:
    """The asset's entry, ``assets/<sha256[:16]>/<name>``: one per content and file name (the
    same image attached to several pages is one file). Names are unique as a case-insensitive
    file system compares them: the same image attached as ``Logo.png`` and ``logo.png`` is
    ``Logo.png`` and ``logo (2).png`` (unzipped on Windows or macOS, one would overwrite the
    other); the manifest keeps each upload's own file name, which the import gives back."""
    aid, _doc, key, filename, mime, size, sha = row[:7]
    digest = sha or hashlib.sha256(aid.encode()).hexdigest()
    folder = f"{ASSETS_DIR}/{digest[:16]}/"
    name = _asset_file_name(filename, mime)
    folded = getattr(assets, "folded", None)
    if folded is None:  # a plain dict: index it now
        folded = {_fold(p): p for p in assets}
    n = 1
    while True:
        path = folder + (name if n == 1 else _numbered(name, n))
        taken = folded.get(_fold(path))
        if taken is None:
            e = assets[path] = ExportAsset(path, sha or "", int(size), mime, filename, key)
            folded[_fold(path)] = path
            break
        e = assets[taken]
        if taken == path and e.filename == filename:
            break
        n += 1
    if aid not in e.ids:
        e.ids.append(aid)
        e.ids.sort()
    return e


def _plan_assets(session: Session, kb_id: uuid.UUID, docs: list[ExportDoc]) -> dict[str, ExportAsset]:
    """The assets attached to the exported pages (each goes with its page)."""
    pages = {d.id: d for d in docs if d.type == "page"}
    out: dict[str, ExportAsset] = _Assets()
    for row in session.execute(_ATTACHED_SQL, {"kb": str(kb_id)}):
        page = pages.get(row[1])
        if page is not None:
            page.assets.append(_add_asset(out, row).path)
    for d in pages.values():
        if len(d.assets) > 1:
            d.assets = sorted(set(d.assets))
    return out


def _canonical(aid: str) -> bool:
    try:
        return str(uuid.UUID(aid)) == aid
    except ValueError:
        return False


def _shown_assets(session: Session, plan: ExportPlan, shown: list[tuple[ExportDoc, set[str]]]) -> None:
    """The ``asset://`` references of a batch of pages (each page with its asset ids, from the export
    forms the stream reads anyway): each page lists the exported assets it shows; an asset it
    shows that is not attached to an exported page goes in when the caller may read it (attached
    to a readable document, or their own unattached upload) and the cap leaves room, else it is
    counted and the reference kept as it is. One query per batch, for the ids not seen before."""
    unknown: set[str] = set()
    for _d, ids in shown:
        unknown.update(i for i in ids if i not in plan.asset_paths and i not in plan.assets_left_out)
    if unknown:
        valid = []
        for aid in sorted(unknown):
            if _canonical(aid):
                valid.append(aid)
            else:  # 36 characters of hex and dashes that no asset id is written as
                plan.assets_left_out[aid] = "assets_unreadable"
        rows = session.execute(_BY_ID_SQL, {"ids": valid}).all() if valid else []
        docs_of = {uuid.UUID(r[1]) for r in rows if r[1] is not None}
        readable = {str(i) for i in filter_readable_documents(session, plan.principal, docs_of)} if docs_of else set()
        found = set()
        for r in rows:
            found.add(r[0])
            if r[1] is not None:
                ok = r[1] in readable
            else:
                ok = r[7] == str(plan.principal.user_id) and r[8] == str(plan.principal.tenant_id)
            if not ok:
                plan.assets_left_out[r[0]] = "assets_unreadable"
            elif plan.total_bytes + int(r[5]) > plan.max_bytes:
                plan.assets_left_out[r[0]] = "assets_over_cap"
            else:
                path = _add_asset(plan.assets, r).path
                plan.asset_paths[r[0]] = path
                plan.ref_paths["a" + r[0]] = path
                plan.total_bytes += int(r[5])
        for aid in valid:
            if aid not in found:
                plan.assets_left_out[aid] = "assets_unreadable"
    for d, ids in shown:
        more = {plan.asset_paths[i] for i in ids if i in plan.asset_paths}
        if not more.issubset(d.assets):
            d.assets = sorted(more.union(d.assets))


# -- the files ---------------------------------------------------------------------------------


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _sorted(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


_JSON_STR = json.encoder.encode_basestring  # what ``json.dumps(..., ensure_ascii=False)`` does with a str
if json.encoder.c_make_encoder is not None:
    # the C encoder ``json.dumps(value, ensure_ascii=False, sort_keys=True)`` builds on every call,
    # built once: a third of the cost for the small values of a page (its tags, its metadata).
    # No circular check: the values come from JSON columns, which cannot hold a cycle
    _ENCODE = json.encoder.c_make_encoder(
        None, json.JSONEncoder().default, _JSON_STR, None, ": ", ", ", True, False, True
    )

    def _JSON(value: Any) -> str:  # noqa: N802 - a constant-like name, as before
        return "".join(_ENCODE(value, 0))

else:  # an interpreter without the _json accelerator
    _JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode


def _yaml_raw(out: str) -> str:
    # JSON's string syntax is YAML's double-quoted one, except for what YAML refuses to read raw
    # (C1 controls, non-characters) or folds as a line break (NEL, U+2028/9): \u escapes
    return _YAML_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", out) if _YAML_RAW.search(out) else out


def _str(value: str) -> str:
    return _yaml_raw(_JSON_STR(value))


def _flow(value: Any) -> str:
    """``value`` (JSON data) as YAML flow: JSON's syntax, with floats YAML 1.1 reads as floats."""
    if isinstance(value, str):
        return _str(value)
    if isinstance(value, (dict, list)):
        if not value:
            return "{}" if isinstance(value, dict) else "[]"
        out = _JSON(value)
        if "e+" not in out and "e-" not in out:  # no float in exponent form (YAML 1.1 needs a dot)
            return _yaml_raw(out)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        r = repr(value)
        return r.replace("e", ".0e") if "e" in r and "." not in r else r
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_str(str(k))}: {_flow(value[k])}" for k in sorted(value, key=str)) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return _str(str(value))


def front_matter(title: str, status: str, tags: list[str], meta: dict[str, Any], *, end: str = "") -> str:
    """YAML front matter: ``title``, ``status``, ``tags``, ``metadata`` in this order, each on one
    line in flow style (metadata's keys sorted), so the same page always gives the same bytes and
    any YAML reader gets the values back exactly (a block-style dumper is 10x slower and folds
    long titles); then ``end`` (a page's blank line)."""
    return f"---\ntitle: {_str(title)}\nstatus: {_str(status)}\ntags: {_flow(list(tags))}\nmetadata: {_flow(meta)}\n---\n{end}"


def _rel(path: str, from_dir: str) -> str:
    """``path`` relative to the folder ``from_dir`` ("" at the top). Export paths have no ``.``
    or ``..`` parts and no empty ones, so a common-prefix walk is ``posixpath.relpath`` at a
    tenth of its cost (it makes both absolute first)."""
    from_dir = from_dir.rstrip("/")
    if not from_dir:
        return path
    n = len(from_dir)
    if path.startswith(from_dir) and path[n : n + 1] == "/":
        tail = path[n + 1 :]
        if tail and "/" not in tail[:-1]:
            return tail  # in that folder itself (a sibling: the common case)
    folder = path.endswith("/")
    p = path.rstrip("/").split("/")
    h = from_dir.split("/")  # not empty: the top was answered above
    i, n = 0, min(len(p), len(h))
    while i < n and p[i] == h[i]:
        i += 1
    rel = "/".join([".."] * (len(h) - i) + p[i:]) or "."
    return rel + "/" if folder else rel


def _resolver(doc: ExportDoc, plan: ExportPlan) -> Callable[[str], str | None]:
    """Where a reference of ``doc`` points in the export (relative), None when not exported."""
    here = doc.path.rpartition("/")[0]

    def resolve(u: str) -> str | None:
        if u.startswith(_LINK):
            ref, hash_, frag = u[len(_LINK) :].partition("#")
            ref, q, query = ref.partition("?")  # ?x=1 goes with the link, like #part (the import keeps it)
            path = plan.links.get(ref.strip("/").lower())
            return None if path is None else _rel(path, here) + q + query + hash_ + frag
        if u.startswith("asset://"):
            ref = u[len("asset://") :].split("#", 1)[0].split("?", 1)[0].lower()
            path = plan.asset_paths.get(ref)
            return None if path is None else _rel(path, here)
        return None

    return resolve


def page_markdown(body: str, doc: ExportDoc, plan: ExportPlan) -> str:
    """The stored body with ``openkb://document/<id>`` and ``asset://<id>`` of exported objects
    as relative links; links to what is not in the export stay as they are."""
    return rewrite_links(body, _resolver(doc, plan))


_FINAL = b"\x03\x00"  # an empty final deflate block (fixed codes): the end of a member's stream


def page_member(fm: bytes, body: bytes, form: ExportForm, plan: ExportPlan, here: str) -> Deflated | None:
    """A page's zip member from its front matter (bytes, ending in the blank line), its stored
    body and the body's export form: exactly the file ``fm + page_markdown(body)`` of a page in
    the folder ``here`` ("" at the top), as raw deflate (``openkb/exporting/forms.py``). None
    when a reference that only the parse can place resolves (the caller then rewrites and
    deflates the page whole).

    The decisions are ``links.apply_refs``'s with ``_resolver``'s targets, on bytes: a reference
    is looked up by its key (one dictionary lookup each; most point nowhere in the export), and
    only one that resolves costs more. A plain reference's destination is the bare id (54 bytes
    for ``openkb://document/<id>``, 44 for ``asset://<id>``) or the bare id and a fragment,
    which the relative link keeps; the relative link of a (target, folder) pair is made once per
    export (siblings and shared images repeat)."""
    refs, keys = form.refs, form.keys
    paths = plan.ref_paths
    hits = [i for i, key in enumerate(keys) if key in paths]  # only those into the export
    if not hits:
        data = fm + body
        z = stored_blocks(fm) + form.deflated + _FINAL
        return Deflated(zlib.crc32(data), len(data), z, hashlib.sha256(data).hexdigest())
    dests = plan.dests
    blocks, deflated = form.blocks, form.deflated
    file_parts = [fm]
    z_parts = [stored_blocks(fm)]
    pos = dpos = 0
    for i in hits:
        j = 3 * i
        if not refs[j + 2]:
            return None
        start, end = refs[j], refs[j + 1]
        path = paths[keys[i]]
        bare = 54 if keys[i][0] == "d" else 44
        if end - start == bare:
            dest = dests.get((path, here))
            if dest is None:
                rel = destination(_rel(path, here)).encode()
                dest = dests[(path, here)] = (rel, stored_blocks(rel))
        else:  # the link's fragment goes with it: #part of the page it points to
            rel = destination(_rel(path, here) + body[start + bare : end].decode()).encode()
            dest = (rel, stored_blocks(rel))
        k = 2 * sum(refs[2:j:3])  # its stored block: two entries in ``blocks`` per plain reference before it
        file_parts += (body[pos:start], dest[0])
        z_parts += (deflated[dpos : blocks[k]], dest[1])
        pos, dpos = end, blocks[k + 1]
    file_parts.append(body[pos:])
    z_parts += (deflated[dpos:], _FINAL)
    data = b"".join(file_parts)
    return Deflated(zlib.crc32(data), len(data), b"".join(z_parts), hashlib.sha256(data).hexdigest())


def _page_entry(d: ExportDoc, body: bytes, form: ExportForm, plan: ExportPlan) -> Deflated:
    """A page's zip member (its front matter, then its body with the links into the export made
    relative); fills in the page's ``sha256``, ``bytes`` and manifest line."""
    fm = front_matter(d.title, d.status, d.tags, d.meta, end="\n").encode()
    member = page_member(fm, body, form, plan, d.path.rpartition("/")[0])
    if member is None:  # a reference only the parse can place: the page goes whole
        data = fm + rewrite_links(body.decode(), _resolver(d, plan)).encode()
        member = Deflated(
            zlib.crc32(data), len(data), zlib.compress(data, _LEVEL, wbits=-15), hashlib.sha256(data).hexdigest()
        )
    d.sha256, d.bytes = member.sha256, member.size
    d.line = _page_line(d)  # the page's assets are known now: its batch's shown assets came first
    return member


def _doc_entry(d: ExportDoc) -> dict[str, Any]:
    """A document's manifest entry."""
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
    return e


def _js(value: str | None) -> str:
    return "null" if value is None else _JSON_STR(value)


def _page_line(d: ExportDoc) -> str:
    """``_JSON(_doc_entry(d))`` of a page, written out in its sorted key order: a third of the
    cost of building the dict and encoding it (tests/export/test_files.py checks they agree)."""
    return (
        f'{{"assets": {_JSON(d.assets) if d.assets else "[]"}, "bytes": {int(d.bytes)}, "id": {_JSON_STR(d.id)}, '
        f'"markdown_sha256": {_js(d.markdown_hash)}, "parent_id": {_js(d.parent)}, "path": {_JSON_STR(d.path)}, '
        f'"sha256": {_js(d.sha256)}, "status": {_JSON_STR(d.status)}, "title": {_JSON_STR(d.title)}, '
        f'"type": "page", "version_id": {_js(d.version_id)}, '
        f'"version_no": {"null" if d.version_no is None else int(d.version_no)}}}'
    )


def manifest_bytes(plan: ExportPlan) -> bytes:
    summary = plan.summary()  # once: it counts the documents
    docs = [(d.line or _page_line(d)) if d.type == "page" else _JSON(_doc_entry(d)) for d in plan.docs]
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
        "counts": {k: summary[k] for k in ("pages", "folders", "assets")},
    }
    # one document or asset per line: readable, diffable, and JSON's fast encoder (indent is slow)
    lines = []
    for k in sorted(manifest):
        v = manifest[k]
        if isinstance(v, list) and v:
            items = ",\n  ".join(v if k == "documents" else (_JSON(x) for x in v))
            lines.append(f"{json.dumps(k)}: [\n  {items}\n ]")
        else:
            lines.append(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False, sort_keys=True)}")
    return ("{\n " + ",\n ".join(lines) + "\n}\n").encode()


# -- the zip -----------------------------------------------------------------------------------


def _stored(mime: str) -> bool:
    return mime in _STORED_TYPES or mime.startswith(_STORED_PREFIXES)


def iter_export(
    session: Session,
    plan: ExportPlan,
    blobs: BlobStore,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[bytes]:
    """The zip's bytes, in pieces of about ``CHUNK``; ``progress(done, total)`` in planned bytes.

    Members: folders and pages in path order, then the assets in path order (those a page shows
    from elsewhere are known only once every page was read), then the manifest."""
    parts: list[bytes] = []
    z = ZipStream(parts.append, level=_LEVEL)
    plan.key_refs()
    handed = 0

    def take() -> bytes:
        nonlocal handed
        data = b"".join(parts)
        parts.clear()
        handed = z.offset
        if progress is not None:
            progress(plan.done_bytes, plan.total_bytes)
        return data

    # pages go in batches: the bodies of a batch and their export forms are read in one query by
    # a reader thread, one batch ahead, while this thread turns the current batch into members
    # (PostgreSQL's time overlaps the Python's; openkb/exporting/ahead.py says why the reader
    # only reads). Memory stays flat: three batches at most (this one, the one waiting and the
    # one being read). The assets a batch shows from elsewhere are added to the plan's link maps
    # here, before its pages are built.
    tree = sorted(plan.docs, key=lambda d: d.path)
    segments: list[tuple[list[ExportDoc], list[ExportDoc]]] = []  # (members in order, their pages)
    seg: list[ExportDoc] = []
    seg_pages: list[ExportDoc] = []
    for item in tree:
        seg.append(item)
        if item.type == "page":
            seg_pages.append(item)
            if len(seg_pages) == _BATCH:
                segments.append((seg, seg_pages))
                seg, seg_pages = [], []
    if seg:
        segments.append((seg, seg_pages))

    # the session's own connection (same transaction), taken here: the reader thread never
    # touches the session, only the driver's connection, whose lock orders its queries with this
    # thread's (the shown assets' lookups)
    conn = session.connection().connection.driver_connection

    def read_all() -> Iterator[tuple[list[ExportDoc], list[ExportDoc], list[tuple[bytes, ExportForm]]]]:
        for members, batch in segments:
            yield members, batch, _pages(conn, batch)

    batches = ahead(read_all(), 1, "export-read")
    try:
        for members, batch, rows in batches:
            _shown_assets(session, plan, [(d, ids) for d, (_b, form) in zip(batch, rows) if (ids := _asset_ids(form))])
            built = iter(rows)
            for item in members:
                if item.type == "folder":
                    z.folder(item.path)
                    continue
                body, form = next(built)
                z.deflated(item.path, _page_entry(item, body, form, plan))
                plan.done_bytes += item.size
                if z.offset - handed >= CHUNK:
                    yield take()
    finally:
        batches.close()  # stops the reader before this generator ends (a client may have gone)
    # assets, read here chunk by chunk: a reader thread a few pieces ahead cost more CPU in
    # hand-overs (one per asset) than it saved in wall time (bench/export.py, load ~2)
    for asset in sorted(plan.assets.values(), key=lambda a: a.path):
        try:
            chunks = blobs.open(asset.object_key)
        except NotFound:
            # the row outlived its blob (a restore without the blob store, a deleted file):
            # the export goes on without it, and the manifest counts it
            plan.left_out["assets_missing"] = plan.left_out.get("assets_missing", 0) + 1
            del plan.assets[asset.path]
            continue
        member = z.open(asset.path, compress=not _stored(asset.mime_type), planned_size=asset.size)
        for chunk in chunks:
            member.write(chunk)
            plan.done_bytes += len(chunk)
            if z.offset - handed >= CHUNK:
                yield take()
        member.close()
    for key in ("assets_unreadable", "assets_over_cap"):
        n = sum(1 for v in plan.assets_left_out.values() if v == key)
        if n or key in plan.left_out:
            plan.left_out[key] = n
    z.file(MANIFEST, manifest_bytes(plan))
    z.close()
    yield take()


# a batch's bodies (UTF-8 bytes: no decoding, the forms' offsets are in bytes) with their export
# forms, from the forms' rows alone (the body is in the row: openkb/exporting/forms.py); a
# version without a form of this ``FORM`` is read from the versions
_PAGES_SQL = (
    "SELECT f.version_id::text, f.body, f.refs, f.keys, f.blocks, f.deflated FROM document_export_forms f "
    f"WHERE f.version_id = ANY(%s::uuid[]) AND f.form = {FORM}"
)
_BODIES_SQL = "SELECT v.id::text, convert_to(v.markdown, 'UTF8') FROM document_versions v WHERE v.id = ANY(%s::uuid[])"


def _pages(conn: Any, batch: list[ExportDoc]) -> list[tuple[bytes, ExportForm]]:
    """Body and export form of each page of ``batch``, in order; a form that is missing (or of
    another ``FORM``) is computed here from the version's body, by the function that computes
    stored ones.

    Read through the session's own psycopg connection ``conn`` (same transaction; in the
    stream's reader thread) with PostgreSQL's binary protocol: bodies and deflated forms arrive
    as bytes instead of hex text that both sides would encode and decode.

    The body comes from the form's row, not from the version: one uncompressed, in-line row per
    page (migration 0014) instead of two rows, a TOAST fetch and a decompression; PostgreSQL's
    share of an export fell by half, its reads now ahead of the stream (docs/export.md#speed).

    Trap: taking the body out of the deflated form instead (inflate, check the hash) spares
    PostgreSQL as much, but costs this process more (an inflater per page, the hash, the
    copies): measured and left out, before the form held its body."""
    ids = [d.version_id for d in batch if d.version_id]
    found: dict[str, Any] = {}
    bodies: dict[str, bytes] = {}
    if ids:
        with conn.cursor(binary=True) as cur:
            found = {r[0]: r for r in cur.execute(_PAGES_SQL, (ids,)).fetchall()}
            missing = [i for i in ids if i not in found]
            if missing:
                bodies = dict(cur.execute(_BODIES_SQL, (missing,)).fetchall())
    out = []
    for d in batch:
        r = found.get(d.version_id) if d.version_id else None
        if r is not None:
            out.append((r[1], ExportForm(r[2], r[3], r[4], r[5])))
        else:
            body = bodies.get(d.version_id, b"") if d.version_id else b""
            out.append((body, make_form(body.decode())))
    return out


def _asset_ids(form: ExportForm) -> set[str]:
    return {k[1:] for k in form.keys if k[0] == "a"}


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
