"""The Milvus collection layer: schema + functions, rows, search, aliases. Works the same against
Milvus Lite 3.x (the embedded default) and a Milvus 2.6 server.

Milvus is a retrieval index, never the permission truth (docs/retrieval.md#principles): every search here is a
*prefilter* and the retrieval service must re-check each candidate in PostgreSQL. The prefilter
itself is not built here either: it is ``openkb.permissions.readable_scope(...)
.to_milvus_filter(FIELD_MAP)``, the permission service's scope rendered over the row fields
below (``FIELD_MAP`` lives here because this module owns the row's field names; retrieval
imports it, and nothing in ``openkb.indexing`` imports retrieval).

Why the rows carry the scalar access fields they do. On Lite a filter is fast only when *every*
field in it has an INVERTED index and the rows are flushed: then ``VARCHAR in [...]``/``==``
become bitmap operations (~1 ms at 20k rows). ``ARRAY_CONTAINS_ANY(access_principals, ...)``
can't be indexed there and costs ~45 µs per row (~11 s per search at 100k rows). So
``access_principals`` is written (spec §6.2, usable on a 2.6 server) but never filtered on; the
readable scope is expressed over indexed scalar fields whose values come from
``openkb.permissions.chunk_access`` (the indexer writes them, nothing here computes them):

* ``tenant_id``, ``workspace_id``, ``knowledge_base_id``, ``document_id`` (the row's place),
* ``doc_status``: the *effective* status (a draft folder makes its pages draft),
* ``scope_doc``: id of the nearest document or folder, the chunk's own document included, whose
  ``permission_mode`` is ``custom``; ``""`` when the chunk inherits the knowledge base,
* ``visibility_eff``: the visibility that governs reading: that custom document's visibility
  when it has one, otherwise the knowledge base's (``private`` | ``workspace`` | ``public``).

A filter mentioning any field without an index (``metadata``, ``title``, ``access_principals``)
silently drops Lite to per-row evaluation: keep extra conditions on ``INDEXED_SCALARS``.
Writers must ``flush`` after each batch: unflushed rows make every filtered search slow. Lite's
flush is not safe with two flushers at once, so OpenKB's writers pass ``flush=False`` here and
flush through ``openkb.indexing.service.flush_collection`` (one flusher per collection, across
processes); ``flush=True`` is for tests and benches.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from pymilvus import AnnSearchRequest, DataType, Function, FunctionType, MilvusClient
from pymilvus.exceptions import MilvusException

from openkb.errors import (
    ConfigError,
    IndexDataRejected,
    IndexError_,
    IndexUnavailable,
    ServiceUnavailable,
    ValidationError,
)
from openkb.indexing.client import DropHandledNotLoaded
from openkb.indexing.lexical import LEXICAL_FIELDS, LEXICAL_V1, analyzer_language, bm25_query, lexical_text
from openkb.indexing.profiles_spec import LANGUAGE_FIELD, ProfileSpec
from openkb.logthrottle import OncePerInterval, throttled
from openkb.permissions import filters as _F

log = logging.getLogger("openkb.indexing.milvus")


class _DropMvccNotice(logging.Filter):
    """pymilvus' query iterator asks the server for an MVCC timestamp; Milvus Lite has none and
    pymilvus warns "failed to get mvccTs ..., use client-side ts instead" on every paged query
    (every ``verify`` and every rebuild catch-up), which reaches the CLI's stderr. The fallback
    it announces is exactly right for us (read-your-writes after our own flush), so the notice is
    dropped; every other pymilvus warning still gets through."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "mvccTs" not in record.getMessage()


_MVCC_FILTER = _DropMvccNotice()
for _name in ("pymilvus.client.iterator.query_iterator", "pymilvus.client.iterator.search_iterator"):
    logging.getLogger(_name).addFilter(_MVCC_FILTER)

# pymilvus logs every failed RPC at ERROR with its whole traceback, and every failed reconnect
# with another: during a Milvus outage that was a 23 KB traceback per search (issue 17). One
# first line per kind of failure per minute, with a count, is all an operator needs.
_ONCE = OncePerInterval()
logging.getLogger("pymilvus.decorators").addFilter(DropHandledNotLoaded())  # first: see its docstring
for _name in (
    "pymilvus.decorators",
    "pymilvus.client.connection_manager",
    "pymilvus.client.grpc_handler",
    "pymilvus.milvus_client.milvus_client",
    "pymilvus.orm.connections",
):
    logging.getLogger(_name).addFilter(_ONCE)

SCHEMA_VERSION = "chunks-1"
# The permission service's scope fields -> row fields: it calls the knowledge-base scope field
# ``scope_kb``; rows call it ``knowledge_base_id``. Pass to ``ReadableScope.to_milvus_filter``.
FIELD_MAP = {_F.SCOPE_KB: "knowledge_base_id"}
BM25_FUNCTION = "openkb_bm25"
EMBED_FUNCTION = "openkb_embed"
RERANK_FUNCTION = "openkb_rerank"
DENSE_FIELD = "dense_vector"
# the BM25 input of profiles with a lexical transform (openkb/indexing/lexical.py), one field
# per transform version; written by ``upsert_rows`` from ``content_text`` when the collection
# has it, never by callers. ``LEXICAL_FIELD`` is the first version's.
LEXICAL_FIELD = LEXICAL_FIELDS[LEXICAL_V1]
_VERSION_OF_FIELD = {field: version for version, field in LEXICAL_FIELDS.items()}
SPARSE_FIELD = "sparse_vector"

