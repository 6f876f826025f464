"""Collection-wide BM25 statistics for the embedded Milvus Lite (docs/retrieval.md#bm25-statistics).

Milvus Lite 3.x scores BM25 with each segment's own statistics: the document count, average
length and document frequencies of the segment a chunk sits in. Every flush seals a new segment,
so a page saved a minute ago sits in a segment of a few chunks, where even a word found nowhere
else gets an IDF near log(2), against ~log(N) for the same word in the large segment an import
or a rebuild wrote. Measured on a 600-page knowledge base: a page created afterwards scored 1.0
for a word only it contains while older pages scored 5–10 for words of the query they share, so
"Request Entity Too Large" did not find the one page holding that phrase, and a rare
identifier's page came third behind pages matching only its common half. Lite's own source
names the fix (aggregate the statistics across segments at search time); a Milvus 2.6 server
already scores with statistics of the whole shard.

This module does that inside the Lite server process that ``openkb up`` starts
(``openkb.runtime.lite_server``): before a BM25 search, the document count, total length and the
query terms' document frequencies are summed over the collection's sealed segments and its
memtable, and every segment is then scored with those sums. The candidates, filters, deletions
and merge stay Lite's own; only the numbers in the BM25 formula change, so scores from different
segments can be compared and the per-segment top-k lists merge into the true top-k.

Statistics count what the segments hold, like the server's: rows a later save replaced or
deleted still count until Lite compacts them away (a small, uniform inflation of N).

Trap: this reaches into Lite's internals (``Collection._search_sparse``, the segments' cached
``SparseInvertedIndex``, the memtable's snapshots). ``install()`` checks every name it needs and
leaves Lite untouched (per-segment scores, logged once) when a Lite release moves them;
``tests/retrieval/test_lite_bm25.py`` fails on the pinned version if it no longer applies.
"""

from __future__ import annotations

import contextvars
import heapq
import logging
import math
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

log = logging.getLogger("openkb.lite_bm25")

__all__ = ["COLLECTION_WIDE", "PER_SEGMENT", "GlobalStats", "collect", "install", "score"]

_STATS: contextvars.ContextVar[GlobalStats | None] = contextvars.ContextVar("openkb_lite_bm25", default=None)
_INSTALLED = False
_FAILED = False  # statistics could not be gathered for the last search (logged once per spell)

COLLECTION_WIDE = "collection-wide"
PER_SEGMENT = "per-segment"
# Told how BM25 scores (``COLLECTION_WIDE`` or ``PER_SEGMENT``, and why) when that is decided and
# whenever it changes: the Lite server process leaves it where ``openkb doctor`` and ``/readyz``
# read it (openkb.runtime.lite_server). Never called on the search path otherwise.
reporter: Callable[[str, str], None] | None = None


def _report(how: str, reason: str = "") -> None:
    if reporter is not None:
        try:
            reporter(how, reason)
        except Exception:  # noqa: BLE001 - telling about the scores must never fail a search
            log.warning("could not record how BM25 scores", exc_info=True)


@dataclass(slots=True)
class GlobalStats:
    """BM25 statistics of a whole collection for one search's query terms."""

    doc_count: int = 0
    total_length: float = 0.0
    df: dict[int, int] = field(default_factory=dict)

    @property
    def avgdl(self) -> float:
        return self.total_length / self.doc_count if self.doc_count else 0.0

    def add(self, doc_count: int, total_length: float, df: dict[int, int]) -> None:
        self.doc_count += doc_count
        self.total_length += total_length
        for term, n in df.items():
            self.df[term] = self.df.get(term, 0) + n


def score(index: Any, queries: list[dict[int, float]], top_k: int, valid_mask: Any, stats: GlobalStats) -> Any:
    """``SparseInvertedIndex.search`` with ``stats`` in place of the segment's own numbers: the
    same BM25 (Lite's k1 and b, IDF = ln((N - df + 0.5) / (df + 0.5) + 1)), the same result shape
    (ids and negated scores, padded with -1 / +inf)."""
    nq = len(queries)
    ids = np.full((nq, top_k), -1, dtype=np.int64)
    dists = np.full((nq, top_k), np.inf, dtype=np.float32)
    lengths = index._doc_lengths
    if valid_mask is not None and len(valid_mask) != len(lengths):
        raise ValueError(f"valid_mask has {len(valid_mask)} entries for {len(lengths)} documents")
    if index.doc_count == 0 or stats.doc_count == 0:
        return ids, dists
    n, k1, b = stats.doc_count, index.k1, index.b
    avgdl = stats.avgdl or 1.0
    for qi, query in enumerate(queries):
        scores: dict[int, float] = {}
        for term, weight in query.items():
            posting = index._posting_lists.get(term)
            if not posting:
                continue
            df = stats.df.get(term) or index._df[term]
            idf = math.log((n - df + 0.5) / (df + 0.5) + 1.0)
            for local_id, tf in posting:
                if valid_mask is not None and not valid_mask[local_id]:
                    continue
                norm = tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * lengths[local_id] / avgdl))
                scores[local_id] = scores.get(local_id, 0.0) + idf * norm * weight
        for j, (local_id, s) in enumerate(heapq.nlargest(top_k, scores.items(), key=lambda kv: kv[1])):
            ids[qi, j] = local_id
            dists[qi, j] = -s
    return ids, dists


