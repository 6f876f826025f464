"""Dify ``POST /retrieval`` over HTTP vs the same queries through the retrieval service in-process.

    python bench/dify.py [--chunks 100000] [--queries 300] [--top-k 10] [--pool 1000] [--home DIR]

The corpus is built by ``bench/search.py``'s builder functions (imported, not copied): its
permission world (tenant A, 200 knowledge bases, drafts, custom-permission and archived
documents, a tenant B), ``--chunks`` chunks of mixed Chinese/English text, and the embedded
default's collection shape (BM25 + TEXTEMBEDDING ``use-multilingual-v3``) filled by OpenKB's
own rebuild; chunk vectors come from its pooled encoder, query vectors from the real model
(see that module's docstring for why and what it costs). Then:

* a Dify key is granted the tenant's knowledge base with the most published, inheriting chunks
  (the realistic case: one knowledge_id = one knowledge base), and a knowledge id mapped to it;
* the API server (what ``openkb serve`` runs) starts as a separate process on the same
  PostgreSQL and Milvus;
* every query is sent both ways, interleaved so drift hits both alike, one at a time:
  HTTP ``POST /retrieval`` with a Dify-shaped body on a keep-alive client (as Dify's httpx),
  and ``openkb.retrieval.search`` in-process with the same key's principal, knowledge base and
  top_k, in a fresh session each.

Prints p50/p95/p99 for both and ``ratio = http_p95 / inprocess_p95`` (target <= 1.2), and checks
p95 against Dify's 5 s client timeout. The last line is a JSON object with at least n_chunks,
p95_ms, inprocess_p95_ms, ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import search as sb  # noqa: E402 - the corpus builder lives there, once

DIFY_TIMEOUT_S = 5.0


def _vector_endpoint(home: Path, real: Any, w: Any, qs: list[str]) -> tuple[str, Any]:
    """bench/search.py's embedding endpoint, query vectors computed by the real model up front
    (both timed paths then pay the same Milvus -> endpoint round trip and no model time).
    Supports its endpoint-in-a-subprocess API and the earlier in-thread one."""
    if hasattr(sb, "embed_pool"):
        base, _rate = sb.embed_pool(real, w.pool)
        cache = dict(zip(qs, real.encode(qs)))
        return sb.start_endpoint(home / "endpoint", w.texts, base, cache)  # type: ignore[no-any-return]
    enc = sb.PooledEncoder(real, w.texts, w.pool)
    url, server = sb.start_endpoint(enc)
    enc.encode(qs)
    return url, server


def pick_knowledge_base(engine: Any, tenant_id: uuid.UUID) -> tuple[uuid.UUID, int]:
    """The tenant's knowledge base with the most chunks a Dify key would see."""
    from sqlalchemy import text
    from sqlmodel import Session

    with Session(engine) as s:
        row = s.execute(
            text("""
            SELECT d.knowledge_base_id, count(*) AS n FROM document_chunks c JOIN documents d ON d.id = c.document_id
            JOIN knowledge_bases k ON k.id = d.knowledge_base_id
            WHERE d.tenant_id = :t AND d.status = 'published' AND d.permission_mode = 'inherit'
              AND d.deleted_at IS NULL AND d.current_version_id = c.version_id AND k.status = 'active'
            GROUP BY 1 ORDER BY 2 DESC LIMIT 1"""),
            {"t": tenant_id},
        ).one()
    return row[0], int(row[1])