ID_MAX = 64
TEXT_MAX = 65535  # Milvus' VARCHAR limit; rows are cut to this many UTF-8 bytes
TITLE_MAX = 2048
HEADINGS_CAP, HEADING_MAX = 32, 512
PRINCIPALS_CAP, PRINCIPAL_MAX = 1024, 128
VISIBILITIES = ("private", "workspace", "public")
DOC_STATUSES = ("draft", "published", "archived", "deleted")

# Fields with an INVERTED index: the only ones a fast filter may mention. Id-like fields with
# one value per row (id, chunk_id) are left out: the pk has its own lookup path and an inverted
# index over unique values costs memory for nothing.
INDEXED_SCALARS = (
    "tenant_id",
    "workspace_id",
    "knowledge_base_id",
    "document_id",
    "version_id",
    "is_current",
    "doc_status",
    "scope_doc",
    "visibility_eff",
    "updated_at",
)
DEFAULT_OUTPUT_FIELDS = (
    "chunk_id",
    "tenant_id",
    "workspace_id",
    "knowledge_base_id",
    "document_id",
    "version_id",
    "doc_status",
    "scope_doc",
    "visibility_eff",
    "title",
    "heading_path",
    "content_text",
    "metadata",
    "updated_at",
)
# The longest id list a caller should put into one filter clause: the expression is parsed per
# search, so beyond this many ids callers filter afterwards instead (PostgreSQL checks anyway).
MAX_FILTER_IDS = 5000
_ID_RE = re.compile(r"^[A-Za-z0-9_.:\-]{1,64}$")
HNSW_PARAMS = {"M": 16, "efConstruction": 200}
# Search-time ef. Measured on Lite at 20k USE vectors: recall@40 vs exact 0.52 at ef=64, 0.80 at
# 256, 0.90 at 512, while the search took ~40 ms at 64 and 256 alike (Lite's per-call overhead
# dominates) and ~70 ms at 512.
HNSW_EF = 256


# --- schema --------------------------------------------------------------------------------------


def collection_schema(spec: ProfileSpec) -> Any:
    """The docs/retrieval.md#collections schema plus the scope fields, with the BM25 (and TEXTEMBEDDING) functions."""
    s = MilvusClient.create_schema(
        auto_id=False, enable_dynamic_field=False, description=f"openkb {SCHEMA_VERSION} profile {spec.name}"
    )
    s.add_field("id", DataType.VARCHAR, is_primary=True, max_length=ID_MAX)
    for name in ("chunk_id", "tenant_id", "workspace_id", "knowledge_base_id", "document_id", "version_id"):
        s.add_field(name, DataType.VARCHAR, max_length=ID_MAX)
    s.add_field("is_current", DataType.BOOL)
    s.add_field("doc_status", DataType.VARCHAR, max_length=16)
    s.add_field("scope_doc", DataType.VARCHAR, max_length=ID_MAX)
    s.add_field("visibility_eff", DataType.VARCHAR, max_length=16)
    s.add_field("title", DataType.VARCHAR, max_length=TITLE_MAX)
    s.add_field(
        "heading_path", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=HEADINGS_CAP, max_length=HEADING_MAX
    )
    if spec.lexical:
        s.add_field("content_text", DataType.VARCHAR, max_length=TEXT_MAX)
        s.add_field(
            LEXICAL_FIELDS[spec.lexical],
            DataType.VARCHAR,
            max_length=TEXT_MAX,
            enable_analyzer=True,
            analyzer_params=dict(spec.bm25_analyzer),
        )
    elif spec.multi_analyzer:
        # which analyzer reads each row: the row's language (written by upsert_rows, never by callers)
        s.add_field(LANGUAGE_FIELD, DataType.VARCHAR, max_length=16)
        s.add_field(
            "content_text",
            DataType.VARCHAR,
            max_length=TEXT_MAX,
            enable_analyzer=True,
            multi_analyzer_params=dict(spec.bm25_analyzer),
        )
    else:
        s.add_field(
            "content_text",
            DataType.VARCHAR,
            max_length=TEXT_MAX,
            enable_analyzer=True,
            analyzer_params=dict(spec.bm25_analyzer),
        )
    s.add_field("content_markdown", DataType.VARCHAR, max_length=TEXT_MAX)
    s.add_field("metadata", DataType.JSON)
    s.add_field(
        "access_principals",
        DataType.ARRAY,
        element_type=DataType.VARCHAR,
        max_capacity=PRINCIPALS_CAP,
        max_length=PRINCIPAL_MAX,
    )
    if spec.embedding is not None:
        s.add_field(DENSE_FIELD, DataType.FLOAT_VECTOR, dim=spec.vector_dim)
    s.add_field(SPARSE_FIELD, DataType.SPARSE_FLOAT_VECTOR)
    s.add_field("created_at", DataType.INT64)
    s.add_field("updated_at", DataType.INT64)
    s.add_function(
        Function(
            name=BM25_FUNCTION,
            function_type=FunctionType.BM25,
            input_field_names=[LEXICAL_FIELDS[spec.lexical] if spec.lexical else "content_text"],
            output_field_names=[SPARSE_FIELD],
        )
    )
    if spec.embedding is not None:
        s.add_function(
            Function(
                name=EMBED_FUNCTION,
                function_type=FunctionType.TEXTEMBEDDING,
                input_field_names=["content_text"],
                output_field_names=[DENSE_FIELD],
                params=spec.embedding.function_params(),
            )
        )
    return s


def index_params(client: MilvusClient, spec: ProfileSpec) -> Any:
    ip = client.prepare_index_params()
    for name in INDEXED_SCALARS:
        ip.add_index(field_name=name, index_type="INVERTED", index_name=f"ix_{name}")
    ip.add_index(
        field_name=SPARSE_FIELD, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25", index_name=f"ix_{SPARSE_FIELD}"
    )
    if spec.embedding is not None:
        ip.add_index(
            field_name=DENSE_FIELD,
            index_type="HNSW",
            metric_type="COSINE",
            index_name=f"ix_{DENSE_FIELD}",
            params=dict(HNSW_PARAMS),
        )
    return ip


