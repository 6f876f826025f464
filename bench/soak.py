"""Soak: N clients mixing search, read, save and tree for a fixed time against the embedded
appliance (`openkb up` on a fresh temp home, everything embedded), as issue 17 asks.

    python bench/soak.py [--minutes 10] [--clients 4] [--docs 40] [--keep]

Reports per operation: count, throughput, p50/p95/p99 latency, 5xx count (and other non-2xx);
the memory of every part of the appliance (supervisor, API, worker, Milvus Lite, embedder,
PostgreSQL with its backends) after a warm-up and at the end, with the growth ratio; and the ratio
of the last to the first quarter's throughput (a slowdown over time shows below 1). Last line:
one JSON object.

Memory, per part, start -> end of the measured run, read from ``/proc/<pid>/smaps`` of every
process of the part at the same moment (PostgreSQL: postmaster, background processes, backends):

* **private**: pages no other process maps, outside shared memory segments (heap, stacks,
  written library pages). A leak grows it: the leak check (growth <= 1.10 per part).
* **shared**: shared memory segments counted once (the sum of their PSS over the part's
  processes: each page divided by the number of processes mapping it). For PostgreSQL this is
  its shared buffers in use: a cache of the database's pages, bounded by the segment it allocates
  at start (``shared_buffers``, 128MB in the embedded appliance, plus its other shared structures:
  about 144 MB). It grows as the saved versions add pages to the tables (the database's size is shown
  beside it), not by a leak.
* **memory** = private + shared: what the part holds, shared memory once; the memory check
  (growth <= 1.10 per part). For a one-process part it is its RSS without the pages of binaries
  and libraries it shares with other programs; for PostgreSQL it includes the cache filling.
* **RSS**, as measured. Trap: summed over PostgreSQL's processes it counts the shared buffers
  once per backend that touched them, and a backend's RSS grows as it touches buffers other
  backends already hold, with no new memory used at all: 228 -> 279 MB in a 3-minute run whose
  shared memory grew 16.4 -> 19.4 MB. Not a measure of memory for PostgreSQL.

PostgreSQL also gets per-backend figures (private memory and RSS per client backend, how many
were replaced: pooled connections live ``DB_POOL_RECYCLE_SECONDS``, openkb/db.py), the database's
size and ``shared_buffers``, the WAL written, and where the database's growth went
(``postgresql.relations``: per table, heap, indexes and TOAST at start and end, live and dead rows,
and the run's inserts, updates, HOT updates, deletes and autovacuums). That breakdown found two
things a save wrote for nothing (migration 0013: the superseded version's export form, and an
index entry per change row without an app); what a save still adds is its version (history is
kept) and its change-log row, ~1.4 KB together, and the small tables a save updates (documents,
chunks, export forms) stay bounded by autovacuum.

``postgresql_cache`` sets PostgreSQL's shared memory against that new data (function
``pg_cache``): every page PostgreSQL writes passes through its shared buffers and stays there
until they are full, so its shared memory grows with the user's new data (plus, once, the WAL
buffers) up to the segment's size and no further. It reports the growth per MB of new data, the
bound and the headroom, and ``memory_check_beside_new_data`` repeats the memory check with that
much set aside; ``memory_check`` itself is unchanged (issue 17's figure): on a long enough run
with enough saves PostgreSQL's memory legitimately grows past 1.10 of its start while it caches
the data the run added. Libraries' pages shared with other programs are left out of every
figure but RSS: their share moves with whatever else runs on the machine.

Where the time goes over the run (``quarters``, added to find why throughput fell over time): at
each quarter's end every part's CPU seconds so far (``/proc/<pid>/stat`` utime + stime of its
processes, plus the children they reaped: PostgreSQL's ended backends), the 1-minute load
average and Milvus Lite's state. Per quarter: operations, p50 per kind, each part's CPU seconds
and **CPU ms per operation** (a part doing more work per operation shows a rising figure even when
the machine is saturated and every latency rises with it), and ``cpu_ms_per_op_last_vs_first_
quarter`` per part; ``bench`` is this process (the clients share the cores). ``milvus_start`` /
``milvus_end``: the collection's row count next to PostgreSQL's live chunks, and its files from
Lite's manifest (data segments, delta files of deletions, the manifest's size). That found the
slowdown's share in Milvus Lite: a delta file per flush after a save, listed in a manifest Lite
rewrites on every flush (docs/retrieval.md#flushes). Compare quarters within one run: the
machine is shared.

The start figure is taken after an untimed warm phase: every client first reads every page,
searches every word, lists the tree and saves a few times (the pool opens the connections the run
will use and their backends touch the working set), then the mixed load runs for a short warm-up
before the figure is taken and the measured run begins. The number of processes per part at
start and end is reported too: a backend opened (or an autovacuum worker running) only at the end
adds its memory to the end figure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
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
GROWTH_LIMIT = 1.10  # memory growth per part over the measured run (issue 17's figure)


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
            check=False,
        )
        if out.returncode != 0:  # say why (a refused password read as exit status 2 and nothing else)
            raise SystemExit(f"openkb {' '.join(args)} failed: {out.stderr.strip()}")
        return json.loads(out.stdout)

    def down(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(120)

    def memory(self) -> dict[str, dict[str, Any]]:
        """Every part's memory (module docstring): ``{part: {"rss", "private", "shared", "memory"
        (MB), "processes", "per_process": [...]}}`` (PostgreSQL: postmaster, background processes
        and backends), all read from ``/proc/<pid>/smaps`` at the same moment."""
        out: dict[str, dict[str, Any]] = {}
        for name, pid in self.pids().items():
            try:
                proc = psutil.Process(pid)
                procs = [proc, *(proc.children(recursive=True) if name == "postgresql" else [])]
            except psutil.Error:
                procs = []
            rows = []
            for p in procs:
                r = smaps(p.pid)
                if r is None:
                    continue  # a backend that just ended
                try:
                    cmd = " ".join(p.cmdline())
                except psutil.Error:
                    continue
                r.update(pid=p.pid, kind=pg_kind(cmd) if name == "postgresql" and p.pid != pid else name)
                rows.append(r)
            agg = {k: round(sum(r[k] for r in rows) / 1024, 1) for k in ("rss", "private", "shared")}
            agg["shared_segment"] = round(max((r["shared_size"] for r in rows), default=0) / 1024, 1)
            agg["memory"] = round(agg["private"] + agg["shared"], 1)
            out[name] = {**agg, "processes": len(rows), "per_process": rows}
        return out

    def pids(self) -> dict[str, int]:
        """Every part's main pid: the supervisor (this bench's child) and what it recorded."""
        from openkb.runtime.home import Home
        from openkb.runtime.supervision import read_parts

        assert self.proc is not None
        pids: dict[str, int] = {"supervisor": self.proc.pid}
        snap = read_parts(Home(self.home)) or {"parts": {}}
        for name, p in snap["parts"].items():
            if p.get("pid"):
                pids[name] = int(p["pid"])
        return pids

    def cpu(self) -> dict[str, float]:
        """CPU seconds (user + system) each part has used so far, from ``/proc/<pid>/stat``
        (function ``cpu_seconds``), plus ``bench`` (this process: the clients' own load on the
        same cores). Read at each quarter's end; differences give CPU per quarter."""
        out = {name: cpu_seconds(pid, own_only=name == "supervisor") for name, pid in self.pids().items()}
        t = os.times()
        out["bench"] = t.user + t.system
        return {k: round(v, 2) for k, v in out.items()}

    def milvus(self) -> dict[str, Any]:
        """What Milvus Lite holds, read cheaply: the active collection's row count (its own
        statistics, deleted rows excluded) against the live chunks PostgreSQL says it should hold,
        and its files on disk from Lite's manifest (data segments, delta files of deletions,
        bytes, WAL). Lite answers no segment-info RPC (``get_query_segment_info`` is not in its
        servicer), so the manifest is the segment view."""
        import psycopg

        from openkb.runtime.embedded import milvus_client
        from openkb.runtime.home import Home, read_record
        from openkb.runtime.lite_files import lite_files

        home = Home(self.home)
        out: dict[str, Any] = {}
        uri = (read_record(home, "milvus") or {}).get("uri")
        url = (read_record(home, "postgresql") or {}).get("url")
        if uri:
            client = milvus_client(uri)
            try:
                for name in client.list_collections():
                    stats = client.get_collection_stats(name)
                    out.setdefault("collections", {})[name] = {"row_count": int(stats.get("row_count", 0))}
            finally:
                client.close()
        if url:
            with psycopg.connect(url) as c:
                out["pg_live_chunks"] = c.execute(LIVE_CHUNKS_SQL).fetchone()[0]  # type: ignore[index]
        for coll in sorted((home.milvus_dir / "collections").glob("*/manifest.json")):
            entry = out.setdefault("collections", {}).setdefault(coll.parent.name, {})
            entry.update(lite_files(coll.parent))
        return out

    def settled(self, timeout: float = 120.0) -> dict[str, Any]:
        """Once the load stopped and every index job finished (no page ``pending``), the chunk ids
        the active collection holds against PostgreSQL's live chunks, id by id: ``missing`` (a
        save that never became searchable) and ``stale`` (a replaced or deleted chunk still
        found) must both be 0. Read through the alias, as searches are; no flush is waited for
        (rows not yet flushed are queried alike, docs/retrieval.md#flushes)."""
        import psycopg

        from openkb.runtime.embedded import milvus_client
        from openkb.runtime.home import Home, read_record

        home = Home(self.home)
        uri = (read_record(home, "milvus") or {}).get("uri")
        url = (read_record(home, "postgresql") or {}).get("url")
        if not uri or not url:
            return {}
        t0 = time.monotonic()
        with psycopg.connect(url, autocommit=True) as c:
            while True:
                pending = c.execute(PENDING_SQL).fetchone()[0]  # type: ignore[index]
                if not pending or time.monotonic() - t0 > timeout:
                    break
                time.sleep(0.5)
            live = {str(r[0]) for r in c.execute(LIVE_CHUNK_IDS_SQL).fetchall()}
        from openkb.config import Settings

        alias = Settings.model_fields["milvus_active_alias"].default  # the appliance runs on defaults
        client = milvus_client(uri)
        try:
            held = {str(r["id"]) for r in client.query(alias, filter='id != ""', output_fields=["id"], limit=16384)}
        finally:
            client.close()
        return {
            "seconds_to_settle": round(time.monotonic() - t0, 1),
            "pages_pending": pending,
            "pg_live_chunks": len(live),
            "milvus_rows": len(held),
            "missing": len(live - held),
            "stale": len(held - live),
            "ok": not pending and live == held,
        }

    def database(self) -> dict[str, Any]:
        """PostgreSQL's own figures: the database's size and ``shared_buffers`` (the bound of its
        shared memory)."""
        import psycopg

        from openkb.runtime.home import Home, read_record

        url = (read_record(Home(self.home), "postgresql") or {}).get("url")
        if not url:
            return {}
        with psycopg.connect(url) as c:
            size, buffers, wal_buffers, wal_lsn = c.execute(
                "SELECT pg_database_size(current_database()), current_setting('shared_buffers'), "
                "pg_size_bytes(current_setting('wal_buffers')), "
                "pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"
            ).fetchone()  # type: ignore[misc]
            rows = c.execute(RELATIONS_SQL).fetchall()
        relations = {
            r[0]: {
                "table_kb": r[1] // 1024,
                "indexes_kb": r[2] // 1024,
                "toast_kb": r[3] // 1024,
                "live": r[4],
                "dead": r[5],
                "inserts": r[6],
                "updates": r[7],
                "hot_updates": r[8],
                "deletes": r[9],
                "autovacuums": r[10],
                "autoanalyzes": r[11],
            }
            for r in rows
        }
        return {
            "database_mb": round(size / 2**20, 1),
            "shared_buffers": buffers,
            "wal_buffers_mb": round(wal_buffers / 2**20, 1),
            "wal_mb": round(wal_lsn / 2**20, 1),
            "relations": relations,
        }


