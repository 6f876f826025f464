"""Import a folder, a zip or files into a knowledge base (docs/importing.md).

Three passes, so links resolve whatever order files arrive in:

1. **prepare** (``importing.prepare``; parallel with ``jobs`` > 1, in worker processes): read,
   sniff, convert, repair to the dialect (``repair.import_markdown``) with the references turned
   into placeholders in the same parse. No database. Images are only sniffed: one that a page
   refers to becomes that page's asset, an unreferenced one becomes a page of its own.
2. **plan**: one query finds the documents this import made before (keys), every new page gets
   its id now, so a page can link to a page that is written after it.
3. **write**: folders in tree order (one unit of work each), then pages in batches of
   ``WRITE_BATCH``, one unit of work per batch (``content.upsert.KeyedBatch``: a few statements
   per batch, not ~15 per page) — placeholders filled in (``links.fill``: relative link ->
   ``openkb://document/<id>``, image or attachment -> ``asset://<id>``; ``[[wiki link]]`` when
   unambiguous), then the keyed upsert (``created`` / ``updated`` / ``unchanged``). A batch that
   fails as a whole (a page failing after it added rows) is rolled back and written again one
   unit of work per page, so one bad page never takes its batch-mates along. ``prune`` moves
   pages whose file is gone to the trash.

Keys: ``import:<target>:<relative path>`` (folders end in ``/``), ``<target>`` being the folder
imported into or ``root``. So a re-run is an upsert of the same keys, and ``prune`` considers
exactly the documents earlier imports made *into the same target*.

Idempotent and restartable: each batch commits on its own, assets are reused by content hash
(an unchanged page keeps its ``asset://`` ids, so its body is byte-identical and the upsert
says ``unchanged``), and a run killed with ``kill -9`` re-runs to the same tree without
duplicates: whatever committed is found by key, and a new page's id is derived from its key,
so links written before the kill point at the id the page gets when the re-run writes it.
Trap: if another writer creates the same key in between (the upsert then keeps *its* id),
links written in this run point at the id that lost — the next run repairs them.

The caller owns the units of work (``units()`` yields a session and commits it) and gives the
blob store; this module never commits by itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import posixpath
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import unquote

from sqlmodel import Session, col, select

from openkb.config import Settings, get_settings
from openkb.content import tree
from openkb.content.actor import Actor
from openkb.content.documents import trash_document
from openkb.content.upsert import KeyedBatch, KeyedItem, upsert_by_key
from openkb.errors import OpenKBError, PermissionDenied
from openkb.importing.links import fill, rewrite
from openkb.importing.prepare import Prepared, prepare_bytes
from openkb.importing.sniff import sniff
from openkb.importing.sources import LANDING_STEMS, Entry, Source
from openkb.importing.worker import Workers
from openkb.markdown import outline
from openkb.models import Document, DocumentAsset
from openkb.permissions import Action, KbAction, Principal, access_knowledge_base
from openkb.storage import BlobStore

__all__ = ["FileResult", "ImportReport", "Progress", "key_prefix", "run_import"]

Units = Callable[[], contextlib.AbstractContextManager[Session]]
_SCHEME = re.compile(r"\A[a-zA-Z][a-zA-Z0-9+.-]*:")
# pages written per unit of work (KeyedBatch); a batch that fails as a whole is redone page by page
WRITE_BATCH = 100
# a new page's id is derived from (knowledge base, key): a run killed after some pages linked to
# a page it had not written yet re-runs with the same id for it, so those links stay right
_ID_NAMESPACE = uuid.UUID("0b7a4c1e-3f2d-5e6a-9b8c-7d6e5f4a3b2c")


@dataclass
class FileResult:
    path: str
    # created | updated | unchanged | failed | trashed | would_create | would_update | would_trash
    # (a dry run says unchanged too: what the real run would)
    status: str
    type: str = "page"  # page | folder | asset
    document_id: str | None = None
    converter: str | None = None
    bytes: int = 0
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    code: str | None = None


@dataclass
class ImportReport:
    run_id: str
    knowledge_base_id: str
    target_id: str | None
    dry_run: bool
    files: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> list[FileResult]:
        return [f for f in self.files if f.status == "failed"]

    def counts(self) -> dict[str, int]:
        c: dict[str, int] = defaultdict(int)
        for f in self.files:
            c[f.status] += 1
        c["warnings"] = sum(len(f.warnings) for f in self.files)
        return dict(c)

    def document_ids(self) -> list[str]:
        return [f.document_id for f in self.files if f.document_id and f.status in ("created", "updated", "unchanged")]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "knowledge_base_id": self.knowledge_base_id,
            "target_id": self.target_id,
            "dry_run": self.dry_run,
            "counts": self.counts(),
            "seconds": round(self.seconds, 3),
            "files": [asdict(f) for f in self.files],
        }


@dataclass
class Progress:
    phase: str  # prepare (done: files before this one) | write (done: files written, this one included)
    done: int
    total: int
    bytes_done: int
    bytes_total: int
    current: str
    report: ImportReport | None = field(default=None, repr=False)  # the files written so far


def key_prefix(target_id: uuid.UUID | None) -> str:
    return f"import:{target_id or 'root'}:"


def _prepare_entry(entry: Entry, nonce: str, max_chars: int | None) -> Prepared:
    if entry.error is not None or entry.read is None:
        return Prepared(entry.rel, entry.size, error=entry.error or "cannot read", code="CONVERSION_FAILED")
    try:
        data = entry.read()
    except OpenKBError as exc:
        return Prepared(entry.rel, entry.size, error=exc.detail, code=exc.code)
    return prepare_bytes(entry.rel, data, nonce=nonce, max_chars=max_chars)


# a task is a few files, one round trip to a worker each: up to 16 Markdown/text files (each a
# few milliseconds of work), fewer of the kinds that take a converter (each weighs 8), so the
# last task to finish is short and no process waits long at the end
_TASK_WEIGHT = 16
_LIGHT = (".md", ".markdown", ".txt", ".text", ".png", ".jpg", ".jpeg", ".gif", ".webp")  # images: sniffed only


def _prepare_all(
    files: list[Entry], jobs: int, report: Callable[[int, int, str], None], nonce: str, max_chars: int
) -> list[Prepared]:
    out: list[Prepared | None] = [None] * len(files)
    if jobs <= 1 or len(files) < 8:
        for i, e in enumerate(files):
            report(i, e.size, e.rel)
            out[i] = _prepare_entry(e, nonce, max_chars)
        return [p for p in out if p is not None]
    # a few tasks per worker to balance, however the files are sized
    cap = max(1, min(_TASK_WEIGHT, len(files) // (jobs * 8)))
    tasks: list[list[int]] = []
    weight = 0
    with Workers(jobs, max_chars) as pool:  # the workers start now; the files are read meanwhile
        items: dict[int, tuple[str, bytes]] = {}
        for i, e in enumerate(files):
            if e.error is not None or e.read is None:
                out[i] = _prepare_entry(e, nonce, max_chars)
                continue
            try:
                data = e.read()
            except OpenKBError as exc:
                out[i] = Prepared(e.rel, e.size, error=exc.detail, code=exc.code)
                continue
            w = 1 if e.rel.lower().endswith(_LIGHT) else 8
            if not tasks or weight + w > cap:
                tasks.append([])
                weight = 0
            tasks[-1].append(i)
            weight += w
            items[i] = (e.rel, data)
        done = 0

        def finished(n: int, results: list[Prepared]) -> None:
            nonlocal done
            for i, p in zip(tasks[n], results):
                out[i] = p
                items.pop(i, None)  # the bytes are not needed any more
                report(done, files[i].size, files[i].rel)
                done += 1

        pool.run([[items[i] for i in idxs] for idxs in tasks], nonce, finished)
    return [p for p in out if p is not None]


class _Resolver:
    """What a reference in one page means, and the assets it needs (uploaded once per page)."""

    def __init__(
        self,
        run: _Run,
        page: Prepared,
        doc_id: uuid.UUID,
        existing: bool,
        session: Session,
        known: dict[str, uuid.UUID] | None = None,
        flush: bool = True,
    ) -> None:
        """``known``: the page's assets (``sha:filename`` -> id) when the caller fetched them
        for a whole batch; ``flush=False``: uploads are written with the batch's flush."""
        self.run, self.page, self.doc_id, self.session, self.flush = run, page, doc_id, session, flush
        self.dir = posixpath.dirname(page.rel)
        self.converted = {name: (data, mime) for name, data, mime in page.assets}
        self.existing_assets: dict[str, uuid.UUID] = dict(known or {})
        if existing and known is None:
            self.existing_assets = _assets_of(session, [doc_id]).get(doc_id, {})
        self.new_assets: list[uuid.UUID] = []
        self.uploaded: list[DocumentAsset] = []
        self.shown: set[str] = set()  # files of the import this page holds as assets
        self.cache: dict[str, str] = {}
        self.warnings: list[str] = []

    def asset(self, name: str, data: bytes, mime: str) -> str:
        from openkb.assets import upload_asset

        filename = posixpath.basename(name)
        sha = hashlib.sha256(data).hexdigest()
        ref = f"{sha}:{filename}"
        if ref in self.cache:
            return self.cache[ref]
        aid = self.existing_assets.get(ref)
        if aid is None:
            # uploaded unattached, attached once the page exists (its id is known, its row not yet)
            a = upload_asset(
                self.session,
                self.run.actor,
                self.run.blobs,
                io.BytesIO(data),
                size=len(data),
                filename=filename,
                content_type=mime,
                settings=self.run.settings,
                flush=self.flush,
            )
            aid = a.id
            self.new_assets.append(aid)
            self.uploaded.append(a)
        self.cache[ref] = f"asset://{aid}"
        return self.cache[ref]

    def target(self, url: str) -> tuple[str | None, str]:
        """(relative path inside the import or None, '#fragment')."""
        base, _, frag = url.partition("#")
        base = base.split("?", 1)[0]
        if not base:
            return None, ""
        path = posixpath.normpath(posixpath.join(self.dir, unquote(base)))
        if path.startswith(("../", "/")) or path == "..":
            return None, ""
        return path, (f"#{frag}" if frag else "")

    def resolve(self, url: str, is_image: bool) -> str | None:
        url = url.strip()
        if not url or url.startswith(("#", "openkb://", "asset://")):
            return None
        if url in self.converted:
            data, mime = self.converted[url]
            return self.asset(url, data, mime)
        if _SCHEME.match(url) or url.startswith("//"):
            return None
        rel, frag = self.target(url)
        if rel is None:
            self.warnings.append(f"link {url!r} points outside the import; kept as it is")
            return None
        return self._rel(rel, frag, url, is_image)

    def _rel(self, rel: str, frag: str, shown: str, is_image: bool) -> str | None:
        run = self.run
        if not is_image and rel in run.page_ids:
            return f"openkb://document/{run.page_ids[rel]}{frag}"
        if rel in run.files:
            data = run.read(rel)
            if data is None:
                self.warnings.append(f"{shown!r}: the file could not be read; link kept as it is")
                return None
            url = self.asset(rel, data, run.mime(rel, data))
            self.shown.add(rel)
            return url
        if rel in run.page_ids:
            return f"openkb://document/{run.page_ids[rel]}{frag}"
        self.warnings.append(f"link {shown!r}: no such file in the import; kept as it is")
        return None

    def wiki(self, target: str, anchor: str, embed: bool) -> str | None:
        rel = self.run.wiki_target(target, embed, self.dir)
        if rel is None:
            return None
        return self._rel(rel, anchor if anchor and not embed else "", f"[[{target}]]", embed)


