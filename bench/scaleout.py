"""Scale-out on one machine: 1 vs 2 API processes and 1 vs 2 workers on one PostgreSQL and Redis.

    python bench/scaleout.py [--docs 200] [--seconds 20] [--clients 8] [--rate 20] [--index-docs 60]

Starts, in a fresh temporary home: the embedded PostgreSQL, Milvus Lite and embedder (through
``EmbeddedServices``, as ``openkb up`` would) and a ``redis-server`` on loopback; then
``openkb serve`` and ``openkb worker`` as separate processes on them (REDIS_URL set: RedisHuey).
An administrator and a read/write token are made with the CLI (``openkb init``, ``openkb token
create``), a knowledge base of ``--docs`` documents through the API. Measured, for 1 and 2 API
processes (clients spread round-robin, as a load balancer would):

* search throughput: ``--clients`` closed-loop clients posting ``/api/search`` for ``--seconds``;
* save throughput: the same clients each saving new versions of their own document;
* search p50/p95 at a fixed rate (``--rate`` requests/s, open loop, so a slow server cannot
  lower its own load);

and, for 1 and 2 workers, indexing throughput: ``--index-docs`` documents created at once,
timed until PostgreSQL says every one is indexed. Every request that is not 2xx is an error.
Prints a table and, last, one JSON line with the figures and the ratios (2 over 1). On a
2-core machine the honest target is no loss (ratio >= 1.0) and zero errors; docs/deployment.md
explains the gain to expect with more cores.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from openkb.config import Settings  # noqa: E402
from openkb.runtime.embedded import EmbeddedServices, free_port  # noqa: E402

WORDS = ("retrieval", "permissions", "milvus", "markdown", "backup", "知识库", "检索", "权限", "版本", "部署")


def sha(md: str) -> str:
    return hashlib.sha256(md.encode("utf-8")).hexdigest()


class Stack:
    """The shared components plus the OpenKB processes started on them."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.svc = EmbeddedServices(Settings(openkb_home=home / "shared"), ("postgresql", "milvus", "embedder"))
        ep = self.svc.start()
        self.redis_dir = home / "redis"
        self.redis_dir.mkdir()
        port = free_port()
        self.redis = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.redis_dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.env = {
            **os.environ,
            "DATABASE_URL": ep.database_url,
            "MILVUS_URI": ep.milvus_uri,
            "OPENKB_EMBEDDER_URL": ep.embedder_url or "off",
            "REDIS_URL": f"redis://127.0.0.1:{port}/0",
            "OPENKB_SECRET_KEY": uuid.uuid4().hex * 2,
            "OPENKB_LOG_LEVEL": "WARNING",
            "APP_BASE_URL": "http://127.0.0.1:8000",
            "OPENKB_HOME": str(home / "cli"),
        }
        self.database_url = ep.database_url
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def cli(self, *args: str, stdin: str | None = None) -> Any:
        p = subprocess.run(
            [sys.executable, "-m", "cli.main", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            cwd=ROOT,
            check=False,
        )
        if p.returncode != 0:
            raise SystemExit(f"openkb {' '.join(args)} failed: {p.stderr.strip()}")
        return json.loads(p.stdout) if "--json" in args else p.stdout

    def start(self, name: str, *args: str) -> None:
        home = self.home / name
        home.mkdir(exist_ok=True)
        log = open(self.home / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "cli.main", *args],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**self.env, "OPENKB_HOME": str(home)},
        )

    def api(self, name: str) -> str:
        port = free_port()
        self.start(name, "serve", "--host", "127.0.0.1", "--port", str(port))
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.procs[name].poll() is not None:
                raise SystemExit(f"{name} exited: see {self.home / (name + '.log')}")
            try:
                if httpx.get(base + "/readyz", timeout=5).status_code == 200:
                    return base
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise SystemExit(f"{name} not ready")

    def stop(self, name: str) -> None:
        p = self.procs.pop(name)
        p.terminate()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()

    def close(self) -> None:
        for name in list(self.procs):
            self.stop(name)
        self.redis.terminate()
        self.svc.stop()


