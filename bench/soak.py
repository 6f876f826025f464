"""Soak: N clients mixing search, read, save and tree for a fixed time against the embedded
appliance (`openkb up` on a fresh temp home, everything embedded), as issue 17 asks.

    python bench/soak.py [--minutes 10] [--clients 4] [--docs 40] [--keep]

Reports per operation: count, throughput, p50/p95/p99 latency, 5xx count (and other non-2xx);
the memory of every part of the appliance (supervisor, API, worker, Milvus Lite, embedder,
PostgreSQL with its backends) after a warm-up and at the end, with the growth ratio; and the ratio
of the last to the first quarter's throughput (a slowdown over time shows below 1). Last line:
one JSON object.

Memory is reported twice, and only USS is the leak measure (target: growth <= 1.10 per part):

* **USS** (``memory_full_info().uss``): memory private to the process. A leak grows it.
* **RSS**, reported as measured. Trap: PostgreSQL's RSS counts every page of shared buffers a
  backend has touched, so it grows while the cache fills (and as the saved versions grow the
  tables) without any leak: 1.48x in a 10-minute run whose USS grew 1.08x.

The start figure is taken after an untimed warm phase: every client first reads every page,
searches every word, lists the tree and saves a few times (the pool opens the connections the run
will use and their backends touch the working set), then the mixed load runs for a short warm-up
before the figure is taken and the measured run begins. The number of PostgreSQL processes at
start and end is reported too: a backend opened (or an autovacuum worker running) only at the end
adds its memory to the end figure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORDS = (
    "alpha supervision cluster backup restore milvus vector keyword index search permission folder "
    "workspace markdown table version history audit token session embed chunk rerank profile alias "
    "rebuild verify repair outage restart backoff latency throughput memory"
).split()
OPS = ("search", "read", "save", "tree")
LEAK_LIMIT = 1.10  # USS growth per part over the measured run (issue 17's figure)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sha(md: str) -> str:
    return hashlib.sha256(md.encode("utf-8")).hexdigest()


def pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


class Stack:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        drop = ("DATABASE_URL", "MILVUS_URI", "OPENKB_EMBEDDER_URL", "REDIS_URL", "APP_BASE_URL", "OPENKB_SERVED_URL")
        self.env = {k: v for k, v in os.environ.items() if k not in drop}
        self.env["OPENKB_HOME"] = str(home)
        self.proc: subprocess.Popen[bytes] | None = None

    def up(self) -> float:
        t = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "up", "--port", str(self.port)],
            env=self.env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"openkb up exited with {self.proc.returncode}; see {self.home}/logs")
            try:
                if httpx.get(self.base + "/readyz", timeout=2).status_code == 200:
                    return time.perf_counter() - t
            except httpx.HTTPError:
                pass
            time.sleep(0.2)

    def cli(self, *args: str, stdin: str | None = None) -> Any:
        out = subprocess.run(
            [sys.executable, "-m", "cli.main", *args],
            env=self.env,
            cwd=ROOT,
            input=stdin,
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(out.stdout)

    def down(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(120)

    def memory(self) -> dict[str, dict[str, float]]:
        """``{part: {"rss": MB, "uss": MB, "processes": n}}`` for every part of the appliance
        (PostgreSQL: postmaster + backends), RSS and USS read from the same process list at the
        same moment (see the module docstring for which one measures a leak)."""
        from openkb.runtime.home import Home
        from openkb.runtime.supervision import read_parts

        out: dict[str, dict[str, float]] = {}
        assert self.proc is not None
        pids: dict[str, int] = {"supervisor": self.proc.pid}
        snap = read_parts(Home(self.home)) or {"parts": {}}
        for name, p in snap["parts"].items():
            if p.get("pid"):
                pids[name] = int(p["pid"])
        for name, pid in pids.items():
            rss = uss = n = 0
            try:
                proc = psutil.Process(pid)
                procs = [proc, *(proc.children(recursive=True) if name == "postgresql" else [])]
            except psutil.Error:
                procs = []
            for p in procs:
                try:
                    full = p.memory_full_info()
                except psutil.Error:
                    continue  # a backend that just ended
                rss, uss, n = rss + full.rss, uss + full.uss, n + 1
            out[name] = {"rss": round(rss / 2**20, 1), "uss": round(uss / 2**20, 1), "processes": n}
        return out


class Client(threading.Thread):
    def __init__(self, i: int, base: str, token: str, kb: str, docs: list[str], own: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.i, self.kb, self.docs, self.own = i, kb, docs, own
        self.http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        self.samples: list[tuple[float, str, float, int]] = []  # (t, op, seconds, status)
        self.stop_at = float("inf")  # set by main once the start figure is taken
        self.warmed = threading.Event()
        self.warm_errors = 0

    def warm(self) -> None:
        """The untimed warm pass (module docstring): touch every page, word and the tree once."""
        for n, doc in enumerate(self.docs):
            self.warm_errors += self.http.get(f"/api/documents/{doc}").status_code >= 500
            if n % 8 == 0:
                self.warm_errors += self.one("save", n) >= 500
        for w in WORDS:
            self.warm_errors += self.http.post("/api/search", json={"query": w, "top_k": 10}).status_code >= 500
        self.warm_errors += self.one("tree", 0) >= 500

    def run(self) -> None:
        try:
            self.warm()
        except httpx.HTTPError:
            self.warm_errors += 1
        self.warmed.set()
        n = 0
        while time.monotonic() < self.stop_at:
            n += 1
            op = OPS[(n + self.i) % len(OPS)]
            t = time.perf_counter()
            try:
                status = self.one(op, n)
            except httpx.TimeoutException:
                status = 599
            except httpx.TransportError:
                status = 598
            self.samples.append((time.monotonic(), op, time.perf_counter() - t, status))
        self.http.close()

    def one(self, op: str, n: int) -> int:
        c = self.http
        if op == "search":
            q = f"{WORDS[(n * 7 + self.i) % len(WORDS)]} {WORDS[(n * 3) % len(WORDS)]}"
            return c.post("/api/search", json={"query": q, "top_k": 10}).status_code
        if op == "read":
            return c.get(f"/api/documents/{self.docs[(n + self.i) % len(self.docs)]}").status_code
        if op == "tree":
            return c.get(f"/api/knowledge-bases/{self.kb}/tree").status_code
        md = f"# Client {self.i}\n\nedit {n} {' '.join(WORDS[(n + j) % len(WORDS)] for j in range(40))}\n"
        r = c.post(
            f"/api/documents/{self.own['id']}/versions",
            json={"base_version_id": self.own["base"], "markdown": md, "markdown_hash": sha(md)},
        )
        if r.status_code in (200, 201):
            self.own["base"] = r.json()["version_id"]
        elif r.status_code == 409:
            self.own["base"] = r.json().get("current_version_id") or self.own["base"]
        return r.status_code


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--docs", type=int, default=40, help="documents seeded before the run")
    ap.add_argument("--keep", action="store_true", help="keep the temp OPENKB_HOME")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="openkb-soak-"))
    stack = Stack(root / "home")
    try:
        ready_s = stack.up()
        print(f"openkb up ready in {ready_s:.1f}s ({stack.home})", file=sys.stderr)
        email = f"soak-{uuid.uuid4().hex[:6]}@example.com"
        stack.cli("init", "--email", email, "--password-stdin", "--json", stdin="soak password 123\n")
        scopes = [x for s in ("kb:read", "kb:search", "kb:write", "doc:read", "doc:write") for x in ("--scope", s)]
        token = stack.cli("token", "create", "--user", email, "--name", "soak", *scopes, "--json")["token"]
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=stack.base, headers=auth, timeout=60) as c:
            ws = c.post("/api/workspaces", json={"name": "Soak"}).json()["id"]
            kb = c.post("/api/knowledge-bases", json={"workspace_id": ws, "title": "Soak KB"}).json()["id"]
            docs = []
            for i in range(args.docs):
                md = f"# Page {i}\n\n" + " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(200)) + "\n"
                r = c.post("/api/documents", json={"knowledge_base_id": kb, "title": f"Page {i}", "markdown": md})
                r.raise_for_status()
                docs.append(r.json()["id"])
            owns = []
            for i in range(args.clients):
                r = c.post("/api/documents", json={"knowledge_base_id": kb, "title": f"Client {i}", "markdown": "x\n"})
                r.raise_for_status()
                owns.append({"id": r.json()["id"], "base": r.json()["current_version_id"]})

        total_s = args.minutes * 60
        warm_s = min(30.0, total_s * 0.1)
        clients = [Client(i, stack.base, token, kb, docs, owns[i]) for i in range(args.clients)]
        t_warm = time.monotonic()
        for cl in clients:
            cl.start()
        for cl in clients:
            cl.warmed.wait()
        warm_pass_s = time.monotonic() - t_warm
        time.sleep(warm_s)  # the mixed load runs on, unmeasured
        mem_start = stack.memory()
        t_start = time.monotonic()
        for cl in clients:
            cl.stop_at = t_start + total_s
        print(
            f"warm pass {warm_pass_s:.0f}s + warm-up {warm_s:.0f}s done; soaking {total_s:.0f}s "
            f"with {args.clients} clients",
            file=sys.stderr,
        )
        for cl in clients:
            cl.join()
        t_end = time.monotonic()
        mem_end = stack.memory()
    finally:
        stack.down()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    samples = [s for cl in clients for s in cl.samples if s[0] >= t_start]
    duration = t_end - t_start
    quarter = duration / 4
    per_op: dict[str, Any] = {}
    for op in OPS:
        rows = [s for s in samples if s[1] == op]
        ok = [s[2] * 1000 for s in rows if s[3] < 400]
        per_op[op] = {
            "count": len(rows),
            "per_s": round(len(rows) / duration, 2),
            "p50_ms": round(pct(ok, 50), 1),
            "p95_ms": round(pct(ok, 95), 1),
            "p99_ms": round(pct(ok, 99), 1),
            # drift: the median of the first and of the last quarter of the run
            "p50_first_quarter_ms": round(pct([s[2] * 1000 for s in rows if s[0] < t_start + quarter], 50), 1),
            "p50_last_quarter_ms": round(pct([s[2] * 1000 for s in rows if s[0] >= t_end - quarter], 50), 1),
            "5xx": sum(1 for s in rows if s[3] >= 500),
            "other_non_2xx": sum(1 for s in rows if 300 <= s[3] < 500),
        }
    first = sum(1 for s in samples if s[0] < t_start + quarter)
    last = sum(1 for s in samples if s[0] >= t_end - quarter)

    def figure(at: dict[str, dict[str, float]], key: str) -> dict[str, float]:
        return {part: m[key] for part, m in at.items()}

    def growth(key: str) -> dict[str, float | None]:
        return {
            part: round(mem_end.get(part, {}).get(key, 0) / m[key], 3) if m[key] else None
            for part, m in mem_start.items()
        }

    uss_growth, rss_growth = growth("uss"), growth("rss")
    max_uss = max((g for g in uss_growth.values() if g), default=None)
    result = {
        "bench": "soak",
        "minutes": args.minutes,
        "clients": args.clients,
        "seconds_measured": round(duration, 1),
        "ops_per_s": round(len(samples) / duration, 2),
        "total_5xx": sum(v["5xx"] for v in per_op.values()),
        "per_op": per_op,
        "warm_pass_s": round(warm_pass_s, 1),
        "warm_pass_5xx": sum(cl.warm_errors for cl in clients),
        "warm_up_s": round(warm_s, 1),
        # the leak measure: memory private to each part (module docstring)
        "uss_mb_start": figure(mem_start, "uss"),
        "uss_mb_end": figure(mem_end, "uss"),
        "uss_growth_ratio": uss_growth,
        "max_uss_growth_ratio": max_uss,
        "leak_check": {"measure": "uss", "limit": LEAK_LIMIT, "ok": max_uss is not None and max_uss <= LEAK_LIMIT},
        # as measured; PostgreSQL's counts the shared buffers its backends touched
        "rss_mb_start": figure(mem_start, "rss"),
        "rss_mb_end": figure(mem_end, "rss"),
        "rss_growth_ratio": rss_growth,
        "max_rss_growth_ratio": max((g for g in rss_growth.values() if g), default=None),
        "processes_start": figure(mem_start, "processes"),
        "processes_end": figure(mem_end, "processes"),
        "throughput_last_vs_first_quarter": round(last / first, 3) if first else None,
    }
    print(f"{'op':8} {'count':>7} {'per s':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'5xx':>5}")
    for op, v in per_op.items():
        print(
            f"{op:8} {v['count']:>7} {v['per_s']:>7} {v['p50_ms']:>8} {v['p95_ms']:>8} {v['p99_ms']:>8} {v['5xx']:>5}"
        )
    print(
        f"{'part':11} {'USS MB start':>12} {'end':>7} {'growth':>7} {'RSS MB start':>12} {'end':>7} {'growth':>7} procs"
    )
    for part, m in mem_start.items():
        e = mem_end.get(part, {})
        print(
            f"{part:11} {m['uss']:>12} {e.get('uss', 0):>7} {uss_growth[part] or '-':>7} "
            f"{m['rss']:>12} {e.get('rss', 0):>7} {rss_growth[part] or '-':>7} "
            f"{int(m['processes'])}->{int(e.get('processes', 0))}"
        )
    verdict = "ok" if result["leak_check"]["ok"] else "OVER THE LIMIT"
    print(f"leak check (USS growth <= {LEAK_LIMIT} for every part): {verdict} (max {max_uss})")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