@dataclass
class _Run:
    actor: Actor
    blobs: BlobStore
    settings: Settings
    source: Source
    nonce: str = ""
    page_ids: dict[str, uuid.UUID] = field(default_factory=dict)  # rel -> id of pages of this import
    files: dict[str, Entry] = field(default_factory=dict)  # rel -> readable file entries
    _mimes: dict[str, str] = field(default_factory=dict)
    _stems: dict[str, list[str]] = field(default_factory=dict)
    _names: dict[str, list[str]] = field(default_factory=dict)
    shown: set[str] = field(default_factory=set)  # files some written page holds as its asset

    def read(self, rel: str) -> bytes | None:
        e = self.files.get(rel)
        if e is None or e.read is None:
            return None
        try:
            return e.read()
        except OpenKBError:
            return None

    def mime(self, rel: str, data: bytes) -> str:
        if rel not in self._mimes:
            s = sniff(data, rel)
            self._mimes[rel] = s.mime if s.kind not in ("markdown", "text") else "application/octet-stream"
        return self._mimes[rel]

    def index_names(self) -> None:
        """File names and page stems, for wiki links (again once the pages are known)."""
        self._names, self._stems = {}, {}
        for rel in sorted(set(self.files) | set(self.page_ids)):
            base = posixpath.basename(rel).lower()
            self._names.setdefault(base, []).append(rel)
            if rel in self.page_ids:
                stem = base.rsplit(".", 1)[0] if "." in base else base
                self._stems.setdefault(stem, []).append(rel)

    def wiki_target(self, target: str, embed: bool, here: str = "") -> str | None:
        """The file ``[[target]]`` in a page of the folder ``here`` names, or None (unknown or
        ambiguous). Several files of one name (``Projects/attachments/image.png`` and
        ``Journal/attachments/image.png``) resolve as Obsidian resolves them: the one nearest the
        note (its own folder first, then by the folders between them); a tie stays ambiguous.
        A GitHub wiki's ``[[Getting Started]]`` names ``Getting-Started.md``: spaces read as
        hyphens when nothing else matches, and only a single match counts
        (docs/importing.md#what-becomes-what)."""
        t = target.strip().lower()
        if "/" in t:
            for cand in (t, t + ".md"):
                hits = [
                    r
                    for r in set(self.files) | set(self.page_ids)
                    if r.lower() == cand or r.lower().endswith("/" + cand)
                ]
                if hits:
                    return _nearest(hits, here)
            return None
        hits = self._names.get(t) or ([] if embed else self._stems.get(t)) or []
        if not hits and not embed:
            hits = self._stems.get(t.rsplit(".", 1)[0], [])
        if not hits and " " in t:  # a GitHub wiki: [[Getting Started]] is Getting-Started.md
            h = t.replace(" ", "-")
            dashed = set(self._names.get(h) or ([] if embed else self._stems.get(h)) or [])
            return dashed.pop() if len(dashed) == 1 else None
        return _nearest(hits, here) if hits else None