def closed_loop(bases: list[str], token: str, clients: int, seconds: float, work: Any) -> dict[str, Any]:
    """``clients`` threads, each on one API (round-robin), calling ``work(client, i)`` until time is up."""
    lat: list[float] = []
    errors = 0
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def run(i: int) -> None:
        nonlocal errors
        with httpx.Client(
            base_url=bases[i % len(bases)], headers={"Authorization": f"Bearer {token}"}, timeout=60
        ) as c:
            n = 0
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                ok = work(c, i, n)
                dt = time.perf_counter() - t0
                n += 1
                with lock:
                    lat.append(dt)
                    errors += 0 if ok else 1

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(run, range(clients)))
    return {
        "rps": round(len(lat) / seconds, 1),
        "p95_ms": round(_p(lat, 95) * 1000, 1),
        "errors": errors,
        "n": len(lat),
    }


def fixed_rate(bases: list[str], token: str, rate: float, seconds: float, query: Any) -> dict[str, Any]:
    """Open loop: one request every 1/rate s whatever the answers take; latency per request."""
    lat: list[float] = []
    errors = 0
    lock = threading.Lock()
    clients = [httpx.Client(base_url=b, headers={"Authorization": f"Bearer {token}"}, timeout=60) for b in bases]

    def one(k: int) -> None:
        nonlocal errors
        t0 = time.perf_counter()
        r = clients[k % len(clients)].post("/api/search", json=query(k))
        with lock:
            lat.append(time.perf_counter() - t0)
            errors += 0 if r.status_code == 200 else 1

    total = int(rate * seconds)
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(64) as pool:
        for k in range(total):
            delay = start + k / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            pool.submit(one, k)
    for c in clients:
        c.close()
    return {
        "rate": rate,
        "p50_ms": round(_p(lat, 50) * 1000, 1),
        "p95_ms": round(_p(lat, 95) * 1000, 1),
        "errors": errors,
        "n": len(lat),
    }


def _p(xs: list[float], q: int) -> float:
    if not xs:
        return 0.0
    if len(xs) == 1:
        return xs[0]
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1]