# Per table of the public schema: heap, its indexes, its TOAST (with the TOAST's index), and the
# activity counters that tell where growth comes from (dead rows, non-HOT updates, autovacuums).
RELATIONS_SQL = """
SELECT s.relname,
       pg_relation_size(s.relid),
       pg_indexes_size(s.relid),
       COALESCE(pg_total_relation_size(c.reltoastrelid), 0),
       s.n_live_tup, s.n_dead_tup, s.n_tup_ins, s.n_tup_upd, s.n_tup_hot_upd, s.n_tup_del,
       s.autovacuum_count, s.autoanalyze_count
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.schemaname = 'public'
ORDER BY pg_total_relation_size(s.relid) DESC
"""


# The rows the active collection should hold (openkb.indexing.service.pg_chunk_count's count):
# counted at each quarter, and listed by id once the run has settled (Stack.settled)
_LIVE_CHUNKS = """
FROM document_chunks c
JOIN documents d ON d.id = c.document_id AND d.current_version_id = c.version_id
WHERE d.type = 'page' AND d.status <> 'deleted' AND d.deleted_at IS NULL
"""
LIVE_CHUNKS_SQL = "SELECT count(*)" + _LIVE_CHUNKS
LIVE_CHUNK_IDS_SQL = "SELECT c.id" + _LIVE_CHUNKS
PENDING_SQL = "SELECT count(*) FROM documents WHERE type = 'page' AND index_status = 'pending' AND deleted_at IS NULL"

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_cpu(pid: int) -> tuple[float, float]:
    """(own, reaped children's) CPU seconds of one process: utime + stime, cutime + cstime."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])  # fields 14-17 of proc(5)
    return (utime + stime) / CLK_TCK, (cutime + cstime) / CLK_TCK


def cpu_seconds(pid: int, *, own_only: bool = False) -> float:
    """CPU seconds one part has used: its process, its live descendants (PostgreSQL's backends and
    background processes) and the children they have reaped (a backend that ended: the postmaster
    counts it). ``own_only`` for the supervisor, whose descendants are the other parts."""
    try:
        own, reaped = _stat_cpu(pid)
    except (OSError, ValueError):
        return 0.0
    if own_only:
        return own
    total = own + reaped
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        kids = []
    for k in kids:
        try:
            a, b = _stat_cpu(k.pid)
        except (OSError, ValueError):
            continue  # ended meanwhile: its parent counts it from now on
        total += a + b
    return total


# Mappings of shared memory segments: PostgreSQL's (an anonymous shared mmap shown as
# "/dev/zero (deleted)", plus a small SysV segment), POSIX shm and memfd.
SHARED_MEMORY = ("/dev/zero", "SYSV", "/dev/shm/", "/memfd:")
_MAPPING = re.compile(r"^[0-9a-f]+-[0-9a-f]+ ")


def smaps(pid: int) -> dict[str, Any] | None:
    """kB of one process from ``/proc/<pid>/smaps``: ``rss``; ``private`` (pages no other process
    maps, outside shared memory segments: heap, stacks, written library pages); ``shared`` (PSS of
    its shared memory segments: each page divided by the number of processes mapping it, so the
    sum over PostgreSQL's processes counts its shared buffers once)."""
    try:
        lines = Path(f"/proc/{pid}/smaps").read_text().splitlines()
    except OSError:
        return None
    rss = private = shared = shared_size = 0
    in_shm = False
    for ln in lines:
        if _MAPPING.match(ln):
            parts = ln.split(None, 5)
            in_shm = len(parts) > 5 and parts[5].startswith(SHARED_MEMORY)
            continue
        key, _, rest = ln.partition(":")
        if key == "Size" and in_shm:
            shared_size += int(rest.split()[0])
        elif key == "Rss":
            rss += int(rest.split()[0])
        elif key == "Pss" and in_shm:
            shared += int(rest.split()[0])
        elif key in ("Private_Clean", "Private_Dirty") and not in_shm:
            private += int(rest.split()[0])
    return {"rss": rss, "private": private, "shared": shared, "shared_size": shared_size}


PG_BACKGROUND = (
    "checkpointer",
    "background writer",
    "walwriter",
    "autovacuum launcher",
    "autovacuum worker",
    "logical replication launcher",
)


def pg_kind(cmdline: str) -> str:
    """``postgres: checkpointer`` -> its name; ``postgres: user db [local] idle`` -> ``backend``."""
    title = cmdline.removeprefix("postgres: ")
    return next((k for k in PG_BACKGROUND if title.startswith(k)), "backend")


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
        stack.cli("init", "--email", email, "--password-stdin", "--json", stdin="amber lantern quietly 42\n")
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
        db_start = stack.database()
        t_start = time.monotonic()
        for cl in clients:
            cl.stop_at = t_start + total_s
        print(
            f"warm pass {warm_pass_s:.0f}s + warm-up {warm_s:.0f}s done; soaking {total_s:.0f}s "
            f"with {args.clients} clients",
            file=sys.stderr,
        )
        quarters = [snapshot(stack)]
        for k in range(1, 5):
            time.sleep(max(0.0, t_start + k * total_s / 4 - time.monotonic()))
            quarters.append(snapshot(stack))
        for cl in clients:
            cl.join()
        t_end = time.monotonic()
        mem_end = stack.memory()
        db_end = stack.database()
        settled = stack.settled()
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
    by_quarter = quarter_figures(samples, quarters)
    cpu_first, cpu_last = by_quarter[0]["cpu_ms_per_op"], by_quarter[-1]["cpu_ms_per_op"]
    first = sum(1 for s in samples if s[0] < t_start + quarter)
    last = sum(1 for s in samples if s[0] >= t_end - quarter)

    def figure(at: dict[str, dict[str, Any]], key: str) -> dict[str, float]:
        return {part: m[key] for part, m in at.items()}

    def ratio(a: float, b: float) -> float | None:
        return round(b / a, 3) if a else None

    def growth(key: str) -> dict[str, float | None]:
        return {part: ratio(m[key], mem_end.get(part, {}).get(key, 0)) for part, m in mem_start.items()}

    def over(g: dict[str, float | None]) -> list[str]:
        return [part for part, r in g.items() if r is None or r > GROWTH_LIMIT]

    mem_growth, private_growth, rss_growth = growth("memory"), growth("private"), growth("rss")
    pg = {at: per_backend(m.get("postgresql", {})) for at, m in (("start", mem_start), ("end", mem_end))}
    cache = pg_cache(mem_start.get("postgresql", {}), mem_end.get("postgresql", {}), db_start, db_end)
    beside = dict(mem_growth)
    if "postgresql" in beside and cache:
        beside["postgresql"] = cache["memory_growth_ratio_beside_new_data"]
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
        # issue 17's figure, per part (module docstring): private memory + shared memory counted once
        "memory_mb_start": figure(mem_start, "memory"),
        "memory_mb_end": figure(mem_end, "memory"),
        "memory_growth_ratio": mem_growth,
        "memory_check": {
            "rule": f"every part's memory (private + shared counted once) grows <= {GROWTH_LIMIT}x",
            "over": over(mem_growth),
            "ok": not over(mem_growth),
        },
        # PostgreSQL's shared memory is a bounded cache of the database's pages (function pg_cache):
        # the same check with the pages of the run's new data (and WAL buffers touched for the first
        # time) set aside; the check above stays the figure
        "memory_check_beside_new_data": {
            "rule": f"every part's memory grows <= {GROWTH_LIMIT}x once PostgreSQL's cache of the run's new data is set aside",
            "over": over(beside),
            "ok": not over(beside),
        },
        "postgresql_cache": cache,
        # the leak measure: memory no other process maps
        "private_mb_start": figure(mem_start, "private"),
        "private_mb_end": figure(mem_end, "private"),
        "private_growth_ratio": private_growth,
        "leak_check": {
            "rule": f"every part's private memory grows <= {GROWTH_LIMIT}x",
            "over": over(private_growth),
            "ok": not over(private_growth),
        },
        # shared memory segments counted once (PostgreSQL: its shared buffers, bounded by shared_buffers)
        "shared_mb_start": figure(mem_start, "shared"),
        "shared_mb_end": figure(mem_end, "shared"),
        "postgresql": {
            "shared_buffers": db_end.get("shared_buffers"),
            # the bound of its shared memory: the segment it allocated at start (shared_buffers and
            # its other shared structures); resident pages of it can only grow up to that size
            "shared_segment_mb": mem_end.get("postgresql", {}).get("shared_segment", 0),
            "database_mb_start": db_start.get("database_mb"),
            "database_mb_end": db_end.get("database_mb"),
            "wal_buffers_mb": db_end.get("wal_buffers_mb"),
            "wal_written_mb": round(db_end.get("wal_mb", 0) - db_start.get("wal_mb", 0), 1),
            "backends_start": pg["start"]["backends"],
            "backends_end": pg["end"]["backends"],
            "private_mb_per_backend_start": pg["start"]["private"],
            "private_mb_per_backend_end": pg["end"]["private"],
            "rss_mb_per_backend_start": pg["start"]["rss"],
            "rss_mb_per_backend_end": pg["end"]["rss"],
            "backends_replaced": len(pg["start"]["pids"] - pg["end"]["pids"]),
            # where the database's growth went: per table, kB start -> end and the run's activity
            "relations": relation_growth(db_start.get("relations", {}), db_end.get("relations", {})),
        },
        # as measured: a PostgreSQL process's RSS counts every shared buffer it has mapped
        "rss_mb_start": figure(mem_start, "rss"),
        "rss_mb_end": figure(mem_end, "rss"),
        "rss_growth_ratio": rss_growth,
        "processes_start": figure(mem_start, "processes"),
        "processes_end": figure(mem_end, "processes"),
        "throughput_last_vs_first_quarter": round(last / first, 3) if first else None,
        # per quarter of the measured run (function quarter_figures): operations, p50 per operation,
        # each part's CPU seconds and CPU ms per operation, the load average at its end, Milvus
        # Lite's files; then each part's CPU per operation, last quarter against the first
        "quarters": by_quarter,
        "cpu_ms_per_op_last_vs_first_quarter": {
            part: ratio(cpu_first[part], cpu_last.get(part, 0)) for part in cpu_first
        },
        "milvus_start": quarters[0]["milvus"],
        "milvus_end": quarters[-1]["milvus"],
        # the index against the truth once the last jobs ran (Stack.settled): 0 missing, 0 stale
        "milvus_settled": settled,
    }
    print(f"{'op':8} {'count':>7} {'per s':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'5xx':>5}")
    for op, v in per_op.items():
        print(
            f"{op:8} {v['count']:>7} {v['per_s']:>7} {v['p50_ms']:>8} {v['p95_ms']:>8} {v['p99_ms']:>8} {v['5xx']:>5}"
        )
    print("\nmemory in MB, start -> end (growth); memory = private + shared counted once; RSS as measured")
    print(f"{'part':11} {'memory':>22} {'private':>22} {'shared':>14} {'RSS':>22} procs")
    for part, m in mem_start.items():
        e = mem_end.get(part, {})
        cells = [f"{m[k]} -> {e.get(k, 0)}" for k in ("memory", "private", "shared", "rss")]
        for n, g in ((0, mem_growth), (1, private_growth), (3, rss_growth)):
            cells[n] += f" ({g[part]})"
        print(
            f"{part:11} {cells[0]:>22} {cells[1]:>22} {cells[2]:>14} {cells[3]:>22} "
            f"{m['processes']}->{e.get('processes', 0)}"
        )
    pgr = result["postgresql"]
    print(
        f"PostgreSQL: shared memory (its shared buffers, counted once) {mem_start['postgresql']['shared']} -> "
        f"{mem_end['postgresql']['shared']} MB of its {pgr['shared_segment_mb']} MB segment (shared_buffers "
        f"{pgr['shared_buffers']} and its other shared structures); database "
        f"{pgr['database_mb_start']} -> {pgr['database_mb_end']} MB; backends {pgr['backends_start']} -> "
        f"{pgr['backends_end']} ({pgr['backends_replaced']} replaced), private per backend "
        f"{pgr['private_mb_per_backend_start']} -> {pgr['private_mb_per_backend_end']} MB, RSS per backend "
        f"{pgr['rss_mb_per_backend_start']} -> {pgr['rss_mb_per_backend_end']} MB"
    )
    if cache:
        print(
            f"PostgreSQL's cache: shared memory +{cache['shared_growth_mb']} MB for +{cache['database_growth_mb']} MB "
            f"of new data ({cache['shared_growth_per_mb_of_new_data']} MB per MB; WAL buffers {cache['wal_buffers_mb']} "
            f"MB, {cache['wal_written_mb']} MB of WAL written), {cache['headroom_mb']} MB left of its "
            f"{cache['cap_mb']} MB bound; memory growth beside the new data "
            f"{cache['memory_growth_ratio_beside_new_data']}"
        )
    parts = list(cpu_first)
    print("\nper quarter: operations, p50 ms per operation, CPU ms per operation of each part, load average")
    print(
        f"{'q':2} {'ops':>6} "
        + " ".join(f"{op:>7}" for op in OPS)
        + " "
        + " ".join(f"{p[:9]:>9}" for p in parts)
        + "  load"
    )
    for n, q in enumerate(by_quarter, 1):
        print(
            f"{n:<2} {q['ops']:>6} "
            + " ".join(f"{q['p50_ms'][op]:>7}" for op in OPS)
            + " "
            + " ".join(f"{q['cpu_ms_per_op'][p]:>9}" for p in parts)
            + f"  {q['load_end']}"
        )
    for at in ("milvus_start", "milvus_end"):
        m = result[at]
        colls = "; ".join(
            f"{name}: rows {c.get('row_count')}, {c.get('data_files')} data files ({c.get('data_kb')} KB), "
            f"{c.get('delta_files')} delta files ({c.get('delta_kb')} KB), manifest {c.get('manifest_kb')} KB"
            for name, c in m.get("collections", {}).items()
        )
        print(f"Milvus Lite at {at.split('_')[1]}: PostgreSQL's live chunks {m.get('pg_live_chunks')}; {colls}")
    st = result["milvus_settled"]
    if st:
        print(
            f"settled after {st['seconds_to_settle']} s ({st['pages_pending']} pages pending): PostgreSQL's live "
            f"chunks {st['pg_live_chunks']}, the active collection {st['milvus_rows']}; missing {st['missing']}, "
            f"stale {st['stale']}: " + ("ok" if st["ok"] else "NO")
        )
    for check in (result["memory_check"], result["memory_check_beside_new_data"], result["leak_check"]):
        print(f"{check['rule']}: " + ("ok" if check["ok"] else "NO: " + ", ".join(check["over"])))
    print(json.dumps(result))


