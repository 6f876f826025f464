"""Rebuild throughput: OpenKB's ``index rebuild`` vs. raw pymilvus inserts of the same rows.

    python bench/rebuild.py [--n 20000] [--embedder pooled|real] [--batch 512]

Builds the same permission world as ``bench/search.py`` (fresh embedded PostgreSQL + Milvus
Lite), then, into fresh collections of the embedded default's shape (BM25 function with the
jieba analyzer + TEXTEMBEDDING function, 512-d):

1. raw: the exact Milvus rows OpenKB would write (built beforehand, untimed) inserted with
   ``MilvusClient.insert`` in batches of ``--batch``, then ``flush`` — timed;
2. OpenKB: ``run_rebuild`` (read chunks from PostgreSQL in id order, access fields from the
   permission service, rows, insert, per-batch progress commits) — the insert phase (to the
   final flush) is compared with raw; the whole job (plus catch-up, compaction, load + warm,
   health check) is reported too;
3. repeated ``--runs`` times, interleaved (the machine may be shared): medians are compared.

``--embedder pooled`` (default): the TEXTEMBEDDING function calls a bench-local endpoint that
returns precomputed vectors (the same model's vectors of a pool of base passages plus noise, see
``bench/search.py``), so the comparison shows OpenKB's own overhead rather than the model's
speed. ``--embedder real``: the function calls the appliance's local embedding service (both
paths are then bound by the model; use a small ``--n``).

The last line is JSON: n_chunks, openkb_chunks_per_s, raw_rows_per_s, ratio, and more.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
_spec = importlib.util.spec_from_file_location("bench_search", Path(__file__).with_name("search.py"))
assert _spec and _spec.loader
bs = importlib.util.module_from_spec(_spec)
sys.modules["bench_search"] = bs
_spec.loader.exec_module(bs)


def raw_insert(b: Any, url: str, rows: list[dict[str, Any]], version: int, batch: int) -> float:
    from openkb.indexing import milvus as mv
    from openkb.indexing.profiles_spec import make_profile

    spec = make_profile(model_name=bs.MODEL, dim=bs.DIM, base_url=url, name=f"raw{version}", version=version)
    client = b.ctx.milvus
    if client.has_collection(spec.collection_name):
        client.drop_collection(spec.collection_name)
    mv.ensure_collection(client, spec)
    t = time.perf_counter()
    for start in range(0, len(rows), batch):
        client.insert(spec.collection_name, mv.with_lexical(client, spec.collection_name, rows[start : start + batch]))
    client.flush(spec.collection_name)
    secs = time.perf_counter() - t
    n = mv.count_rows(client, spec.collection_name)
    assert n == len(rows), (n, len(rows))
    client.drop_collection(spec.collection_name)
    return secs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--embedder", choices=("pooled", "real"), default="pooled")
    ap.add_argument("--pool", type=int, default=500)
    ap.add_argument("--runs", type=int, default=2, help="interleaved raw/OpenKB pairs")
    ap.add_argument("--home", type=Path, default=None)
    args = ap.parse_args(argv)
    home = args.home or Path(tempfile.mkdtemp(prefix="openkb-bench-rebuild-"))
    out: dict[str, Any] = {"n_chunks": args.n, "embedder": args.embedder, "batch": args.batch}
    server = None
    try:
        comps = ("postgresql", "milvus") + (("embedder",) if args.embedder == "real" else ())
        b = bs.start_services(home, None, comps)
        bs.log(f"building the permission world with {args.n} chunks ...")
        w = bs.build_world(b.ctx.engine, args.n, pool_size=args.pool if args.embedder == "pooled" else 10)
        if args.embedder == "pooled":
            from openkb.embedder.models import load_model

            base, _rate = bs.embed_pool(load_model(bs.MODEL, threads=min(4, os.cpu_count() or 1)), w.pool)
            url, server = bs.start_endpoint(home / "endpoint", w.texts, base, {})
        else:
            url = b.ctx.endpoints.embedder_url
            if not url:
                raise SystemExit("the local embedder could not start")
        from openkb.indexing.rebuild import stream_rows

        rows = [r for batch, _ in stream_rows(b.ctx, None, 2000) for r in batch]
        raw_rates: list[float] = []
        ours_rates: list[float] = []
        jobs: list[dict[str, Any]] = []
        for run in range(args.runs):  # interleaved: the machine may be shared
            bs.log(f"raw insert #{run + 1} of {len(rows)} rows ...")
            secs = raw_insert(b, url, rows, 91 + run, args.batch)
            raw_rates.append(len(rows) / secs)
            bs.log(f"  {raw_rates[-1]:,.0f} rows/s")
            bs.log(f"OpenKB rebuild #{run + 1} ...")
            job, total = bs.fill_collection(
                b, url, name=f"openkb{run}", switch=False, batch_size=args.batch, version=10 + run
            )
            phases = b.phases  # type: ignore[attr-defined]
            insert_s = phases["catch up"] - phases["insert"]
            ours_rates.append(job.processed_chunks / insert_s)
            jobs.append(
                {
                    "status": job.status,
                    "chunks": job.processed_chunks,
                    "insert_s": round(insert_s, 1),
                    "job_s": round(total, 1),
                    "phases_s": {k: round(v, 1) for k, v in phases.items()},
                }
            )
            bs.log(
                f"  {job.status}: insert phase {insert_s:.1f}s ({ours_rates[-1]:,.0f} chunks/s), whole job {total:.1f}s"
            )
            from openkb.db import session_scope
            from openkb.indexing.rebuild import drop
            from openkb.permissions.principal import Principal

            with session_scope(b.ctx.engine) as s:
                drop(b.ctx, s, Principal.system(), f"openkb{run}")
        raw_rate, ours = statistics.median(raw_rates), statistics.median(ours_rates)
        job_rate = statistics.median(j["chunks"] / j["job_s"] for j in jobs)
        out.update(
            openkb_chunks_per_s=round(ours, 1),
            raw_rows_per_s=round(raw_rate, 1),
            ratio=round(ours / raw_rate, 2),
            raw_runs_rows_per_s=[round(x, 1) for x in raw_rates],
            openkb_runs_chunks_per_s=[round(x, 1) for x in ours_rates],
            openkb_job_chunks_per_s=round(job_rate, 1),
            openkb_jobs=jobs,
            rows=len(rows),
            load_avg=round(os.getloadavg()[0], 2),
        )
        print(
            f"\nOpenKB rebuild insert phase: {ours:,.0f} chunks/s; raw pymilvus insert: {raw_rate:,.0f} rows/s "
            f"(medians of {args.runs} interleaved runs); ratio {out['ratio']}  (whole job incl. catch-up/compact/"
            f"warm/health: {job_rate:,.0f} chunks/s)"
        )
        bs.stop_services(b)
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
        if args.home is None:
            shutil.rmtree(home, ignore_errors=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