def start_server(home: Path, port: int, embedder_url: str) -> subprocess.Popen[bytes]:
    import httpx

    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "MILVUS_URI", "REDIS_URL")}
    env.update(OPENKB_HOME=str(home), OPENKB_EMBEDDER_URL=embedder_url, OPENKB_LOG_LEVEL="WARNING")
    # What `openkb serve` does (borrowing this process's embedded PostgreSQL and Milvus),
    # without importing every CLI command module.
    code = (
        "import uvicorn\nfrom cli.context import appliance\nfrom server.app import create_app\n"
        "from workers.queue import HueyQueue\n"
        "with appliance(migrate=False) as ctx:\n"
        f"    uvicorn.run(create_app(ctx, queue=HueyQueue()), host='127.0.0.1', port={port}, log_level='warning', access_log=False)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
            raise SystemExit(f"API server exited: {err}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("API server did not become ready")


def measure(
    ctx: Any, base: str, key: str, knowledge_id: str, principal: Any, kb_id: Any, qs: list[str], top_k: int, warmup: int
) -> dict[str, list[float]]:
    import httpx
    from sqlmodel import Session

    from openkb.retrieval import search

    out: dict[str, list[float]] = {"http": [], "inproc": [], "records": [], "results": []}
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", "User-Agent": "bench/dify"}
    with httpx.Client(base_url=base, timeout=30, headers=headers) as client:
        for i, q in enumerate(qs[:warmup] + qs):
            body = json.dumps(
                {
                    "knowledge_id": knowledge_id,
                    "query": q,
                    "retrieval_setting": {"top_k": top_k, "score_threshold": 0.0},
                    "metadata_condition": None,
                }
            )  # json.dumps: non-ASCII as \uXXXX, as Dify sends
            for which in (0, 1) if i % 2 == 0 else (1, 0):
                t = time.perf_counter()
                if which == 0:
                    r = client.post("/retrieval", content=body)
                    dt = (time.perf_counter() - t) * 1000
                    if r.status_code != 200:
                        raise SystemExit(f"/retrieval -> {r.status_code} {r.text[:300]}")
                    n = len(r.json()["records"])
                else:
                    with Session(ctx.engine) as s:
                        n = len(search(ctx, s, principal, q, knowledge_base_ids=[kb_id], top_k=top_k))
                    dt = (time.perf_counter() - t) * 1000
                if i >= warmup:
                    out["http" if which == 0 else "inproc"].append(dt)
                    out["records" if which == 0 else "results"].append(float(n))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--pool", type=int, default=1000, help="distinct base passages embedded by the model")
    ap.add_argument("--home", type=Path, default=None, help="working directory (kept; default: a temp dir)")
    args = ap.parse_args(argv)
    home = args.home or Path(tempfile.mkdtemp(prefix="openkb-bench-dify-"))
    figures: dict[str, Any] = {"n_chunks": args.chunks}
    b = endpoint = proc = None
    try:
        from openkb.embedder.models import load_model

        sb.log(f"home {home}; loading {sb.MODEL}")
        real = load_model(sb.MODEL, threads=min(4, os.cpu_count() or 1))
        b = sb.start_services(home, None)
        t = time.perf_counter()
        w = sb.build_world(b.ctx.engine, args.chunks, pool_size=args.pool)
        sb.log(f"world {w.stats} in {time.perf_counter() - t:.1f}s")
        qs = sb.make_queries(w, args.queries + args.warmup)
        url, endpoint = _vector_endpoint(home, real, w, qs)
        job, secs = sb.fill_collection(b, url)
        figures.update(
            n_chunks=w.n_chunks,
            indexed_chunks=job.processed_chunks,
            build_s=round(time.perf_counter() - t, 1),
            rebuild_s=round(secs, 1),
        )
        sb.log(f"collection {job.target_collection}: {job.processed_chunks} chunks in {secs:.1f}s")
        sb.stop_services(b)  # restart on the bench endpoint, as the bench/search.py timing does
        b = sb.start_services(home, url)
        ctx = b.ctx

        from openkb.db import session_scope
        from openkb.dify import keys, mappings
        from openkb.dify.service import dify_principal
        from openkb.indexing.service import warm_active
        from openkb.models import DifyApiKey
        from openkb.permissions.principal import Principal
        from openkb.retrieval import forget_active_profile

        SYSTEM = Principal.system()  # set up as the operator would (openkb dify key create / map)

        warm_active(ctx)
        forget_active_profile()
        kb_id, kb_chunks = pick_knowledge_base(ctx.engine, w.tenant_a)
        with session_scope(ctx.engine) as s:
            row, key = keys.create_key(
                s,
                SYSTEM,
                tenant_id=w.tenant_a,
                name="bench",
                knowledge_base_ids=[kb_id],
                top_k_limit=max(10, args.top_k),
            )
            kid = f"bench-{uuid.uuid4().hex[:6]}"
            mappings.do_map(s, SYSTEM, tenant_id=w.tenant_a, knowledge_id=kid, kb=kb_id)
        with session_scope(ctx.engine) as s:
            principal = dify_principal(s.get(DifyApiKey, row.id), kb_id)
        from openkb.runtime.embedded import free_port

        port = free_port()
        proc = start_server(home, port, url)
        t = time.perf_counter()
        res = measure(
            ctx, f"http://127.0.0.1:{port}", key, kid, principal, kb_id, qs[args.warmup :], args.top_k, args.warmup
        )
        http_ms, in_ms = res["http"], res["inproc"]
        p95, ip95 = sb.pct(http_ms, 0.95), sb.pct(in_ms, 0.95)
        figures.update(
            kb_chunks=kb_chunks,
            queries=len(http_ms),
            top_k=args.top_k,
            p50_ms=round(sb.pct(http_ms, 0.5), 1),
            p95_ms=round(p95, 1),
            p99_ms=round(sb.pct(http_ms, 0.99), 1),
            inprocess_p50_ms=round(sb.pct(in_ms, 0.5), 1),
            inprocess_p95_ms=round(ip95, 1),
            inprocess_p99_ms=round(sb.pct(in_ms, 0.99), 1),
            ratio=round(p95 / max(ip95, 1e-6), 3),
            mean_records=round(sum(res["records"]) / max(1, len(res["records"])), 2),
            mean_results_inprocess=round(sum(res["results"]) / max(1, len(res["results"])), 2),
            under_dify_timeout=p95 < DIFY_TIMEOUT_S * 1000,
            measure_s=round(time.perf_counter() - t, 1),
            load_avg=round(os.getloadavg()[0], 2),
            cpus=os.cpu_count(),
        )
        print(
            f"\nn_chunks={figures['n_chunks']}; the key's knowledge base holds {kb_chunks} of them; "
            f"{figures['queries']} queries, top_k {args.top_k}, load average {figures['load_avg']}"
        )
        print(f"{'':26}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}")
        print(f"{'POST /retrieval (HTTP)':26}{figures['p50_ms']:>9}{figures['p95_ms']:>9}{figures['p99_ms']:>9}")
        print(
            f"{'retrieval.search (in-proc)':26}{figures['inprocess_p50_ms']:>9}{figures['inprocess_p95_ms']:>9}"
            f"{figures['inprocess_p99_ms']:>9}"
        )
        print(
            f"ratio p95 HTTP / in-process = {figures['ratio']} (target <= 1.2); p95 "
            f"{'under' if figures['under_dify_timeout'] else 'OVER'} Dify's {DIFY_TIMEOUT_S:.0f} s client timeout"
        )
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        if b is not None:
            sb.stop_services(b)
        if endpoint is not None:
            if hasattr(endpoint, "shutdown"):
                endpoint.shutdown()
            else:
                endpoint.terminate()
        if args.home is None:
            shutil.rmtree(home, ignore_errors=True)
    print(json.dumps(figures, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