def snapshot(stack: Stack) -> dict[str, Any]:
    """One quarter boundary: the time, every part's CPU so far, the 1-minute load average and
    Milvus Lite's state (``Stack.milvus``)."""
    return {"t": time.monotonic(), "cpu": stack.cpu(), "load": round(os.getloadavg()[0], 2), "milvus": stack.milvus()}


def quarter_figures(samples: list[tuple[float, str, float, int]], marks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per quarter between consecutive ``snapshot`` marks: operations finished in it (all and per
    kind), p50 per kind, each part's CPU seconds and CPU ms per operation (a part whose work per
    operation grows shows a rising figure even when the machine is saturated and throughput
    falls), the load average at its end and Milvus Lite's files then."""
    out = []
    for a, b in zip(marks, marks[1:]):
        rows = [s for s in samples if a["t"] <= s[0] < b["t"]]
        n = len(rows) or 1
        cpu = {part: round(b["cpu"].get(part, 0) - v, 2) for part, v in a["cpu"].items()}
        out.append(
            {
                "seconds": round(b["t"] - a["t"], 1),
                "ops": len(rows),
                "count": {op: sum(1 for s in rows if s[1] == op) for op in OPS},
                "p50_ms": {op: round(pct([s[2] * 1000 for s in rows if s[1] == op], 50), 1) for op in OPS},
                "cpu_s": cpu,
                "cpu_ms_per_op": {part: round(v * 1000 / n, 2) for part, v in cpu.items()},
                "load_end": b["load"],
                "milvus_files": {
                    name: {k: c.get(k) for k in ("data_files", "delta_files", "manifest_kb", "row_count")}
                    for name, c in b["milvus"].get("collections", {}).items()
                },
            }
        )
    return out