def _nearest(hits: list[str], here: str) -> str | None:
    """Of the files ``hits``, the one nearest the folder ``here``: fewest folders to walk from one
    to the other (its own folder is 0, ``attachments/`` beside the note 1); None on a tie."""
    mine = here.split("/") if here else []

    def distance(rel: str) -> int:
        theirs = posixpath.dirname(rel).split("/") if posixpath.dirname(rel) else []
        common = 0
        for a, b in zip(mine, theirs):
            if a != b:
                break
            common += 1
        return len(mine) + len(theirs) - 2 * common

    ranked = sorted((distance(r), r) for r in set(hits))
    if len(ranked) > 1 and ranked[0][0] == ranked[1][0]:
        return None
    return ranked[0][1]


def _title_of(rel: str, markdown: str | None = None) -> str:
    """A page's title when its file names none (front matter, HTML ``<title>``, an Office
    document's own title): the file name without its extension. A landing page (``README.md``,
    ``index.md``) is named by where it stands, not by its file name, which every folder repeats: its
    first level-1 heading, or else its folder's name (docs/importing.md#what-becomes-what)."""
    base = posixpath.basename(rel)
    stem = base.rsplit(".", 1)[0] if "." in base else base
    if stem.strip().casefold() in LANDING_STEMS:
        if markdown:
            heading = next((h.text for h in outline(markdown) if h.level == 1 and h.text.strip()), None)
            if heading:
                return " ".join(heading.split())[:200]  # a heading, not a paragraph
        folder = posixpath.basename(posixpath.dirname(rel))
        if folder:
            return folder
    return stem.strip() or base


