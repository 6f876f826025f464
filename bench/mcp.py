"""MCP overhead: ``kb_search`` through ``/mcp`` over HTTP vs. the same ``retrieval.search`` in-process.

    python bench/mcp.py [--n 10000] [--queries 100] [--top-k 10] [--pool 300] [--home DIR] [--keep]

The world, the corpus and the collection are bench/search.py's (the same builder: a
permission world with ``n`` chunks of mixed Chinese/English text, filled by OpenKB's own
rebuild, pooled vectors served by a bench-local embedding endpoint), then PostgreSQL and Milvus
are restarted and warmed as ``openkb up`` does. The bench user (a non-admin member of two
workspaces) gets a personal access token with the read scopes.

The API is the real app (``server.app.create_app``) under uvicorn in a thread of this process;
the client is the SDK's ``mcp.Client`` over Streamable HTTP (2025-11-25 era, one connection).
What it times, the same queries, interleaved, after warm-up:

(a) ``kb_search {query, top_k}`` through MCP: HTTP, the gate (host, token check, scope), the
    SDK's JSON-RPC handling, a unit of work, ``retrieval.search``, the audit row, structured
    output and the client's parsing;
(b) ``openkb.retrieval.search`` in-process for the same principal and ``top_k``, in a fresh
    session (what (a) does inside).

And the token check alone: ``session_scope`` + ``verify_bearer`` for the PAT (what the gate does
on every request), ``--checks`` times.

The last line is JSON: n_chunks, mcp_p50_ms, mcp_p95_ms, inproc_p50_ms, inproc_p95_ms, ratio
(p95/p95), ratio_p50, token_check_p50_ms, token_check_p95_ms and more.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Run as a script, this file's folder is sys.path[0] and this very file would shadow the ``mcp``
# package: drop the folder (bench/search.py is loaded by path below).
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _bench_search() -> Any:
    """bench/search.py as a module (bench/ is not a package): its world builder and helpers."""
    spec = importlib.util.spec_from_file_location("bench_search", ROOT / "bench" / "search.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_search"] = mod
    spec.loader.exec_module(mod)
    return mod


def serve(ctx: Any) -> tuple[str, Any, threading.Thread]:
    import httpx
    import uvicorn

    from openkb.jobs import RecordingQueue
    from openkb.runtime.embedded import free_port
    from server.app import create_app

    port = free_port()
    app = create_app(ctx, queue=RecordingQueue(), warm=False)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on")
    )
    thread = threading.Thread(target=server.run, name="uvicorn-bench", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return base, server, thread


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="chunks to build (at least 10,000 for the figure)")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--pool", type=int, default=300, help="distinct base passages embedded by the model")
    ap.add_argument("--checks", type=int, default=1000, help="token checks to time")
    ap.add_argument("--home", type=Path, default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    sb = _bench_search()
    log, pct = sb.log, sb.pct
    home = args.home or Path(tempfile.mkdtemp(prefix="openkb-bench-mcp-"))
    result: dict[str, Any] = {"n_chunks": args.n}
    endpoint = None
    try:
        from openkb.embedder.models import load_model

        log(f"home {home}; loading {sb.MODEL}")
        real = load_model(sb.MODEL, threads=min(4, os.cpu_count() or 1))
        b = sb.start_services(home, None)
        log(f"building the permission world with {args.n} chunks ...")
        w = sb.build_world(b.ctx.engine, args.n, pool_size=args.pool)
        base_vecs, _ = sb.embed_pool(real, w.pool)
        queries = sb.make_queries(w, args.queries)
        extra = [*queries, "warm up 预热"]
        cache = dict(zip(extra, real.encode(extra)))
        url, endpoint = sb.start_endpoint(home / "endpoint", w.texts, base_vecs, cache)
        log("filling the collection through OpenKB's rebuild ...")
        job, secs = sb.fill_collection(b, url)
        log(f"  rebuild {job.status}: {job.processed_chunks} chunks in {secs:.1f}s")
        sb.stop_services(b)
        b = sb.start_services(home, url)

        from sqlmodel import Session

        from openkb.accounts.tokens import issue_pat
        from openkb.db import session_scope
        from openkb.indexing.service import warm_active
        from openkb.mcp.caller import verify_bearer
        from openkb.permissions import Principal
        from openkb.retrieval import search

        warm_active(b.ctx)
        engine = b.ctx.engine
        with session_scope(engine) as s:
            _, token = issue_pat(
                s, tenant_id=w.tenant_a, user_id=w.bench_user, name="bench", scopes=["kb:read", "kb:search", "doc:read"]
            )
        principal = Principal.user(w.bench_user, w.tenant_a, scopes={"kb:read", "kb:search", "doc:read"})
        api, server, thread = serve(b.ctx)
        log(f"API at {api}; timing {len(queries)} queries each way, interleaved")

        def inproc(q: str) -> int:
            with Session(engine) as s:
                return len(search(b.ctx, s, principal, q, top_k=args.top_k))

        async def timed() -> tuple[list[float], list[float], list[int], list[int]]:
            mcp_ms: list[float] = []
            local_ms: list[float] = []
            n_mcp: list[int] = []
            n_local: list[int] = []
            import httpx2
            from mcp import Client
            from mcp.client.streamable_http import streamable_http_client

            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
            async with http, Client(streamable_http_client(api + "/mcp", http_client=http), mode="legacy") as c:
                for q in queries[:5]:  # steady state for both paths
                    await c.call_tool("kb_search", {"query": q, "top_k": args.top_k})
                    inproc(q)
                for i, q in enumerate(queries):
                    for which in (0, 1) if i % 2 == 0 else (1, 0):
                        t = time.perf_counter()
                        if which == 0:
                            r = await c.call_tool("kb_search", {"query": q, "top_k": args.top_k})
                            mcp_ms.append((time.perf_counter() - t) * 1000)
                            assert not r.is_error, r.content
                            n_mcp.append(len(r.structured_content["results"]))
                        else:
                            n_local.append(inproc(q))
                            local_ms.append((time.perf_counter() - t) * 1000)
            return mcp_ms, local_ms, n_mcp, n_local

        mcp_ms, local_ms, n_mcp, n_local = asyncio.run(timed())
        resource = b.ctx.settings.app_base_url.rstrip("/") + "/mcp"
        checks: list[float] = []
        for _ in range(args.checks):
            t = time.perf_counter()
            with session_scope(engine) as s:
                verify_bearer(s, token, resource=resource)
            checks.append((time.perf_counter() - t) * 1000)
        result.update(
            mcp_p50_ms=round(pct(mcp_ms, 0.5), 1),
            mcp_p95_ms=round(pct(mcp_ms, 0.95), 1),
            inproc_p50_ms=round(pct(local_ms, 0.5), 1),
            inproc_p95_ms=round(pct(local_ms, 0.95), 1),
            ratio=round(pct(mcp_ms, 0.95) / pct(local_ms, 0.95), 2),
            ratio_p50=round(pct(mcp_ms, 0.5) / pct(local_ms, 0.5), 2),
            token_check_p50_ms=round(pct(checks, 0.5), 2),
            token_check_p95_ms=round(pct(checks, 0.95), 2),
            queries=len(queries),
            top_k=args.top_k,
            mean_results_mcp=round(statistics.mean(n_mcp), 1),
            mean_results_inproc=round(statistics.mean(n_local), 1),
            same_counts=n_mcp == n_local,
            load_avg=round(os.getloadavg()[0], 2),
        )
        print(f"\nn_chunks={args.n}  top_k={args.top_k}  queries={len(queries)}")
        print(f"(a) kb_search via MCP/HTTP   p50 {result['mcp_p50_ms']:.1f} ms  p95 {result['mcp_p95_ms']:.1f} ms")
        print(
            f"(b) retrieval.search         p50 {result['inproc_p50_ms']:.1f} ms  p95 {result['inproc_p95_ms']:.1f} ms"
        )
        print(
            f"ratio p95 {result['ratio']} (p50 {result['ratio_p50']}); token check p50 "
            f"{result['token_check_p50_ms']} ms p95 {result['token_check_p95_ms']} ms"
        )
        server.should_exit = True
        thread.join(10)
        sb.stop_services(b)
    finally:
        if endpoint is not None:  # also when a step above failed: never leave it running
            endpoint.terminate()
            try:
                endpoint.wait(10)
            except Exception:  # noqa: BLE001 - a stuck endpoint is killed
                endpoint.kill()
        if not args.keep and args.home is None:
            shutil.rmtree(home, ignore_errors=True)
    print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