def _segment_index(seg: Any, vector_field: str, metric_type: str, params: dict, factory: Any, to_sparse: Any) -> Any:
    """The segment's cached BM25 index, built as Lite builds it on a first search (the search
    that follows then reuses it)."""
    idx = seg.sparse_indexes.get(vector_field)
    if not factory.sparse_index_matches(idx, metric_type, params):
        rows = seg.table.column(vector_field).to_pylist()
        idx = factory.create_sparse_index(metric_type, params)
        idx.build([to_sparse(r) if isinstance(r, bytes) else (r or {}) for r in rows])
        seg.sparse_indexes[vector_field] = idx
    return idx


def _memtable_vectors(memtable: Any, vector_field: str, known: Any = ()) -> list[tuple[Any, int, Any]]:
    """``(pk, seq, sparse vector)`` of the memtable's live rows, the vector None for the
    ``(pk, seq)`` in ``known`` (not read). Read from its batches' one column: its public snapshot
    converts every field of every row (the dense vector too), ~10x the cost. That snapshot is the
    fallback, should a Lite release change the memtable's layout."""
    try:
        with memtable._lock:
            live = list(memtable._pk_index.items())
            batches = list(memtable._insert_batches)
        return [
            (pk, seq, None if (pk, seq) in known else batches[b].column(vector_field)[r].as_py())
            for pk, (b, r, seq) in live
        ]
    except (AttributeError, TypeError, ValueError, KeyError, IndexError):
        return [(pk, seq, rec.get(vector_field)) for pk, seq, rec in memtable.active_record_snapshots()]


# per memtable: (pk, seq) -> (length, terms) of each row already parsed. A row never changes (a
# replacement is a new seq), and parsing one costs ~170 µs for a 250-term chunk: without this a
# search while an import fills the memtable paid that for every unflushed row, twice (Lite parses
# them again for its own memtable search)
_PARSED: weakref.WeakKeyDictionary[Any, dict[tuple[Any, int], tuple[float, frozenset[int]]]] = (
    weakref.WeakKeyDictionary()
)
_PARSED_LOCK = threading.Lock()


def _parsed_rows(memtable: Any) -> dict[tuple[Any, int], tuple[float, frozenset[int]]]:
    try:
        with _PARSED_LOCK:
            return _PARSED.setdefault(memtable, {})
    except TypeError:  # not weakly referenceable: no cache
        return {}


def collect(collection: Any, vector_field: str, queries: list[dict[int, float]], params: dict) -> GlobalStats:
    """The collection's BM25 statistics for the terms of ``queries``: its sealed segments (their
    cached indexes) and the live rows of its memtable."""
    from milvus_lite.analyzer.sparse import bytes_to_sparse
    from milvus_lite.index import sparse_factory

    terms = {t for q in queries for t in q}
    stats = GlobalStats()
    segments, deltas = collection._read_snapshot()
    for seg in segments:
        if seg.table is None or len(seg.table) == 0:
            continue
        idx = _segment_index(seg, vector_field, "BM25", params, sparse_factory, bytes_to_sparse)
        stats.add(idx.doc_count, idx.avgdl * idx.doc_count, {t: idx._df[t] for t in terms if t in idx._df})
    memtable = collection._memtable
    parsed = _parsed_rows(memtable)
    count, length, df = 0, 0.0, dict.fromkeys(terms, 0)
    live = _memtable_vectors(memtable, vector_field, parsed)
    for pk, seq, raw in live:
        row = parsed.get((pk, seq))
        if row is None:
            vec = bytes_to_sparse(raw) if isinstance(raw, bytes) else (raw or {})
            row = parsed[(pk, seq)] = (float(sum(vec.values())), frozenset(vec))
        if deltas.is_deleted(pk, seq):
            continue
        count += 1
        length += row[0]
        for t in terms & row[1]:
            df[t] += 1
    if len(parsed) > 2 * len(live) + 64:  # rows flushed or replaced since: keep the live ones
        keep = {(pk, seq) for pk, seq, _ in live}
        for key in [k for k in parsed if k not in keep]:
            parsed.pop(key, None)
    stats.add(count, length, {t: n for t, n in df.items() if n})
    return stats