def _parent_rel(rel: str) -> str:
    return posixpath.dirname(rel)


def _ancestors(rel: str) -> Iterator[str]:
    d = _parent_rel(rel)
    while d:
        yield d
        d = _parent_rel(d)


def _folders_to_write(
    folders: list[Entry], source: Source, page_rels: set[str], existing: dict[str, Any], prefix: str
) -> list[Entry]:
    """The source's folders less those that hold files but no page: an ``attachments/`` or
    ``img/`` folder whose images all became assets of the pages showing them would be an empty
    folder in the tree (docs/importing.md#what-becomes-what). A folder with no file at all is
    kept (someone made it), and so is one an earlier run created (a re-run never drops it)."""
    with_files: set[str] = set()
    with_pages: set[str] = set()
    for e in source.entries:
        if not e.is_dir:
            with_files.update(_ancestors(e.rel))
    for rel in page_rels:
        with_pages.update(_ancestors(rel))
    return [e for e in folders if e.rel in with_pages or e.rel not in with_files or prefix + e.rel + "/" in existing]


def authorize_import(
    session: Session, principal: Principal, knowledge_base_id: uuid.UUID, target_id: uuid.UUID | None
) -> None:
    """Who may import into a knowledge base or folder, for every kind of import: NotFound when
    the caller cannot see the target (an outsider learns nothing), PermissionDenied when it sees
    but may not create there, or its token may not write."""
    kb_acc = access_knowledge_base(session, principal, knowledge_base_id)
    parent = tree.target_parent(session, principal, knowledge_base_id, target_id)
    if parent is None:
        kb_acc.require(KbAction.CREATE, message="not allowed to create documents here")
    else:
        parent.require(Action.CREATE_CHILD, message="not allowed to create documents in this folder")
    if not principal.has_write_scope():
        raise PermissionDenied("this token may not import (it needs doc:write)")