def ensure_collection(client: MilvusClient, spec: ProfileSpec) -> bool:
    """Create and load the profile's collection; True if it was created. An existing collection
    whose shape differs from ``spec`` raises ``ConfigError`` instead of being written into (mixing
    vector spaces in one collection is what the rebuild flow exists to avoid)."""
    name = spec.collection_name
    try:
        if client.has_collection(name):
            _check_compatible(client.describe_collection(name), spec)
            client.load_collection(name)
            return False
        client.create_collection(name, schema=collection_schema(spec))
        # sync=False: pymilvus otherwise polls every index with a 0.5 s sleep (6 s for these 12),
        # and on a new, empty collection there is nothing to wait for.
        client.create_index(name, index_params(client, spec), sync=False)
        client.load_collection(name)
        return True
    except MilvusException as exc:
        raise IndexError_(f"cannot create/load collection {name}: {exc.message}") from exc


def _check_compatible(desc: Mapping[str, Any], spec: ProfileSpec) -> None:
    fields = {f["name"]: f for f in desc.get("fields", [])}
    problems = [f"missing field {n}" for n in ("id", "scope_doc", "visibility_eff", SPARSE_FIELD) if n not in fields]
    has = [f for f in LEXICAL_FIELDS.values() if f in fields]
    want = [LEXICAL_FIELDS[spec.lexical]] if spec.lexical else []
    if has != want:
        problems.append(
            f"profile lexical transform is {spec.lexical!r} but the collection has "
            f"{', '.join(has) + (' field' if len(has) == 1 else ' fields') if has else 'no lexical field'}"
            + (f" (it needs {want[0]})" if want else "")
        )
    if spec.multi_analyzer != (LANGUAGE_FIELD in fields):
        problems.append(
            f"profile {'has' if spec.multi_analyzer else 'has no'} multi-language analyzers but the collection "
            f"{'has' if LANGUAGE_FIELD in fields else 'has no'} {LANGUAGE_FIELD} field"
        )
    dense = fields.get(DENSE_FIELD)
    if spec.embedding is None and dense is not None:
        problems.append("collection has a dense field but the profile is BM25-only")
    if spec.embedding is not None:
        if dense is None:
            problems.append("collection is BM25-only but the profile has an embedding")
        elif int((dense.get("params") or {}).get("dim", -1)) != spec.vector_dim:
            problems.append(f"dense dim {(dense.get('params') or {}).get('dim')} != {spec.vector_dim}")
        funcs = {f["name"]: f for f in desc.get("functions", [])}
        emb = funcs.get(EMBED_FUNCTION)
        if emb is None:
            problems.append(f"function {EMBED_FUNCTION} missing")
        else:
            params = emb.get("params") or {}
            for key in ("model_name", "base_url", "provider"):
                want = getattr(spec.embedding, key)
                if want is not None and str(params.get(key)) != str(want):
                    problems.append(f"{EMBED_FUNCTION}.{key} is {params.get(key)!r}, profile wants {want!r}")
    if problems:
        raise ConfigError(
            f"collection {spec.collection_name} does not match profile {spec.name}: "
            + "; ".join(problems)
            + " (create a new collection version instead)"
        )


def drop_collection(client: MilvusClient, collection: str) -> None:
    """Drop an old collection; refuses while any alias still points at it (rollback safety)."""
    aliases = client.list_aliases(collection_name=collection)
    names = aliases.get("aliases", []) if isinstance(aliases, Mapping) else list(aliases or [])
    if names:
        raise ValidationError(
            f"collection {collection} is the target of alias(es) {', '.join(names)}; switch them first"
        )
    client.drop_collection(collection)


# --- rows ----------------------------------------------------------------------------------------


def _cut(text: str, max_bytes: int) -> str:
    """Cut to ``max_bytes`` UTF-8 bytes on a character boundary. Lite counts characters, a 2.6
    server counts bytes: cutting by bytes satisfies both."""
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode("utf-8", errors="ignore")


def _check_id(value: Any, what: str, *, allow_empty: bool = False) -> str:
    s = str(value) if value is not None else ""
    if s == "" and allow_empty:
        return s
    if not _ID_RE.match(s):
        raise ValidationError(f"{what} {s!r} is not a valid id (UUID-like, at most {ID_MAX} chars)", field=what)
    return s