def pg_cache(
    start: dict[str, Any], end: dict[str, Any], db_start: dict[str, Any], db_end: dict[str, Any]
) -> dict[str, Any]:
    """PostgreSQL's shared memory against the data the run added.

    Every page PostgreSQL writes goes through its shared buffers and stays there until the cache
    is full (``shared_buffers``; nothing evicts it before), and the WAL a run writes passes
    through ``wal_buffers`` (a ring that is part of the segment: touched once, it stays). So the
    shared memory grows by the pages of the run's new data plus, once, the WAL buffers, up to its
    segment, and no further. ``explained``: the growth is within that (the database's growth plus
    the WAL buffers); ``memory_growth_ratio_beside_new_data``: the part's memory growth with that
    much set aside (the rest is what a leak would show in). Empty without the figures."""
    if not (start and end and db_start.get("database_mb") is not None and db_end.get("database_mb") is not None):
        return {}
    shared = round(end["shared"] - start["shared"], 1)
    data = round(db_end["database_mb"] - db_start["database_mb"], 1)
    wal_buffers = db_end.get("wal_buffers_mb") or 0.0
    cache_fill = max(0.0, min(shared, data + wal_buffers))
    return {
        "shared_growth_mb": shared,
        "database_growth_mb": data,
        "wal_buffers_mb": wal_buffers,
        "wal_written_mb": round(db_end.get("wal_mb", 0) - db_start.get("wal_mb", 0), 1),
        "shared_growth_per_mb_of_new_data": round(shared / data, 2) if data > 0 else None,
        "cap_mb": end.get("shared_segment", 0),
        "headroom_mb": round(end.get("shared_segment", 0) - end["shared"], 1),
        "explained": shared <= data + wal_buffers,
        "memory_growth_ratio_beside_new_data": round((end["memory"] - cache_fill) / start["memory"], 3)
        if start.get("memory")
        else None,
    }


