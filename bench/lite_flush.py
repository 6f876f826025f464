"""Milvus Lite in this process, the soak's write pattern, flushing after every save or after every
Kth: where a save's cost goes as the collection's delta files pile up (docs/retrieval.md#flushes).

    python bench/lite_flush.py [--saves 2000] [--every 1] [--profile] [--patched]

44 pages of 4 chunks are seeded; then each "save" does what an index job and the soak's clients
do to Lite for one page: query the page's rows, upsert its new chunk, delete the old one, flush
(every ``--every`` saves), then a dense and a BM25 search. Per block of saves: wall and CPU ms per
save (CPU of the whole process: Lite compacts and builds indexes in a background thread),
tombstones, data files and delta files. ``--profile``: a cProfile of the last block.

What it showed (2026-12-02, shared 2-core machine): flushing every save, 23 ms of CPU per save at
500 delta files and 35 ms at 4,000, most of it Lite rewriting its manifest (a deep copy, JSON and
fsync of a list naming every delta file) and searches waiting on the lock that rewrite holds;
flushing every 10th save, about 5 ms per save throughout. Lite itself: no HTTP, no embedder (the
dense vectors are random), so it isolates Lite's own cost from the appliance's. ``--patched``
runs it with OpenKB's changes to Lite (``openkb.runtime.lite_server``); 2026-12-05, 36,000 saves
flushing every 50th: the last 9,000 at 3.74–3.98 ms of CPU per save patched (reads share one
copy of the tombstones until they change), 4.18–5.12 ms stock (docs/retrieval.md#flushes).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import shutil
import tempfile
import time
import uuid

import numpy as np
from milvus_lite.db import MilvusLite
from milvus_lite.schema.types import CollectionSchema, DataType, FieldSchema, Function, FunctionType

DIM = 512
WORDS = "alpha supervision cluster backup restore milvus vector keyword index search permission folder".split()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--saves", type=int, default=2000)
    ap.add_argument("--every", type=int, default=1, help="flush after every Nth save")
    ap.add_argument("--profile", action="store_true", help="cProfile the last block")
    ap.add_argument(
        "--patched",
        action="store_true",
        help="with OpenKB's changes to Lite, as the Lite server `openkb up` starts has them (openkb.runtime.lite_server)",
    )
    args = ap.parse_args()
    if args.patched:
        from openkb.runtime.lite_server import _install_patches

        _install_patches()

    rnd = np.random.default_rng(0)
    rand = random.Random(0)
    root = tempfile.mkdtemp(prefix="lite-flush-")
    db = MilvusLite(root)
    schema = CollectionSchema(
        fields=[
            FieldSchema("id", DataType.VARCHAR, is_primary=True, max_length=64),
            FieldSchema("document_id", DataType.VARCHAR, max_length=64),
            FieldSchema("tenant_id", DataType.VARCHAR, max_length=64),
            FieldSchema("content_text", DataType.VARCHAR, max_length=65535, enable_analyzer=True),
            FieldSchema("sparse_vector", DataType.SPARSE_FLOAT_VECTOR, is_function_output=True),
            FieldSchema("dense_vector", DataType.FLOAT_VECTOR, dim=DIM),
        ],
        functions=[Function("bm25", FunctionType.BM25, ["content_text"], ["sparse_vector"])],
    )
    col = db.create_collection("chunks", schema)
    col.create_index("dense_vector", {"index_type": "HNSW", "metric_type": "COSINE"})
    col.create_index("sparse_vector", {"index_type": "SPARSE_INVERTED_INDEX", "metric_type": "BM25"})
    for f in ("document_id", "tenant_id"):
        col.create_index(f, {"index_type": "INVERTED", "metric_type": "NONE"})
    col.load()

    def row(doc: str, text: str) -> dict:
        v = rnd.standard_normal(DIM).astype("float32")
        v /= np.linalg.norm(v)
        return {
            "id": uuid.uuid4().hex,
            "document_id": doc,
            "tenant_id": "t",
            "content_text": text,
            "dense_vector": v.tolist(),
        }

    docs = [f"page{i}" for i in range(44)]
    col.insert([row(d, " ".join(rand.choice(WORDS) for _ in range(200))) for d in docs for _ in range(4)])
    col.flush()
    own: dict[str, str] = {}
    for d in docs[-4:]:
        r = row(d, "x")
        col.insert([r])
        own[d] = r["id"]
    col.flush()

    block = max(1, args.saves // 8)
    prof = cProfile.Profile()
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        for n in range(args.saves):
            doc = docs[-4 + n % 4]
            if args.profile and n == args.saves - block:
                prof.enable()
            col.query(expr=f'document_id in ["{doc}"]', output_fields=["id"])
            r = row(doc, f"edit {n} " + " ".join(rand.choice(WORDS) for _ in range(40)))
            col.upsert([r])
            col.delete([own[doc]])
            own[doc] = r["id"]
            if (n + 1) % args.every == 0:
                col.flush()
            q = rnd.standard_normal(DIM).astype("float32").tolist()
            col.search([q], top_k=10, expr='tenant_id == "t"', anns_field="dense_vector", output_fields=["id"])
            col.search(
                ["alpha backup"], top_k=10, expr='tenant_id == "t"', anns_field="sparse_vector", output_fields=["id"]
            )
            if (n + 1) % block == 0:
                t1, c1 = time.perf_counter(), time.process_time()
                m = col._manifest  # noqa: SLF001 - the bench reads Lite's own file lists
                print(
                    f"saves {n + 1:6d}: {1000 * (t1 - t0) / block:6.2f} ms wall, {1000 * (c1 - c0) / block:6.2f} ms CPU "
                    f"per save; tombstones {len(col._delta_index)}, "  # noqa: SLF001
                    f"data files {sum(len(v) for v in m.get_all_data_files().values())}, "
                    f"delta files {sum(len(v) for v in m.get_all_delta_files().values())}",
                    flush=True,
                )
                t0, c0 = t1, c1
    finally:
        prof.disable()
        db.close()
        shutil.rmtree(root, ignore_errors=True)
    if args.profile:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