def chunk_row(
    *,
    chunk_id: Any,
    tenant_id: Any,
    workspace_id: Any,
    knowledge_base_id: Any,
    document_id: Any,
    version_id: Any,
    doc_status: str,
    visibility_eff: str,
    scope_doc: Any = "",
    is_current: bool = True,
    title: str = "",
    heading_path: Sequence[str] = (),
    content_text: str = "",
    content_markdown: str = "",
    metadata: Mapping[str, Any] | None = None,
    access_principals: Sequence[str] = (),
    created_at: int | None = None,
    updated_at: int | None = None,
) -> dict[str, Any]:
    """One Milvus row for one ``document_chunks`` row (``id == chunk_id``), sizes cut to the
    schema. Timestamps are epoch milliseconds. See the module docstring for ``scope_doc`` and
    ``visibility_eff``; ``access_principals`` is stored for 2.6 servers but not filtered on."""
    if doc_status not in DOC_STATUSES:
        raise ValidationError(f"doc_status must be one of {DOC_STATUSES} (got {doc_status!r})", field="doc_status")
    if visibility_eff not in VISIBILITIES:
        raise ValidationError(
            f"visibility_eff must be one of {VISIBILITIES} (got {visibility_eff!r})", field="visibility_eff"
        )
    now = int(time.time() * 1000)
    cid = _check_id(chunk_id, "chunk_id")
    principals = [_cut(str(p), PRINCIPAL_MAX) for p in access_principals]
    if len(principals) > PRINCIPALS_CAP:
        log.warning(
            "chunk %s has %d access principals; keeping %d (the field is informational)",
            cid,
            len(principals),
            PRINCIPALS_CAP,
        )
        principals = principals[:PRINCIPALS_CAP]
    return {
        "id": cid,
        "chunk_id": cid,
        "tenant_id": _check_id(tenant_id, "tenant_id"),
        "workspace_id": _check_id(workspace_id, "workspace_id"),
        "knowledge_base_id": _check_id(knowledge_base_id, "knowledge_base_id"),
        "document_id": _check_id(document_id, "document_id"),
        "version_id": _check_id(version_id, "version_id"),
        "is_current": bool(is_current),
        "doc_status": doc_status,
        "scope_doc": _check_id(scope_doc, "scope_doc", allow_empty=True),
        "visibility_eff": visibility_eff,
        "title": _cut(title or "", TITLE_MAX),
        "heading_path": [_cut(str(h), HEADING_MAX) for h in heading_path][:HEADINGS_CAP],
        "content_text": _cut(content_text or "", TEXT_MAX),
        "content_markdown": _cut(content_markdown or "", TEXT_MAX),
        "metadata": dict(metadata or {}),
        "access_principals": principals,
        "created_at": int(created_at if created_at is not None else now),
        "updated_at": int(updated_at if updated_at is not None else now),
    }


def upsert_rows(
    client: MilvusClient,
    collection: str,
    rows: Iterable[Mapping[str, Any]],
    *,
    batch_size: int = 256,
    flush: bool = True,
) -> int:
    """Upsert in batches, then flush (filtered searches are slow over unflushed rows on Lite).

    Each batch is one request from Milvus to the embedding service: with the local USE model
    256 rows take ~2 s; keep ``batch_size`` small for slow models (Lite's HTTP timeout is 60 s)."""
    total = 0
    batch: list[dict[str, Any]] = []
    try:
        derived = _derived_fields(client, collection)
        for row in rows:
            batch.append(_derive(dict(row), derived))
            if len(batch) >= batch_size:
                total += _upsert(client, collection, batch)
                batch = []
        if batch:
            total += _upsert(client, collection, batch)
        if flush and total:
            client.flush(collection)
    except MilvusException as exc:
        from openkb.indexing.client import is_data_error

        kind = IndexDataRejected if is_data_error(exc) else IndexError_
        raise kind(f"upsert into {collection} failed after {total} rows: {exc.message}") from exc
    return total


_derived: dict[tuple[int, str], frozenset[str]] = {}


def _derive(row: dict[str, Any], derived: frozenset[str]) -> dict[str, Any]:
    """Fill the fields OpenKB computes from ``content_text`` for collections that have them:
    ``lexical_text`` (Lite profiles, openkb/indexing/lexical.py) and ``language`` (2.6 profiles
    with multi-language analyzers: which analyzer reads the row)."""
    if "content_text" in row:
        for name in derived:
            version = _VERSION_OF_FIELD.get(name)
            if version is not None:
                row[name] = _cut(lexical_text(row["content_text"], version), TEXT_MAX)
        if LANGUAGE_FIELD in derived:
            row[LANGUAGE_FIELD] = analyzer_language(row["content_text"])
    return row