def relation_growth(start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]) -> dict[str, Any]:
    """Per table that grew or was written during the run: its heap, indexes and TOAST in kB at
    start and end, its live and dead rows at the end, and the run's inserts, updates (HOT among
    them), deletes and autovacuums. Largest growth first."""
    out = {}
    for name, e in end.items():
        b = start.get(name, {})
        size = {k: (b.get(k, 0), e[k]) for k in ("table_kb", "indexes_kb", "toast_kb")}
        grew = sum(v[1] - v[0] for v in size.values())
        act = {k: e[k] - b.get(k, 0) for k in ("inserts", "updates", "hot_updates", "deletes", "autovacuums")}
        if grew or any(act.values()):
            out[name] = {"grew_kb": grew, **{k: f"{a} -> {z}" for k, (a, z) in size.items()}}
            out[name].update(live=e["live"], dead=e["dead"], **act)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["grew_kb"]))


def per_backend(part: dict[str, Any]) -> dict[str, Any]:
    """PostgreSQL's client backends: how many, their mean private memory and RSS (MB), their pids."""
    rows = [r for r in part.get("per_process", []) if r["kind"] == "backend"]
    n = len(rows)
    return {
        "backends": n,
        "private": round(sum(r["private"] for r in rows) / n / 1024, 2) if n else None,
        "rss": round(sum(r["rss"] for r in rows) / n / 1024, 2) if n else None,
        "pids": {r["pid"] for r in rows},
    }


if __name__ == "__main__":
    main()