def drain(stack: Stack, timeout: float = 900) -> None:
    """Wait until no document waits for the index: a phase must not pay for the previous one's
    saves (their index jobs compete for the same two cores)."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            left = conn.execute(
                "SELECT count(*) FROM documents WHERE deleted_at IS NULL AND (index_status <> "
                "'indexed' OR indexed_version_id IS DISTINCT FROM current_version_id)"
            ).fetchone()[0]
            if not left:
                return
            time.sleep(0.2)


def index_throughput(stack: Stack, base: str, token: str, kb: str, n: int) -> dict[str, Any]:
    import psycopg

    ids = []
    t0 = time.perf_counter()
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
        for i in range(n):
            md = f"# Indexed {i}\n\n" + " ".join(WORDS[(i + j) % len(WORDS)] for j in range(200)) + "\n"
            r = c.post(
                "/api/documents",
                json={"knowledge_base_id": kb, "title": f"idx {i} {uuid.uuid4().hex[:6]}", "markdown": md},
            )
            r.raise_for_status()
            ids.append(r.json()["id"])
    with psycopg.connect(stack.database_url) as conn:
        while True:
            done = conn.execute(
                "SELECT count(*) FROM documents WHERE id = ANY(%s) AND index_status = 'indexed' "
                "AND indexed_version_id = current_version_id",
                (ids,),
            ).fetchone()[0]
            if done == n or time.perf_counter() - t0 > 900:
                break
            time.sleep(0.1)
    dt = time.perf_counter() - t0
    return {"docs": n, "indexed": done, "seconds": round(dt, 1), "docs_per_s": round(done / dt, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rate", type=float, default=20)
    ap.add_argument("--index-docs", type=int, default=60)
    ap.add_argument("--home", type=Path, default=None)
    args = ap.parse_args()
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is required: apt-get install -y redis-server")
    home = args.home or Path(tempfile.mkdtemp(prefix="openkb-scaleout-"))
    stack = Stack(home)
    try:
        email = f"bench-{uuid.uuid4().hex[:6]}@example.com"
        stack.cli("init", "--email", email, "--password-stdin", "--json", stdin="amber lantern quietly 42\n")
        token = stack.cli(
            "token",
            "create",
            "--user",
            email,
            "--name",
            "bench",
            "--scope",
            "kb:read",
            "--scope",
            "kb:search",
            "--scope",
            "doc:read",
            "--scope",
            "doc:write",
            "--scope",
            "kb:write",
            "--json",
        )["token"]
        stack.start("worker1", "worker", "--workers", "2")
        a1 = stack.api("api1")
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=a1, headers=auth, timeout=60) as c:
            ws = c.post("/api/workspaces", json={"name": "Bench"}).json()
            kb = c.post("/api/knowledge-bases", json={"workspace_id": ws["id"], "title": "Bench KB"}).json()["id"]
            print(f"seeding {args.docs} documents ...", file=sys.stderr)
            for i in range(args.docs):
                md = f"# Page {i}\n\n" + " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(150)) + "\n"
                c.post(
                    "/api/documents", json={"knowledge_base_id": kb, "title": f"Page {i}", "markdown": md}
                ).raise_for_status()
            own = []
            for i in range(args.clients):
                d = c.post(
                    "/api/documents", json={"knowledge_base_id": kb, "title": f"Saved by {i}", "markdown": "start\n"}
                ).json()
                own.append({"id": d["id"], "base": d["current_version_id"]})

        def search(c: httpx.Client, i: int, n: int) -> bool:
            r = c.post("/api/search", json={"query": f"{WORDS[(i + n) % len(WORDS)]} {WORDS[n % 5]}", "top_k": 10})
            return r.status_code == 200

        def save(c: httpx.Client, i: int, n: int) -> bool:
            md = f"client {i} edit {n} {uuid.uuid4().hex}\n"
            r = c.post(
                f"/api/documents/{own[i]['id']}/versions",
                json={"base_version_id": own[i]["base"], "markdown": md, "markdown_hash": sha(md)},
            )
            if r.status_code in (200, 201):
                own[i]["base"] = r.json()["version_id"]
                return True
            return False

        def query(k: int) -> dict[str, Any]:
            return {"query": WORDS[k % len(WORDS)], "top_k": 10}

        results: dict[str, Any] = {}
        for n_api in (1, 2):
            bases = [a1] if n_api == 1 else [a1, stack.api("api2")]
            drain(stack)
            out: dict[str, Any] = {"search": closed_loop(bases, token, args.clients, args.seconds, search)}
            out["search_fixed_rate"] = fixed_rate(bases, token, args.rate, args.seconds, query)
            out["save"] = closed_loop(bases, token, args.clients, args.seconds, save)
            results[f"api{n_api}"] = out
        stack.stop("api2")
        for n_workers in (1, 2):
            drain(stack)
            if n_workers == 2:
                stack.start("worker2", "worker", "--workers", "2")
            results[f"workers{n_workers}"] = index_throughput(stack, a1, token, kb, args.index_docs)
        r1, r2 = results["api1"], results["api2"]
        ratios = {
            "search_rps": round(r2["search"]["rps"] / max(r1["search"]["rps"], 1e-9), 2),
            "save_rps": round(r2["save"]["rps"] / max(r1["save"]["rps"], 1e-9), 2),
            "search_p95_at_rate": round(
                r2["search_fixed_rate"]["p95_ms"] / max(r1["search_fixed_rate"]["p95_ms"], 1e-9), 2
            ),
            "index_docs_per_s": round(
                results["workers2"]["docs_per_s"] / max(results["workers1"]["docs_per_s"], 1e-9), 2
            ),
        }
        errors = sum(v["errors"] for k in ("api1", "api2") for v in results[k].values())
        for k in ("api1", "api2"):
            r = results[k]
            print(
                f"{k}: search {r['search']['rps']} req/s (p95 {r['search']['p95_ms']} ms), save {r['save']['rps']} "
                f"req/s (p95 {r['save']['p95_ms']} ms), at {args.rate}/s search p50 "
                f"{r['search_fixed_rate']['p50_ms']} p95 {r['search_fixed_rate']['p95_ms']} ms"
            )
        for k in ("workers1", "workers2"):
            print(
                f"{k}: indexed {results[k]['indexed']}/{results[k]['docs']} in {results[k]['seconds']} s "
                f"({results[k]['docs_per_s']} docs/s)"
            )
        print(f"ratios (2 over 1): {ratios}; errors {errors}; cores {os.cpu_count()}")
        print(json.dumps({"cores": os.cpu_count(), "results": results, "ratios": ratios, "errors": errors}))
    finally:
        stack.close()
        if args.home is None:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