def with_lexical(client: MilvusClient, collection: str, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` ready for a raw ``client.insert``: with ``lexical_text`` / ``language`` when the
    collection has them. Every writer that bypasses ``upsert_rows`` must pass its rows through here."""
    derived = _derived_fields(client, collection)
    return [_derive(dict(r), derived) for r in rows]


def _derived_fields(client: MilvusClient, collection: str) -> frozenset[str]:
    """Which computed fields ``collection`` stores; asked once per client and collection
    (a collection's fields never change). Trap: an alias may move to a collection of the other
    kind, so a name that turns out to be an alias is asked every time, never cached."""
    key = (id(client), collection)
    hit = _derived.get(key)
    if hit is None:
        desc = client.describe_collection(collection)
        names = {f.get("name") for f in desc.get("fields", [])}
        hit = frozenset(n for n in (*LEXICAL_FIELDS.values(), LANGUAGE_FIELD) if n in names)
        if desc.get("collection_name", collection) == collection:
            _derived[key] = hit
    return hit


def forget_lexical_fields() -> None:
    _derived.clear()


#: Milvus Lite's answer to an insert that overlaps a flush of its collection (seen in CI: four
#: threads upserting and flushing one collection, one upsert in ~6,000 runs)
_WRITE_RACE = "write to closed file"
_WRITE_RACE_RETRIES = 5


def _upsert(client: MilvusClient, collection: str, batch: list[dict[str, Any]]) -> int:
    """One upsert request. Lite's insert/flush race is retried briefly: an upsert of the same rows
    by primary key is idempotent, so a request that failed part-way is simply made again."""
    for attempt in range(_WRITE_RACE_RETRIES + 1):
        try:
            res = client.upsert(collection, batch)
            break
        except MilvusException as exc:
            if _WRITE_RACE not in str(exc.message) or attempt == _WRITE_RACE_RETRIES:
                raise
            time.sleep(0.02 * (attempt + 1))
    return int(res.get("upsert_count", len(batch)) if isinstance(res, Mapping) else len(batch))


def update_scalars(
    client: MilvusClient,
    collection: str,
    filter: str,
    values: Mapping[str, Any],
    *,
    flush: bool = True,
    page: int = 1000,
) -> int:
    """Change scalar fields (``scope_doc``, ``visibility_eff``, ``doc_status``, ``is_current``) of
    every row matching ``filter`` with a partial upsert, without reading chunks from PostgreSQL.
    Used when a permission mode, visibility or status changes without a new version. Milvus Lite
    merges the stored row and re-runs the functions, so this still costs one embedding request
    per ``page`` rows (measured: the stored vectors come back equal up to float noise)."""
    allowed = {
        "scope_doc",
        "visibility_eff",
        "doc_status",
        "is_current",
        "title",
        "metadata",
        "access_principals",
        "updated_at",
    }
    bad = set(values) - allowed
    if bad:
        raise ValidationError(f"update_scalars cannot change {sorted(bad)}")
    try:
        ids = [r["id"] for r in query_rows(client, collection, filter, output_fields=["id"], limit=None)]
        for start in range(0, len(ids), page):
            client.upsert(collection, [{"id": i, **values} for i in ids[start : start + page]], partial_update=True)
        if flush and ids:
            client.flush(collection)
    except MilvusException as exc:
        raise IndexError_(f"partial update of {collection} failed: {exc.message}") from exc
    return len(ids)


def delete_rows(
    client: MilvusClient,
    collection: str,
    ids: Sequence[str] | None = None,
    *,
    filter: str | None = None,
    flush: bool = True,
    page: int = 1000,
) -> int:
    """Delete by primary keys or by a filter (exactly one of them), then flush."""
    if (ids is None) == (filter is None):
        raise ValidationError("delete_rows takes ids or filter, not both or neither")
    deleted = 0
    try:
        if ids is not None:
            id_list = [_check_id(i, "id") for i in ids]
            for start in range(0, len(id_list), page):
                res = client.delete(collection, ids=id_list[start : start + page])
                deleted += _count(res, len(id_list[start : start + page]))
        else:
            if not filter or not filter.strip():
                raise ValidationError("refusing to delete with an empty filter")
            deleted = _count(client.delete(collection, filter=filter), 0)
        if flush:
            client.flush(collection)
    except MilvusException as exc:
        raise IndexError_(f"delete from {collection} failed: {exc.message}") from exc
    return deleted


def _count(res: Any, default: int) -> int:
    """pymilvus 3 returns the deleted primary keys; older clients a ``{"delete_count": n}``."""
    if isinstance(res, Mapping):
        return int(res.get("delete_count", default))
    if isinstance(res, (list, tuple)):
        return len(res)
    return default


def query_rows(
    client: MilvusClient,
    collection: str,
    filter: str,
    *,
    output_fields: Sequence[str] = DEFAULT_OUTPUT_FIELDS,
    limit: int | None = 100,
) -> list[dict[str, Any]]:
    """Scalar query; ``limit=None`` pages through everything (16,384 rows per request)."""
    try:
        if limit is not None:
            return list(client.query(collection, filter=filter, output_fields=list(output_fields), limit=limit))
        out: list[dict[str, Any]] = []
        it = client.query_iterator(collection, filter=filter, output_fields=list(output_fields), batch_size=16384)
        try:
            while True:
                page = it.next()
                if not page:
                    break
                out.extend(page)
        finally:
            it.close()
        return out
    except MilvusException as exc:
        raise ServiceUnavailable(f"query on {collection} failed: {exc.message}") from exc


def count_rows(client: MilvusClient, collection: str, filter: str = "") -> int:
    try:
        res = client.query(collection, filter=filter, output_fields=["count(*)"])
    except MilvusException as exc:
        raise ServiceUnavailable(f"count on {collection} failed: {exc.message}") from exc
    return int(res[0]["count(*)"]) if res else 0


def recent(
    client: MilvusClient,
    collection: str,
    filter: str,
    limit: int = 20,
    *,
    since_ms: int | None = None,
    scan_cap: int = 16384,
    output_fields: Sequence[str] = DEFAULT_OUTPUT_FIELDS,
) -> list[dict[str, Any]]:
    """Most recently updated rows in ``filter`` (Milvus has no ORDER BY): scans up to
    ``scan_cap`` (id, updated_at) pairs, sorts them, then fetches the top ``limit`` rows. Exact
    when at most ``scan_cap`` rows match; pass ``since_ms`` to keep it so on big collections."""
    expr = filter if since_ms is None else and_filters(filter, f"updated_at >= {int(since_ms)}")
    keys = query_rows(client, collection, expr, output_fields=["id", "updated_at"], limit=scan_cap)
    keys.sort(key=lambda r: r.get("updated_at") or 0, reverse=True)
    top = [r["id"] for r in keys[:limit]]
    if not top:
        return []
    try:
        rows = client.get(collection, ids=top, output_fields=list(output_fields))
    except MilvusException as exc:
        raise ServiceUnavailable(f"get on {collection} failed: {exc.message}") from exc
    rank = {i: n for n, i in enumerate(top)}
    return sorted(rows, key=lambda r: rank.get(r["id"], len(rank)))


# --- filters -------------------------------------------------------------------------------------


def and_filters(*exprs: str | None) -> str:
    kept = [e.strip() for e in exprs if e and e.strip()]
    return " and ".join(f"({e})" for e in kept)


# --- search --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    """One chunk found. ``score`` is in [0, 1] (docs/retrieval.md#scores); ``lexical`` and
    ``dense`` are the route scores it was fused from (``lexical`` 0 = no query term matched)."""

    id: str
    score: float
    fields: Mapping[str, Any]
    lexical: float = 0.0
    dense: float = 0.0
    # how it was ranked: "hybrid", "bm25", "hybrid+rerank", "bm25+rerank"; a profile with a
    # rerank function whose hits say "hybrid" was served degraded (docs/retrieval.md#degradation)
    ranking: str = ""

    @property
    def chunk_id(self) -> str:
        return str(self.fields.get("chunk_id", self.id))

    @property
    def document_id(self) -> str | None:
        return self.fields.get("document_id")

    @property
    def knowledge_base_id(self) -> str | None:
        return self.fields.get("knowledge_base_id")

    @property
    def content_text(self) -> str:
        return self.fields.get("content_text") or ""


def _hits(raw: Any, *, bm25_only: bool = False) -> list[Hit]:
    out: list[Hit] = []
    for h in raw[0] if raw else []:
        entity = dict(h.get("entity") or {})
        score = float(h.get("distance", 0.0))
        if bm25_only:
            score = abs(score)  # BM25 scores are >= 0; Lite reports them negated as a distance
        out.append(Hit(id=str(h.get("id", entity.get("id"))), score=score, fields=entity))
    return out


# The BM25 route of a hybrid search runs here while the caller's thread runs the dense route.
_ROUTES = ThreadPoolExecutor(max_workers=8, thread_name_prefix="openkb-bm25")


def _bm25_route(
    client: MilvusClient,
    collection: str,
    query_text: str,
    filter: str,
    limit: int,
    fields: list[str],
    timeout: float | None,
    params: Mapping[str, Any] | None = None,
) -> list[Hit]:
    if not query_text:  # only stop words: nothing for BM25 to match
        return []
    raw = client.search(
        collection,
        data=[query_text],
        anns_field=SPARSE_FIELD,
        filter=filter or "",
        limit=limit,
        output_fields=fields,
        search_params=dict(params or {"metric_type": "BM25"}),
        timeout=timeout,
    )
    return [h for h in _hits(raw, bm25_only=True) if h.score > 0]


def bm25_search_params(spec: ProfileSpec, query_text: str) -> dict[str, Any]:
    """The BM25 route's search params: with multi-language analyzers the query is analyzed like
    the rows of its own language (docs/retrieval.md#lexical-analysis), else the field's analyzer."""
    params: dict[str, Any] = {"metric_type": "BM25"}
    if spec.multi_analyzer:
        params["analyzer_name"] = analyzer_language(query_text)
    return params


def _reranked(hits: list[Hit]) -> list[Hit]:
    """A rerank model's relevance scores, clamped to [0, 1] (cohere-style scores already are)."""
    return [Hit(id=h.id, score=min(1.0, max(0.0, h.score)), fields=h.fields) for h in hits]


def _rerank_function(spec: ProfileSpec, query_text: str) -> Function | None:
    if spec.rerank is None:
        return None
    return Function(
        name=RERANK_FUNCTION,
        input_field_names=["content_text"],
        function_type=FunctionType.RERANK,
        params=spec.rerank.function_params(query_text),
    )


# --- fusion (docs/retrieval.md#scores) -----------------------------------------------------------
# Tuned on the development sets with bench/quality.py (figures in docs/retrieval.md#fusion).
LEXICAL_WEIGHT = 0.7
DENSE_WEIGHT = 0.3
# A chunk no query term matched must be at least this close (cosine) to the query to be shown:
# below it the dense route only returns "the nearest of nothing" (a nonsense query's neighbours).
DENSE_FLOOR = 0.30
# cosine at or above this counts as a perfect semantic match (the model's cosines rarely exceed it)
DENSE_CEILING = 0.80
# A keyword match is worth at least this much of the lexical weight, however far its BM25 score
# is below the query's best. Why: Lite computes BM25 statistics per segment, so the same word in
# equal chunks scored 0.3x-1x of the best depending on which segment holds the row, and a chunk
# containing the query word fell below a dozen keyword-less neighbours.
LEXICAL_BASE = 0.5


def _dense_sim(cosine: float) -> float:
    return min(1.0, max(0.0, (cosine - DENSE_FLOOR) / (DENSE_CEILING - DENSE_FLOOR)))


def fuse(
    lexical: Sequence[Hit],
    dense: Sequence[Hit],
    limit: int,
    *,
    lexical_weight: float | None = None,
    dense_weight: float | None = None,
    dense_floor: float | None = None,
) -> list[Hit]:
    """Score-aware fusion of the two routes into hits scored in [0, 1].

    ``score = wl * lexical + wd * dense_sim`` where ``lexical`` is ``LEXICAL_BASE + (1 -
    LEXICAL_BASE) * bm25 / best_bm25`` for a chunk the BM25 route found (0 otherwise),
    ``best_bm25`` the best BM25 score of this query's candidates, and ``dense_sim`` maps cosine
    [floor, ceiling] to [0, 1].
    Why not RRF: RRF throws the scores away, so a chunk that is the only one containing a query
    word ranks level with the dense route's nearest neighbour and is often outranked; and RRF
    values (0.015-0.033) mean nothing to a reader. Here a chunk both routes rank first gets the
    highest possible fused score (max of each term), so fusion never drops it; with ``wl >= wd``
    the best keyword match beats any chunk without a keyword, and with the defaults
    (``wl * LEXICAL_BASE`` 0.35 > ``wd`` 0.3) every keyword match does.

    Trap: ``dense`` hits carry the raw cosine in ``score``; ``lexical`` hits the raw BM25 score.
    A chunk in no lexical hit and below ``dense_floor`` is dropped (the relevance floor)."""
    base = LEXICAL_BASE
    wl = LEXICAL_WEIGHT if lexical_weight is None else lexical_weight
    wd = DENSE_WEIGHT if dense_weight is None else dense_weight
    floor = DENSE_FLOOR if dense_floor is None else dense_floor
    best_lex = max((h.score for h in lexical), default=0.0)
    merged: dict[str, dict[str, Any]] = {}
    for h in lexical:
        if h.score > 0:
            merged[h.id] = {
                "fields": h.fields,
                "cos": None,
                "lex": base + (1 - base) * h.score / best_lex if best_lex > 0 else 0.0,
            }
    for h in dense:
        m = merged.get(h.id)
        if m is None:
            if h.score < floor:
                continue
            merged[h.id] = {"fields": h.fields, "lex": 0.0, "cos": h.score}
        else:
            m["cos"] = h.score
            m["fields"] = {**h.fields, **m["fields"]}
    out = []
    for cid, m in merged.items():
        sim = _dense_sim(m["cos"]) if m["cos"] is not None else 0.0
        total = wl + wd
        score = (wl * m["lex"] + wd * sim) / total if total else 0.0
        out.append(
            Hit(
                id=cid,
                score=round(min(1.0, max(0.0, score)), 6),
                fields=m["fields"],
                lexical=m["lex"],
                dense=float(m["cos"] or 0.0),
            )
        )
    out.sort(key=lambda h: (-h.score, -h.lexical, h.id))
    return out[:limit]


def _normalize_lexical(hits: list[Hit]) -> list[Hit]:
    best = max((h.score for h in hits), default=0.0)
    return [
        Hit(
            id=h.id,
            score=round(h.score / best, 6) if best > 0 else 0.0,
            fields=h.fields,
            lexical=h.score / best if best > 0 else 0.0,
        )
        for h in hits
        if h.score > 0
    ]


# What this process's searches last saw of the dense route (``/readyz`` reports it:
# openkb.health.dense_readiness): monotonic times of the last success and failure.
DENSE_ROUTE: dict[str, Any] = {"ok_at": 0.0, "failed_at": 0.0, "error": ""}


def hybrid_search(
    client: MilvusClient,
    collection: str,
    query_text: str,
    filter: str,
    limit: int,
    spec: ProfileSpec,
    *,
    candidates: int | None = None,
    output_fields: Sequence[str] = DEFAULT_OUTPUT_FIELDS,
    timeout: float | None = None,
    degraded: list[str] | None = None,
) -> list[Hit]:
    """Dense (Milvus embeds the raw query through the TEXTEMBEDDING function) + BM25, fused by
    score (``fuse``); BM25 alone for BM25-only profiles, scored relative to the query's best
    match; with a RERANK function, Milvus' hybrid search reranked by the model. Every score is in
    [0, 1] (docs/retrieval.md#scores). ``collection`` may be an alias.

    Degrades instead of failing, logging a warning each time: a failed rerank is retried
    without it (docs/retrieval.md#degradation), and a failed dense route (embedding service down) is retried
    BM25-only. Only when BM25 fails too is ``IndexUnavailable`` raised. ``degraded``, when
    given, receives the parts the answer went without (``"dense"``, ``"rerank"``), so the
    response can say so (docs/retrieval.md#degradation)."""
    query_text = (query_text or "").strip()
    if not query_text or limit <= 0:
        return []
    # the BM25 route meets the stored lexical_text on the same terms, and a version number
    # written with or without its "v" meets the other spelling (openkb/indexing/lexical.py)
    lex_query = bm25_query(query_text, spec.lexical)
    bm25_params = bm25_search_params(spec, query_text)
    per_route = min(16384, candidates or max(limit * 4, 40))
    fields = list(output_fields)
    rerank = _rerank_function(spec, query_text)
    # (label, use the dense route, ranker); tried in order until one succeeds
    attempts: list[tuple[str, bool, Function | None]] = []
    if spec.has_dense:
        if rerank is not None:
            attempts.append(("hybrid+rerank", True, rerank))
        attempts.append(("hybrid", True, None))
    elif rerank is not None:
        attempts.append(("bm25+rerank", False, rerank))
    attempts.append(("bm25", False, None))

    first_error: MilvusException | None = None
    for label, dense, ranker in attempts:
        try:
            if dense and ranker is not None:
                reqs = [
                    AnnSearchRequest(
                        data=[query_text],
                        anns_field=DENSE_FIELD,
                        limit=per_route,
                        expr=filter or None,
                        param={"metric_type": "COSINE", "params": {"ef": max(HNSW_EF, per_route)}},
                    ),
                    AnnSearchRequest(
                        data=[lex_query or query_text],
                        anns_field=SPARSE_FIELD,
                        limit=per_route,
                        expr=filter or None,
                        param=bm25_params,
                    ),
                ]
                raw = client.hybrid_search(
                    collection, reqs, ranker=ranker, limit=limit, output_fields=fields, timeout=timeout
                )
                hits = _reranked(_hits(raw))
            elif dense:
                # both routes, fused here (``fuse``): their scores are kept, unlike Milvus' RRF
                # in parallel: Milvus serves both at once, so fusing here costs no extra round trip
                # Measured on Lite (bench/quality.py): both routes with their fields take ~1.25x one
                # RRF hybrid call; ids-only routes plus a ``get`` of the fused top are slower, and
                # ``output_fields=[]`` is slower still (Lite then returns every field).
                lex_f = _ROUTES.submit(
                    _bm25_route, client, collection, lex_query, filter, per_route, fields, timeout, bm25_params
                )
                raw = client.search(
                    collection,
                    data=[query_text],
                    anns_field=DENSE_FIELD,
                    filter=filter or "",
                    limit=per_route,
                    output_fields=fields,
                    timeout=timeout,
                    search_params={"metric_type": "COSINE", "params": {"ef": max(HNSW_EF, per_route)}},
                )
                hits = fuse(lex_f.result(), _hits(raw), limit)
            elif ranker is not None:
                raw = client.search(
                    collection,
                    data=[lex_query or query_text],
                    anns_field=SPARSE_FIELD,
                    filter=filter or "",
                    limit=per_route,
                    output_fields=fields,
                    search_params=bm25_params,
                    ranker=ranker,
                    timeout=timeout,
                )
                hits = _reranked(_hits(raw))[:limit]
            else:
                hits = _normalize_lexical(
                    _bm25_route(client, collection, lex_query, filter, limit, fields, timeout, bm25_params)
                )
        except MilvusException as exc:
            first_error = first_error or exc
            if dense:
                DENSE_ROUTE.update(failed_at=time.monotonic(), error=str(exc.message).splitlines()[0][:300])
            throttled(
                log,
                f"degrade|{collection}|{label}",
                logging.WARNING,
                "search on %s: %s failed (%s); degrading",
                collection,
                label,
                str(exc.message).splitlines()[0][:300],
            )
            continue
        if dense:
            DENSE_ROUTE["ok_at"] = time.monotonic()
        if degraded is not None and first_error is not None:
            wanted = attempts[0][0]
            for part, mark in (("dense", "hybrid"), ("rerank", "+rerank")):
                if mark in wanted and mark not in label and part not in degraded:
                    degraded.append(part)
        return [replace(h, ranking=label) for h in hits]
    assert first_error is not None
    raise IndexUnavailable(f"search on {collection} failed: {first_error.message}", retry_after=5)


# --- aliases, load, compaction -------------------------------------------------------------------


def alias_target(client: MilvusClient, alias: str) -> str | None:
    """The collection ``alias`` points at, or None when the alias does not exist."""
    try:
        desc = client.describe_alias(alias)
    except MilvusException:
        return None
    return (desc or {}).get("collection_name") or None


def switch_alias(client: MilvusClient, alias: str, collection: str) -> str | None:
    """Point ``alias`` at ``collection`` (create or alter) and return the previous target."""
    previous = alias_target(client, alias)
    if previous == collection:
        return previous
    try:
        if previous is None:
            client.create_alias(collection, alias)
        else:
            client.alter_alias(collection, alias)
    except MilvusException as exc:
        raise IndexError_(f"cannot point alias {alias} at {collection}: {exc.message}") from exc
    log.info("alias %s: %s -> %s", alias, previous, collection)
    return previous


def _warm_probe_filter() -> str:
    """The filter ``warm`` probes with: what retrieval sends for an anonymous reader (the
    permission service's ``ReadableScope`` form, rendered with retrieval's field names, plus
    ``is_current``), so the probes touch the same inverted indexes as real searches.

    It is built from a ``ReadableScope`` constructed directly, not from ``readable_scope``:
    a probe needs no permission decision, because its tenant ``"warmup"`` is not an id any tenant
    can have (tenant ids are UUIDs) and its results are discarded, so it returns nothing to
    anyone."""
    from openkb.permissions import ReadableScope

    return and_filters(ReadableScope(tenant_id="warmup", public=True).to_milvus_filter(FIELD_MAP), "is_current == true")


def warm(client: MilvusClient, collection: str, spec: ProfileSpec, *, budget_s: float = 120.0) -> float:
    """Load the collection and run probe searches until they are fast, so the first user doesn't
    pay Lite's warm-up (sparse index built on first search, analyzer and model start: ~13 s on a
    cold 100k collection). After a bulk write Lite also compacts and re-indexes in a background
    thread that no API reports on (``compact`` returns at once there), and searches stay slow
    until it is done: so probe until two probes in a row are within 1.5x of the fastest seen, or
    ``budget_s`` runs out. Returns the seconds spent."""
    started = time.perf_counter()
    for attempt in range(1, 6):
        # Lite may refuse a load while a release or background compaction of the same collection
        # is still in flight (seen right after release_collection): retry briefly before failing.
        try:
            client.load_collection(collection)
            break
        except MilvusException as exc:
            if attempt == 5:
                raise ServiceUnavailable(f"cannot load {collection}: {exc.message}") from exc
            log.info("load of %s refused (%s); retrying", collection, exc.message)
            time.sleep(0.5 * attempt)
    probe = _warm_probe_filter()
    hybrid_search(client, collection, "warm up 预热", "", 1, spec)
    times: list[float] = []
    while True:
        t = time.perf_counter()
        hybrid_search(client, collection, "warm up 预热", probe, 10, spec)
        times.append(time.perf_counter() - t)
        fastest = min(times)
        if len(times) >= 3 and max(times[-2:]) <= 1.5 * fastest + 0.005:
            break
        if time.perf_counter() - started > budget_s:
            log.warning(
                "warm-up of %s still slow after %.0f s (last probe %.0f ms)", collection, budget_s, times[-1] * 1000
            )
            break
    return time.perf_counter() - started


def compact(client: MilvusClient, collection: str, *, timeout: float = 600.0) -> None:
    """Compact and wait. After bulk writes this halves search latency on Lite (which also
    compacts by itself after flushes; there the call returns at once)."""
    try:
        job = client.compact(collection)
        deadline = time.monotonic() + timeout
        while client.get_compaction_state(job) not in ("Completed", "completed"):
            if time.monotonic() > deadline:
                raise IndexError_(f"compaction of {collection} did not finish within {timeout:.0f}s")
            time.sleep(0.5)
    except MilvusException as exc:
        raise IndexError_(f"compaction of {collection} failed: {exc.message}") from exc