def install() -> bool:
    """Make this process's Milvus Lite score BM25 with collection-wide statistics; False (and
    Lite unchanged) when its internals are not the ones this module knows."""
    global _INSTALLED
    if _INSTALLED:
        _report(COLLECTION_WIDE)
        return True
    try:
        from milvus_lite.engine.collection import Collection
        from milvus_lite.index import sparse_factory
        from milvus_lite.index.sparse_inverted import SparseInvertedIndex
        from milvus_lite.storage.memtable import MemTable
    except ImportError as exc:
        log.warning("Milvus Lite BM25 keeps per-segment statistics: %s", exc)
        _report(PER_SEGMENT, f"this Milvus Lite is not the one OpenKB knows ({exc})")
        return False
    needed = [
        (Collection, "_search_sparse"),
        (Collection, "_prepare_sparse_queries"),
        (Collection, "_read_snapshot"),
        (MemTable, "active_record_snapshots"),
        (sparse_factory, "_search_prepared_sparse_index"),
        (sparse_factory, "create_sparse_index"),
        (sparse_factory, "sparse_index_matches"),
    ]
    probe = SparseInvertedIndex()
    missing = [f"{getattr(o, '__name__', o)}.{n}" for o, n in needed if not hasattr(o, n)]
    missing += [
        a for a in ("_posting_lists", "_df", "_doc_lengths", "doc_count", "avgdl", "k1", "b") if not hasattr(probe, a)
    ]
    if missing:
        log.warning("Milvus Lite BM25 keeps per-segment statistics: this Lite has no %s", ", ".join(missing))
        _report(PER_SEGMENT, f"this Milvus Lite is not the one OpenKB knows (it has no {', '.join(missing)})")
        return False

    search_sparse = Collection._search_sparse
    search_index = sparse_factory._search_prepared_sparse_index

    def _search_sparse(
        self: Any, query_vectors: Any, vector_field: str, top_k: int, metric_type: str, *args: Any, **kwargs: Any
    ) -> Any:
        if metric_type != "BM25":
            return search_sparse(self, query_vectors, vector_field, top_k, metric_type, *args, **kwargs)
        spec = self._index_specs.get(vector_field)
        params = spec.build_params if spec else {}
        queries = self._prepare_sparse_queries(query_vectors, vector_field)  # a bad query fails here, as in Lite
        global _FAILED
        try:
            stats = collect(self, vector_field, queries, params)
        except Exception as exc:  # noqa: BLE001 - a search must not fail for want of better statistics
            if not _FAILED:  # once: a fault that persists would otherwise log a traceback per search
                _FAILED = True
                log.exception("BM25 statistics could not be gathered; searches score per segment while it lasts")
                _report(PER_SEGMENT, f"statistics could not be gathered: {type(exc).__name__}: {exc}"[:300])
            return search_sparse(self, query_vectors, vector_field, top_k, metric_type, *args, **kwargs)
        if _FAILED:  # gathered again after a spell of failures
            _FAILED = False
            log.warning("BM25 statistics are gathered again; scores use collection-wide statistics")
            _report(COLLECTION_WIDE)
        token = _STATS.set(stats)
        try:
            return search_sparse(self, query_vectors, vector_field, top_k, metric_type, *args, **kwargs)
        finally:
            _STATS.reset(token)

    def _search_prepared_sparse_index(index: Any, queries: Any, top_k: int, valid_mask: Any = None) -> Any:
        stats = _STATS.get()
        if stats is not None and isinstance(index, SparseInvertedIndex):
            return score(index, queries, top_k, valid_mask, stats)
        return search_index(index, queries, top_k, valid_mask=valid_mask)

    Collection._search_sparse = _search_sparse
    # Lite imports it inside ``_search_sparse`` on every call, so the module attribute is the one used
    sparse_factory._search_prepared_sparse_index = _search_prepared_sparse_index
    _INSTALLED = True
    _report(COLLECTION_WIDE)
    return True