def run_import(
    units: Units,
    blobs: BlobStore,
    actor: Actor,
    knowledge_base_id: uuid.UUID,
    source: Source,
    *,
    target_id: uuid.UUID | None = None,
    jobs: int = 1,
    dry_run: bool = False,
    prune: bool = False,
    settings: Settings | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> ImportReport:
    """Import ``source`` into the knowledge base (under ``target_id`` when given).

    Raises NotFound when the caller cannot see the knowledge base or target (an outsider learns
    nothing), PermissionDenied when it sees but may not create there; per-file problems are in
    the report, never raised.
    """
    settings = settings or get_settings()
    started = time.monotonic()
    report = ImportReport(str(actor.run_id), str(knowledge_base_id), str(target_id) if target_id else None, dry_run)
    with units() as s:
        authorize_import(s, actor.principal, knowledge_base_id, target_id)
    prefix = key_prefix(target_id)
    run = _Run(actor, blobs, settings, source)
    files = source.files()
    bytes_total = sum(f.size for f in files)
    done_bytes: dict[str, int] = defaultdict(int)

    def tell(phase: str, done: int, size: int, current: str, total: int) -> None:
        if progress is not None:
            progress(Progress(phase, done, total, done_bytes[phase], bytes_total, current, report))
        done_bytes[phase] += size

    # -- pass 1: prepare ---------------------------------------------------------------------------
    nonce = uuid.uuid4().hex  # placeholders of this run's references (links.mark)
    run.nonce = nonce
    prepared = _prepare_all(
        files,
        jobs,
        lambda n, size, rel: tell("prepare", n, size, rel, len(files)),
        nonce,
        settings.max_markdown_chars,
    )
    run.files = {e.rel: e for e in files if e.error is None and e.read is not None}
    by_rel = {p.rel: p for p in prepared}
    referenced: set[str] = set()
    run.index_names()  # file names only: wiki links to images resolve as the write resolves them
    for p in prepared:
        if p.markdown is None:
            continue
        d = posixpath.dirname(p.rel)
        for t in p.wiki:
            if (rel := run.wiki_target(t, True, d)) is not None:
                referenced.add(rel)
        for url, _img in p.refs:
            if _SCHEME.match(url) or url.startswith(("#", "//")) or url in {a[0] for a in p.assets}:
                continue
            base = unquote(url.split("#", 1)[0].split("?", 1)[0])
            if base:
                referenced.add(posixpath.normpath(posixpath.join(d, base)))
    for i, p in enumerate(prepared):
        if p.kind == "image" and p.markdown is None and p.error is None:
            if p.rel in referenced:
                continue  # an asset of the pages that show it
            data = run.read(p.rel)
            prepared[i] = (
                prepare_bytes(p.rel, data, convert_images=True, nonce=nonce, max_chars=settings.max_markdown_chars)
                if data is not None
                else Prepared(p.rel, p.size, error="cannot read the file", code="CONVERSION_FAILED")
            )
            by_rel[p.rel] = prepared[i]

    # -- pass 2: plan ----------------------------------------------------------------------------
    folders = source.folders()
    pages = [p for p in prepared if p.markdown is not None or p.error is not None]
    asset_only = [p for p in prepared if p.kind == "image" and p.markdown is None and p.error is None]
    keys = [prefix + e.rel + "/" for e in folders] + [prefix + p.rel for p in pages]
    keys += [prefix + e.rel for e in source.entries if not e.is_dir and e.rel not in by_rel]
    with units() as s:
        existing = _existing(s, knowledge_base_id, prefix)
    folders = _folders_to_write(folders, source, {p.rel for p in pages}, existing, prefix)
    for p in pages:
        if p.markdown is not None:
            row = existing.get(prefix + p.rel)
            run.page_ids[p.rel] = row[0] if row else uuid.uuid5(_ID_NAMESPACE, f"{knowledge_base_id}:{prefix}{p.rel}")
    run.index_names()

    # -- pass 3: write -----------------------------------------------------------------------------
    folder_ids: dict[str, uuid.UUID | None] = {"": target_id}
    failed_dirs: set[str] = set()
    for e in source.entries:
        if e.is_dir or e.error is None:
            continue
        if e.rel not in by_rel:
            report.files.append(FileResult(e.rel, "failed", "page", error=e.error, code="CONVERSION_FAILED"))
    for e in folders:
        key = prefix + e.rel + "/"
        parent_rel = _parent_rel(e.rel)
        if parent_rel in failed_dirs or parent_rel not in folder_ids:
            failed_dirs.add(e.rel)
            report.files.append(
                FileResult(e.rel, "failed", "folder", error="its parent folder failed", code="CONVERSION_FAILED")
            )
            continue
        if dry_run:
            row = existing.get(key)
            folder_ids[e.rel] = row[0] if row else None
            status = (
                "would_create"
                if row is None
                else _dry_folder_status(units, row[0], _title_of(e.rel) or e.rel, folder_ids[parent_rel])
            )
            report.files.append(FileResult(e.rel, status, "folder", str(row[0]) if row else None))
            continue
        try:
            with units() as s:
                res = upsert_by_key(
                    s,
                    actor,
                    knowledge_base_id,
                    key,
                    title=_title_of(e.rel) or e.rel,
                    type="folder",
                    parent_id=folder_ids[parent_rel],
                    settings=settings,
                )
                folder_ids[e.rel] = res.document.id
                report.files.append(FileResult(e.rel, res.status, "folder", str(res.document.id)))
        except OpenKBError as exc:
            failed_dirs.add(e.rel)
            report.files.append(FileResult(e.rel, "failed", "folder", error=exc.detail, code=exc.code))
    done = 0
    for start in range(0, len(pages), WRITE_BATCH):
        chunk = pages[start : start + WRITE_BATCH]
        results = (
            None
            if dry_run or len(chunk) == 1
            else _write_batch(units, run, chunk, prefix, existing, folder_ids, failed_dirs, knowledge_base_id, settings)
        )
        if results is None:  # one unit of work per page: a dry run, or a batch that failed as a whole
            results = []
            for p in chunk:
                tell("write", done + len(results) + 1, p.size, p.rel, len(pages))
                results.append(
                    _write_page(
                        units, run, p, prefix, existing, folder_ids, failed_dirs, dry_run, knowledge_base_id, settings
                    )
                )
            report.files.extend(results)
        else:
            report.files.extend(results)  # first: a progress listener sees them with the count
            for i, p in enumerate(chunk, 1):
                tell("write", done + i, p.size, p.rel, len(pages))
        done += len(chunk)
    for p in asset_only:
        if dry_run or p.rel in run.shown:
            report.files.append(FileResult(p.rel, "asset", "asset", bytes=p.size))
        else:  # the page showing it failed: said, not reported as stored
            why = "no page that shows it was written (see the pages' errors); it is not stored: import again"
            report.files.append(FileResult(p.rel, "failed", "asset", bytes=p.size, error=why, code="CONVERSION_FAILED"))
    if prune:
        _prune(units, actor, report, existing, set(keys), prefix, dry_run)
    report.seconds = time.monotonic() - started
    return report


def _prune(
    units: Units,
    actor: Actor,
    report: ImportReport,
    existing: dict[str, tuple[uuid.UUID, str, str]],
    keys: set[str],
    prefix: str,
    dry_run: bool,
) -> None:
    """Trash what an earlier import put here and whose file is gone. Only the topmost of them are
    trashed (a folder takes what is inside along), but every one is reported, ``would_trash``
    or ``trashed``: the dry run and the real run count the same pages (a dry run said 1,511 and
    the real run 11 for the same folders, the 1,500 pages inside them left uncounted)."""
    gone = [(k, row) for k, row in existing.items() if k not in keys and row[1] != "deleted"]
    if not gone:
        return
    ids = {row[0] for _k, row in gone}
    with units() as s:
        top = {doc_id: _gone_ancestor(s, doc_id, ids) for doc_id in ids}  # doc -> topmost gone ancestor
    gone = [(k, row) for k, row in gone if top[row[0]] is not False]  # in the trash with its folder already
    failed: set[uuid.UUID] = set()
    if not dry_run:
        for k, (doc_id, _status, dtype) in sorted(gone, key=lambda kv: kv[0]):
            if top[doc_id] is not None:
                continue  # its folder goes to the trash and takes it along
            try:
                with units() as s:
                    trash_document(s, actor, doc_id)
            except OpenKBError as exc:
                failed.add(doc_id)
                rel = k[len(prefix) :].rstrip("/")
                report.files.append(FileResult(rel, "failed", dtype, str(doc_id), error=exc.detail, code=exc.code))
    for k, (doc_id, _status, dtype) in sorted(gone, key=lambda kv: kv[0], reverse=True):
        if doc_id in failed or top[doc_id] in failed:
            continue  # not trashed: reported as its own (or its folder's) failure
        rel = k[len(prefix) :].rstrip("/")
        report.files.append(FileResult(rel, "would_trash" if dry_run else "trashed", dtype, str(doc_id)))


def _gone_ancestor(s: Session, doc_id: uuid.UUID, gone: set[uuid.UUID]) -> uuid.UUID | None | bool:
    """The topmost ancestor of ``doc_id`` that is in ``gone`` (None: none is); False when an
    ancestor is in the trash already: the page went there with it (a folder's trash does not
    change what is inside), and trashing it on its own would keep it there when the folder is
    restored."""
    parent = s.exec(select(Document.parent_id).where(col(Document.id) == doc_id)).first()
    found: uuid.UUID | None = None
    seen = 0
    while parent is not None and seen < 100:
        if parent in gone:
            found = parent
        up = s.exec(select(Document.parent_id, Document.status).where(col(Document.id) == parent)).first()
        if up is None:
            break
        if up[1] == "deleted":
            return False
        parent = up[0]
        seen += 1
    return found


def _dry_status(
    units: Units,
    run: _Run,
    p: Prepared,
    row: tuple[uuid.UUID, str, str],
    parent_id: uuid.UUID | None,
    settings: Settings,
) -> str:
    """What the real run would answer for an existing page, ``unchanged`` or ``would_update``,
    decided as the upsert decides it (body, title, metadata, tags, place) without writing: an
    asset the page does not hold yet would be a new upload, so a change. A dry run used to say
    ``would_update`` for every page already imported."""
    from openkb.content.versions import current_version, prepare_markdown

    doc_id = row[0]
    if row[1] == "deleted":
        return "would_update"  # the real run refuses it (DOCUMENT_IN_TRASH): not unchanged
    try:
        with units() as s:
            r = _DryResolver(run, p, doc_id, True, s)
            body, meta, _warnings = _page_body(run, p, r)
            doc = s.get(Document, doc_id)
            if r.new_upload or doc is None or doc.type != "page":
                return "would_update"
            cur = current_version(s, doc)
            same = (
                cur is not None
                and cur.markdown == prepare_markdown(body, None, settings)
                and (p.title or _title_of(p.rel, p.markdown)) == doc.title
                and meta == doc.meta
                and (p.tags is None or list(p.tags) == list(doc.tags or []))
                and parent_id == doc.parent_id
            )
            s.rollback()
    except OpenKBError:
        return "would_update"
    return "unchanged" if same else "would_update"


def _dry_folder_status(units: Units, doc_id: uuid.UUID, title: str, parent_id: uuid.UUID | None) -> str:
    with units() as s:
        doc = s.get(Document, doc_id)
        same = doc is not None and doc.status != "deleted" and doc.title == title and doc.parent_id == parent_id
    return "unchanged" if same else "would_update"


class _DryResolver(_Resolver):
    """A resolver that uploads nothing: an asset the page already holds resolves to its id, any
    other marks the page as changed (the real run would upload it)."""

    new_upload = False

    def asset(self, name: str, data: bytes, mime: str) -> str:
        ref = f"{hashlib.sha256(data).hexdigest()}:{posixpath.basename(name)}"
        aid = self.existing_assets.get(ref)
        if aid is None:
            self.new_upload = True
            return f"asset://{uuid.uuid4()}"
        return f"asset://{aid}"


def _existing(s: Session, kb_id: uuid.UUID, prefix: str) -> dict[str, tuple[uuid.UUID, str, str]]:
    like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = s.exec(
        select(Document.external_key, Document.id, Document.status, Document.type).where(
            col(Document.knowledge_base_id) == kb_id, col(Document.external_key).like(like)
        )
    ).all()
    return {k: (i, st, t) for k, i, st, t in rows if k}


class _BatchFailed(Exception):
    """A page failed after the batch's transaction had its rows: the batch is redone page by page."""


def _assets_of(s: Session, doc_ids: list[uuid.UUID]) -> dict[uuid.UUID, dict[str, uuid.UUID]]:
    """Per document, its assets as ``sha256:filename`` -> id (one query for a whole batch)."""
    out: dict[uuid.UUID, dict[str, uuid.UUID]] = {d: {} for d in doc_ids}
    if doc_ids:
        rows = s.exec(
            select(DocumentAsset.document_id, DocumentAsset.id, DocumentAsset.sha256, DocumentAsset.filename).where(
                col(DocumentAsset.document_id).in_(doc_ids)
            )
        ).all()
        for did, aid, sha, name in rows:
            out[did][f"{sha}:{name}"] = aid
    return out


def _write_batch(
    units: Units,
    run: _Run,
    chunk: list[Prepared],
    prefix: str,
    existing: dict[str, tuple[uuid.UUID, str, str]],
    folder_ids: dict[str, uuid.UUID | None],
    failed_dirs: set[str],
    kb_id: uuid.UUID,
    settings: Settings,
) -> list[FileResult] | None:
    """Write ``chunk`` in one unit of work (``KeyedBatch``: a few statements for all its pages);
    None when the batch failed as a whole, and then nothing of it was committed.

    A page refused before it touched the session (a conversion error, a failed folder) fails on
    its own. Trap: a page that fails later may have added upload rows to the transaction, and
    they must not be committed with its batch-mates: the batch is rolled back and the caller
    writes its pages one unit of work each (keys and content-hashed assets make that redo safe).
    """
    results: list[FileResult] = []
    try:
        with units() as s:
            todo = [p for p in chunk if p.error is None and _parent_rel(p.rel) in folder_ids]
            todo = [p for p in todo if _parent_rel(p.rel) not in failed_dirs]
            batch = KeyedBatch(s, run.actor, kb_id, [prefix + p.rel for p in todo], settings=settings)
            known = _assets_of(s, [run.page_ids[p.rel] for p in todo if prefix + p.rel in existing])
            uploads: list[tuple[DocumentAsset, FileResult]] = []
            shown: set[str] = set()
            for p in chunk:
                res = FileResult(
                    p.rel, "failed", "page", converter=p.converter, bytes=p.size, warnings=list(p.warnings)
                )
                results.append(res)
                if p.error is not None:
                    res.error, res.code = p.error, p.code
                    continue
                parent_rel = _parent_rel(p.rel)
                if parent_rel in failed_dirs or parent_rel not in folder_ids:
                    res.error, res.code = "its folder failed", "CONVERSION_FAILED"
                    continue
                doc_id = run.page_ids[p.rel]
                try:
                    batch.refuse_early(prefix + p.rel)  # a page in the trash fails alone, nothing uploaded
                except OpenKBError as exc:
                    res.error, res.code = exc.detail, exc.code
                    continue
                try:
                    r = _Resolver(run, p, doc_id, True, s, known=known.get(doc_id, {}), flush=False)
                    body, meta, warnings = _page_body(run, p, r)
                    up = batch.upsert(
                        KeyedItem(
                            prefix + p.rel,
                            p.title or _title_of(p.rel, p.markdown),
                            body,
                            parent_id=folder_ids[parent_rel],
                            metadata=meta,
                            tags=p.tags if p.tags is not None else None,
                            document_id=doc_id,
                            normalized=True,
                        )
                    )
                except Exception as exc:
                    raise _BatchFailed from exc
                res.warnings += warnings
                if up.document.id != doc_id:  # see the module's trap
                    run.page_ids[p.rel] = up.document.id
                    res.warnings.append("created concurrently by another writer; links to it resolve on the next run")
                res.status, res.document_id = up.status, str(up.document.id)
                uploads += [(a, res) for a in r.uploaded]
                shown |= r.shown
            batch.flush()
            for a, res in uploads:  # attached now that their pages exist (see _attach)
                a.document_id = uuid.UUID(res.document_id) if res.document_id else None
                s.add(a)
            s.flush()
        run.shown |= shown  # committed
    except Exception as exc:  # noqa: BLE001 - whatever failed, nothing of the batch committed: page by page
        stop = _stop_behind(exc)
        if stop is not None:  # Ctrl-C wrapped by what it landed in: stop, not redo page by page
            raise stop from None
        return None
    return results


def _stop_behind(exc: BaseException) -> BaseException | None:
    """The KeyboardInterrupt or SystemExit in ``exc``'s chain, if any. An interrupt landing in
    code that wraps what it raises (an import's ``__set_name__``, a commit) reaches the per-file
    and per-batch handlers as an ordinary exception; taken for a failed file, it was swallowed and
    the import went on to finish with exit 0."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def _page_body(run: _Run, p: Prepared, r: _Resolver) -> tuple[str, dict[str, Any], list[str]]:
    """The page's final body (references filled in), its metadata and the resolver's warnings."""
    body = fill(p.markdown or "", run.nonce, p.refs, r.resolve)
    unresolved: list[str] = []
    if p.wiki:  # wiki links need every file's name: resolved here, with one more parse
        body, unresolved = rewrite(body, lambda _u, _i: None, r.wiki)
    warnings = r.warnings + [f"wiki link {w} is unknown or ambiguous; kept as text" for w in unresolved]
    meta = dict(p.metadata)
    meta["import"] = {"path": p.rel, "converter": p.converter, "confidence": p.confidence}
    if p.source is not None:
        src_ref = r.asset(posixpath.basename(p.rel), p.source, p.mime or "application/octet-stream")
        meta["import"]["source_asset_id"] = src_ref.removeprefix("asset://")
    return body, meta, warnings


def _write_page(
    units: Units,
    run: _Run,
    p: Prepared,
    prefix: str,
    existing: dict[str, tuple[uuid.UUID, str, str]],
    folder_ids: dict[str, uuid.UUID | None],
    failed_dirs: set[str],
    dry_run: bool,
    kb_id: uuid.UUID,
    settings: Settings,
) -> FileResult:
    res = FileResult(p.rel, "failed", "page", converter=p.converter, bytes=p.size, warnings=list(p.warnings))
    if p.error is not None:
        res.error, res.code = p.error, p.code
        return res
    parent_rel = _parent_rel(p.rel)
    if parent_rel in failed_dirs or parent_rel not in folder_ids:
        res.error, res.code = "its folder failed", "CONVERSION_FAILED"
        return res
    key = prefix + p.rel
    row = existing.get(key)
    doc_id = run.page_ids[p.rel]
    res.document_id = str(doc_id)
    if dry_run:
        res.status = (
            "would_create" if row is None else _dry_status(units, run, p, row, folder_ids[parent_rel], settings)
        )
        return res
    try:
        with units() as s:
            r = _Resolver(run, p, doc_id, row is not None, s)
            body, meta, warnings = _page_body(run, p, r)
            res.warnings += warnings
            up = upsert_by_key(
                s,
                run.actor,
                kb_id,
                key,
                title=p.title or _title_of(p.rel, p.markdown),
                markdown=body,
                parent_id=folder_ids[parent_rel],
                metadata=meta,
                tags=p.tags if p.tags is not None else None,
                settings=settings,
                document_id=doc_id,
            )
            if up.document.id != doc_id:  # someone else created the key meanwhile: see the module's trap
                run.page_ids[p.rel] = up.document.id
                res.warnings.append("created concurrently by another writer; links to it resolve on the next run")
            _attach(s, r.new_assets, up.document.id)
            res.status, res.document_id = up.status, str(up.document.id)
        run.shown |= r.shown  # committed
    except OpenKBError as exc:
        res.status, res.error, res.code = "failed", exc.detail, exc.code
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop the batch
        stop = _stop_behind(exc)
        if stop is not None:  # ... but an interrupt must stop the run
            raise stop from None
        res.status, res.error, res.code = "failed", f"{type(exc).__name__}: {str(exc)[:300]}", "INTERNAL_ERROR"
    return res


def _attach(s: Session, asset_ids: list[uuid.UUID], doc_id: uuid.UUID) -> None:
    """Attach this page's new uploads to it: from now on they are readable exactly when the page
    is (docs/markdown.md#accepted-constructs), not only by the importer."""
    for aid in asset_ids:
        a = s.get(DocumentAsset, aid)
        if a is not None and a.document_id is None:
            a.document_id = doc_id
            s.add(a)
    if asset_ids:
        s.flush()
