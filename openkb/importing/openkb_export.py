"""Import an OpenKB export (docs/export.md#importing-an-export) back as it was.

An export is recognised by its manifest, ``openkb-export.json`` at the top of the zip (or of an
unpacked folder), and imported from it instead of by guessing: the manifest names every folder
and page with its title, type, status and parent, so the tree, the titles (which file names had
to change) and the order come back exactly, and every page's front matter gives its title,
status, tags and metadata. Relative links between exported pages become
``openkb://document/<id>`` links again, ``assets/...`` references become uploaded assets
(``asset://<id>``), attached to the page; links to what was not exported stay as they are.

Nothing is added to the metadata (a plain import records ``import.path``; here that would make
the round trip lossy). A document is keyed by its id in the source
(``import:<target>:export:<source kb id>:<source doc id>``, see ``_key``) and a new document's
id derives from its key, so a re-run of the same zip is an upsert that answers ``unchanged``, a
killed run re-runs to the same tree, and a newer export of the same source updates (renames,
moves) the copies it made. An export re-zipped under one top folder is read from that folder.

A manifest written by a newer OpenKB (``format_version`` above :data:`FORMAT_VERSION`) is
refused whole with ``EXPORT_FORMAT_UNSUPPORTED`` before anything is written: a newer format may
carry what this version would silently drop.
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import re
import time
import unicodedata
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import date, datetime
from typing import Any
from urllib.parse import unquote

import yaml
from sqlmodel import Session, col, select

from openkb.assets import upload_asset
from openkb.config import Settings, get_settings
from openkb.content import limits
from openkb.content.actor import Actor
from openkb.content.upsert import upsert_by_key
from openkb.errors import ExportFormatUnsupported, OpenKBError
from openkb.exporting.format import ASSETS_DIR, FORMAT, FORMAT_VERSION, MANIFEST
from openkb.importing.links import rewrite
from openkb.importing.pipeline import (
    _ID_NAMESPACE,
    FileResult,
    ImportReport,
    Progress,
    Units,
    authorize_import,
    key_prefix,
    run_import,
)
from openkb.importing.sniff import sniff
from openkb.importing.sources import Entry, Source
from openkb.models import Document, DocumentAsset
from openkb.storage import BlobStore

__all__ = ["import_export", "is_export", "read_manifest", "run_any", "split_front_matter"]

_SCHEME = re.compile(r"\A[a-zA-Z][a-zA-Z0-9+.-]*:")


def _export_top(source: Source) -> str | None:
    """Where the export starts in ``source``: ``""`` when the manifest is at the top, ``"wiki/"``
    when every entry is under one folder ``wiki`` that holds it (the export unzipped, then
    compressed again by Finder or Windows, or an unpacked export given with its parent folder),
    None when there is no manifest. A manifest anywhere else is refused whole
    (``EXPORT_FORMAT_UNSUPPORTED``): imported as plain files, the export would lose its drafts,
    its page-with-children tree and its metadata (docs/export.md#importing-an-export)."""
    manifests = [e.rel for e in source.entries if not e.is_dir and posixpath.basename(e.rel) == MANIFEST]
    if not manifests:
        return None
    if MANIFEST in manifests:
        return ""
    tops = {e.rel.split("/", 1)[0] for e in source.entries}
    if len(tops) == 1:
        top = tops.pop() + "/"
        if top + MANIFEST in manifests and all(e.rel.startswith(top) or e.rel + "/" == top for e in source.entries):
            return top
    where = sorted(manifests)[0]
    raise ExportFormatUnsupported(
        f"{where} is not at the top of what was imported: an OpenKB export has {MANIFEST} at the top "
        f"of the zip, or in the one folder the zip holds. Import the folder holding it (or a zip of "
        f"that folder's contents); nothing was imported"
    )


def export_source(source: Source) -> Source | None:
    """``source`` as an export whose paths start at the manifest's folder, or None when it is
    not an export (see ``_export_top``)."""
    top = _export_top(source)
    if top is None:
        return None
    if not top:
        return source
    entries = [replace(e, rel=e.rel[len(top) :]) for e in source.entries if e.rel.startswith(top)]
    return Source(source.name, entries)  # the caller closes ``source`` (and its zip)


def is_export(source: Source) -> bool:
    return _export_top(source) is not None


def run_any(
    units: Units, blobs: BlobStore, actor: Actor, knowledge_base_id: uuid.UUID, source: Source, **kw: Any
) -> ImportReport:
    """The import of ``source``: an OpenKB export by its manifest, anything else by the pipeline."""
    export = export_source(source)
    if export is not None:
        kw.pop("jobs", None)
        kw.pop("prune", None)
        return import_export(units, blobs, actor, knowledge_base_id, export, **kw)
    return run_import(units, blobs, actor, knowledge_base_id, source, **kw)


def read_manifest(source: Source) -> dict[str, Any]:
    """The manifest, checked: an export's, of a format version this OpenKB reads."""
    source = export_source(source) or source
    entry = next((e for e in source.entries if e.rel == MANIFEST and not e.is_dir), None)
    if entry is None:
        raise ExportFormatUnsupported(f"no {MANIFEST}: this is not an OpenKB export")
    if entry.read is None:
        raise ExportFormatUnsupported(f"{MANIFEST} cannot be read: {entry.error}")
    try:
        m = json.loads(entry.read().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ExportFormatUnsupported(f"{MANIFEST} is not valid JSON ({exc})") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise ExportFormatUnsupported(f'{MANIFEST} is not an OpenKB export manifest (no "format": "{FORMAT}")')
    v = m.get("format_version")
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ExportFormatUnsupported(f"{MANIFEST} has no valid format_version")
    if v > FORMAT_VERSION:
        raise ExportFormatUnsupported(
            f"this export is format version {v}, written by a newer OpenKB; this one reads format version "
            f"{FORMAT_VERSION} and older. Upgrade OpenKB to import it (nothing was imported)"
        )
    docs = m.get("documents")
    if not isinstance(docs, list) or not all(isinstance(d, dict) for d in docs):
        raise ExportFormatUnsupported(f"{MANIFEST} has no list of documents")
    return m


def split_front_matter(text: str) -> tuple[dict[str, Any] | None, str]:
    """(front matter or None when there is none or it does not parse, body). A file whose first
    line ends in CRLF or CR (saved again by a Windows or an old Mac editor) has its line endings
    made ``\n`` first, as ``repair.import_markdown`` does for a plain import: it keeps its title,
    tags and metadata. One the export wrote (``---\n``) is read as it is, a ``\r`` in its body
    included."""
    if text.startswith(("---\r\n", "---\r")):
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.startswith("---\n"):
        return None, text
    end = text.find("\n---\n", 3)
    if end < 0:
        return None, text
    try:
        data = yaml.safe_load(text[4 : end + 1])
    except yaml.YAMLError:
        return None, text
    rest = text[end + 5 :]
    if rest.startswith("\n"):
        rest = rest[1:]
    return (data if isinstance(data, dict) else {}), rest


def _json(value: Any) -> Any:
    """YAML a person edited can hold dates; metadata is JSON."""
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json(v) for v in value]
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    return value


def _clean(path: Any) -> str | None:
    if not isinstance(path, str) or not path:
        return None
    p = unicodedata.normalize("NFC", path.replace("\\", "/"))
    parts = p.rstrip("/").split("/")
    if p.startswith("/") or any(x in ("", ".", "..") for x in parts) or (len(parts[0]) == 2 and parts[0][1] == ":"):
        return None
    return p


class _Page:
    """Uploads of one page: each file once, reusing what an earlier run attached (by checksum and
    name), so a re-run leaves the body byte-identical and the upsert answers ``unchanged``."""

    def __init__(self, s: Session, imp: _Import, doc_id: uuid.UUID, existing: bool) -> None:
        self.s, self.imp = s, imp
        self.known: dict[str, uuid.UUID] = {}
        if existing:
            rows = s.exec(
                select(DocumentAsset.id, DocumentAsset.sha256, DocumentAsset.filename).where(
                    col(DocumentAsset.document_id) == doc_id
                )
            ).all()
            self.known = {f"{sha}:{name}": aid for aid, sha, name in rows}
        self.new: list[uuid.UUID] = []
        self.done: dict[str, str] = {}
        self.warnings: list[str] = []

    def asset(self, path: str) -> str | None:
        if path in self.done:
            return self.done[path]
        info = self.imp.assets[path]
        entry = self.imp.files.get(path)
        if entry is None or entry.read is None:
            self.warnings.append(f"{path}: not in the zip; the reference is kept as it is")
            return None
        try:
            data = entry.read()
        except OpenKBError as exc:
            self.warnings.append(f"{path}: {exc.detail}")
            return None
        sha = hashlib.sha256(data).hexdigest()
        if info.get("sha256") and info["sha256"] != sha:
            self.warnings.append(f"{path}: its checksum differs from the manifest's (changed after the export)")
        name = info.get("filename") or posixpath.basename(path)
        aid = self.known.get(f"{sha}:{name}")
        if aid is None:
            mime = info.get("mime_type") or sniff(data, path).mime
            a = upload_asset(
                self.s,
                self.imp.actor,
                self.imp.blobs,
                io.BytesIO(data),
                size=len(data),
                filename=name,
                content_type=mime,
                settings=self.imp.settings,
            )
            aid = a.id
            self.new.append(aid)
            self.known[f"{sha}:{name}"] = aid
        self.done[path] = f"asset://{aid}"
        return self.done[path]


class _Import:
    def __init__(self, actor: Actor, blobs: BlobStore, settings: Settings, source: Source, kb_id: uuid.UUID) -> None:
        self.actor, self.blobs, self.settings, self.kb_id = actor, blobs, settings, kb_id
        self.files: dict[str, Entry] = {e.rel: e for e in source.entries if not e.is_dir}
        self.assets: dict[str, dict[str, Any]] = {}
        self.ids: dict[str, uuid.UUID] = {}  # path -> the document's id here

    def resolver(self, page: _Page, here: str) -> Callable[[str, bool], str | None]:
        def resolve(url: str, _is_image: bool) -> str | None:
            u = url.strip()
            if not u or _SCHEME.match(u) or u.startswith(("#", "//")):
                return None
            base, hash_, frag = u.partition("#")
            base, q, query = base.partition("?")  # kept: the link said it (docs/export.md#the-zip)
            if not base:
                return None
            target = posixpath.normpath(posixpath.join(here, unquote(base)))
            if target == ".." or target.startswith(("../", "/")):
                return None
            target = unicodedata.normalize("NFC", target)
            if target in self.assets:
                return page.asset(target)
            if target.startswith(ASSETS_DIR + "/"):
                page.warnings.append(f"{target}: not in the zip; the reference is kept as it is")
                return None
            for cand in (target, target + "/"):
                if cand in self.ids:
                    return f"openkb://document/{self.ids[cand]}{q}{query}{hash_}{frag}"
            return None

        return resolve


def import_export(
    units: Units,
    blobs: BlobStore,
    actor: Actor,
    knowledge_base_id: uuid.UUID,
    source: Source,
    *,
    target_id: uuid.UUID | None = None,
    dry_run: bool = False,
    settings: Settings | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> ImportReport:
    """Import an export's folders and pages under ``target_id`` (or the root), in the manifest's
    order. Same authorization as any import (NotFound for who cannot see the target,
    PermissionDenied for who cannot create there); per-file problems are in the report."""
    settings = settings or get_settings()
    started = time.monotonic()
    manifest = read_manifest(source)
    report = ImportReport(str(actor.run_id), str(knowledge_base_id), str(target_id) if target_id else None, dry_run)
    with units() as s:
        authorize_import(s, actor.principal, knowledge_base_id, target_id)
        prefix = key_prefix(target_id)
        like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        existing = {
            k: i
            for k, i in s.exec(
                select(Document.external_key, Document.id).where(
                    col(Document.knowledge_base_id) == knowledge_base_id, col(Document.external_key).like(like)
                )
            ).all()
            if k
        }
    imp = _Import(actor, blobs, settings, source, knowledge_base_id)
    for a in manifest.get("assets") or []:
        if isinstance(a, dict) and (p := _clean(a.get("path"))) is not None:
            imp.assets[p] = a

    # plan: every listed document gets its id before anything is written, so a page can link to
    # a page written after it
    plan: list[tuple[dict[str, Any], str, str]] = []
    by_export_id: dict[str, str] = {}
    keys: set[str] = set()
    for d in manifest["documents"]:
        path = _clean(d.get("path"))
        kind = d.get("type")
        if path is None or kind not in ("page", "folder") or (kind == "folder") != path.endswith("/"):
            bad = "a manifest entry with a bad path or type"
            report.files.append(FileResult(str(d.get("path")), "failed", "page", error=bad, code="CONVERSION_FAILED"))
            continue
        if path in imp.ids:
            report.files.append(
                FileResult(path, "failed", kind, error="listed twice in the manifest", code="CONVERSION_FAILED")
            )
            continue
        key = _key(prefix, manifest, d, path, existing)
        if key in keys:
            report.files.append(
                FileResult(
                    path, "failed", kind, error="its id is listed twice in the manifest", code="CONVERSION_FAILED"
                )
            )
            continue
        keys.add(key)
        imp.ids[path] = existing.get(key) or uuid.uuid5(_ID_NAMESPACE, f"{knowledge_base_id}:{key}")
        by_export_id[str(d.get("id"))] = path
        plan.append((d, path, key))
    listed = set(imp.ids) | set(imp.assets) | {MANIFEST}
    for rel in sorted(imp.files):
        if rel not in listed:
            report.files.append(
                FileResult(
                    rel,
                    "failed",
                    "page",
                    error=f"not listed in {MANIFEST}: import it on its own, or export again",
                    code="CONVERSION_FAILED",
                )
            )

    bytes_total = sum(imp.files[p].size for _d, p, _k in plan if p in imp.files)
    bytes_done = 0
    done_paths: dict[str, uuid.UUID | None] = {}
    for n, (d, path, key) in enumerate(plan, 1):
        entry = imp.files.get(path)
        if progress is not None:
            progress(Progress("write", n - 1, len(plan), bytes_done, bytes_total, path))
        bytes_done += entry.size if entry else 0
        parent_path = by_export_id.get(str(d.get("parent_id"))) if d.get("parent_id") else None
        if d.get("parent_id") and (parent_path is None or parent_path not in done_paths):
            why = "its parent failed or is not listed before it"
            report.files.append(FileResult(path, "failed", d["type"], error=why, code="CONVERSION_FAILED"))
            continue
        parent_id = done_paths[parent_path] if parent_path is not None else target_id
        res = _write(units, imp, d, path, key, parent_id, existing.get(key), dry_run)
        report.files.append(res)
        if res.status != "failed":
            done_paths[path] = imp.ids[path]
    for p, a in sorted(imp.assets.items()):
        report.files.append(FileResult(p, "asset", "asset", bytes=int(a.get("bytes") or 0)))
    report.seconds = time.monotonic() - started
    return report


def _uuid(value: Any) -> str | None:
    try:
        return str(uuid.UUID(str(value))) if value else None
    except ValueError:
        return None


def _key(prefix: str, manifest: dict[str, Any], d: dict[str, Any], path: str, existing: dict[str, uuid.UUID]) -> str:
    """A document's key: ``import:<target>:export:<source kb id>:<source doc id>``, so that
    importing a newer export of the same source updates each copy by what it *is*, not where it
    was named. By path, a re-import after a same-titled sibling was trashed (``Notes (2).md``
    becoming ``Notes.md``) overwrote the other page, and a page renamed or moved in the source
    came back as a duplicate subtree. The path key (``import:<target>:<path>``) is kept for a
    manifest without ids, and for a copy an earlier OpenKB imported by path (its documents keep
    their keys: re-importing does not duplicate them)."""
    src = manifest.get("source") if isinstance(manifest.get("source"), dict) else {}
    kb, doc = _uuid(src.get("knowledge_base_id")), _uuid(d.get("id"))
    by_path = prefix + path
    if kb is None or doc is None:
        return by_path
    key = f"{prefix}export:{kb}:{doc}"
    return by_path if key not in existing and by_path in existing else key


def _write(
    units: Units,
    imp: _Import,
    d: dict[str, Any],
    path: str,
    key: str,
    parent_id: uuid.UUID | None,
    existing: uuid.UUID | None,
    dry_run: bool,
) -> FileResult:
    kind = d["type"]
    doc_id = imp.ids[path]
    res = FileResult(path, "failed", kind, str(doc_id), converter="openkb-export")
    title = d.get("title") if isinstance(d.get("title"), str) and d.get("title") else posixpath.basename(path)
    status = d.get("status") if d.get("status") in ("draft", "published", "archived") else None
    meta: Any = d.get("metadata") or {}
    tags: Any = d.get("tags") or []
    body: str | None = None
    if kind == "page":
        entry = imp.files.get(path)
        if entry is None or entry.read is None:
            res.error = (entry.error if entry else None) or "listed in the manifest, not in the zip"
            res.code = "CONVERSION_FAILED"
            return res
        try:
            raw = entry.read()
            res.bytes = len(raw)
            text = raw.decode("utf-8").removeprefix("\ufeff")
        except OpenKBError as exc:
            res.error, res.code = exc.detail, exc.code
            return res
        except UnicodeDecodeError as exc:
            res.error, res.code = f"not valid UTF-8 (byte {exc.start})", "CONVERSION_FAILED"
            return res
        fm, body = split_front_matter(text)
        if fm is None:
            res.warnings.append("no front matter: title and status from the manifest, no tags or metadata")
            fm = {}
        if isinstance(fm.get("title"), str) and fm["title"].strip():
            title = fm["title"]
        if fm.get("status") in ("draft", "published", "archived"):
            status = fm["status"]
        meta = fm.get("metadata") if fm.get("metadata") is not None else {}
        tags = fm.get("tags") if fm.get("tags") is not None else []
    if not isinstance(meta, dict):
        res.warnings.append("metadata is not a mapping; left empty")
        meta = {}
    if not isinstance(tags, list):
        res.warnings.append("tags is not a list; left empty")
        tags = []
    meta, tags = _json(meta), [str(t) for t in tags]
    try:  # refused metadata (an integer past int64, too large) must not take the subtree down
        limits.check_metadata(meta, settings=imp.settings)
    except OpenKBError as exc:
        res.warnings.append(f"metadata refused ({exc.code}: {exc.detail}); imported without it")
        meta = {}
    if dry_run:
        res.status = "would_update" if existing else "would_create"
        return res
    for mode in ("reject", "convert"):
        try:
            with units() as s:
                page = _Page(s, imp, doc_id, existing is not None)
                markdown = None
                if body is not None:
                    markdown, _unresolved = rewrite(
                        body, imp.resolver(page, posixpath.dirname(path)), lambda _t, _a, _e: None, shown_url=True
                    )
                    listed = d.get("assets") if isinstance(d.get("assets"), list) else []
                    for a in listed:  # attachments no link shows
                        if (ap := _clean(a)) is not None and ap in imp.assets:
                            page.asset(ap)
                up = upsert_by_key(
                    s,
                    imp.actor,
                    imp.kb_id,
                    key,
                    title=title,
                    markdown=markdown,
                    type=kind,
                    parent_id=parent_id,
                    status=status,
                    metadata=meta,
                    tags=tags,
                    settings=imp.settings,
                    document_id=doc_id,
                    on_unsupported=mode,
                )
                for aid in page.new:
                    a = s.get(DocumentAsset, aid)
                    if a is not None and a.document_id is None:
                        a.document_id = up.document.id
                        s.add(a)
                s.flush()
                res.status, res.document_id = up.status, str(up.document.id)
                res.warnings += page.warnings + [f"repaired: {w}" for w in up.warnings]
                imp.ids[path] = up.document.id
                return res
        except OpenKBError as exc:
            if mode == "reject" and exc.code == "MARKDOWN_DIALECT_ERROR" and body is not None:
                continue  # edited by hand into something the editor cannot keep: repair it, with warnings
            res.status, res.error, res.code = "failed", exc.detail, exc.code
            return res
        except Exception as exc:  # noqa: BLE001 - one bad file must not stop the batch
            res.status, res.error, res.code = "failed", f"{type(exc).__name__}: {str(exc)[:300]}", "INTERNAL_ERROR"
            return res
    return res
