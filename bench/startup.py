"""Time from `openkb up` to /readyz 200 (cold = fresh OPENKB_HOME, warm = second start), and the
resident memory of the whole process tree when idle (supervisor, API, worker, Milvus Lite,
embedder and the PostgreSQL processes of that home).

    python bench/startup.py [--runs 2]

Last line: JSON with cold_ready_s, warm_ready_s, idle_rss_mb (and the per-process split).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(home: Path, port: int) -> tuple[subprocess.Popen[bytes], float]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "MILVUS_URI", "OPENKB_EMBEDDER_URL", "REDIS_URL", "S3_ENDPOINT", "SMTP_HOST")
    }
    env["OPENKB_HOME"] = str(home)
    t = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "up", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"openkb up exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return proc, time.perf_counter() - t
        except httpx.HTTPError:
            pass
        time.sleep(0.05)


def tree_rss(proc: subprocess.Popen[bytes], home: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    root = psutil.Process(proc.pid)
    procs = [root, *root.children(recursive=True)]
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if f"-D {home / 'pg'}" in cmd:  # the postmaster of this home (pg_ctl daemonizes it) + its backends
            procs.extend([p, *p.children(recursive=True)])
    for p in procs:
        try:
            cmd = " ".join(p.cmdline())
            rss = p.memory_info().rss / 2**20
        except psutil.Error:
            continue
        if "milvus-lite" in cmd or "openkb.runtime.lite_server" in cmd:
            name = "milvus_lite"
        elif "openkb.embedder" in cmd:
            name = "embedder"
        elif "cli.main serve" in cmd:
            name = "api"
        elif "cli.main worker" in cmd:
            name = "worker"
        elif "postgres" in cmd:
            name = "postgresql"
        else:
            name = "supervisor"
        out[name] = round(out.get(name, 0.0) + rss, 1)
    return out


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle-seconds", type=float, default=5.0)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="openkb-startup-"))
    try:
        port = free_port()
        proc, cold = start(home, port)
        print(f"cold start to /readyz 200: {cold:.2f} s")
        stop(proc)
        proc, warm = start(home, port)
        print(f"warm start to /readyz 200: {warm:.2f} s")
        time.sleep(args.idle_seconds)
        rss = tree_rss(proc, home)
        total = round(sum(rss.values()), 1)
        for k, v in sorted(rss.items()):
            print(f"  {k:12s} {v:8.1f} MB")
        print(f"idle resident memory of the tree: {total:.0f} MB")
        stop(proc)
        print(
            json.dumps(
                {
                    "cold_ready_s": round(cold, 2),
                    "warm_ready_s": round(warm, 2),
                    "idle_rss_mb": total,
                    "rss_by_process_mb": rss,
                }
            )
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
