"""Two API processes and two workers on one PostgreSQL, one Redis and one S3 (docs/deployment.md):
nothing that must be shared lives in a process. Concurrent saves of one base version give one
success and conflicts; a session, its CSRF token and its logout hold on both APIs; the login
throttle counts attempts made on either; every index job runs once; a rebuild started on one
API is followed and controlled from the other."""

from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlmodel import Session, col, select

from openkb.accounts import sessions as sessions_svc
from openkb.models import Document
from openkb.runtime.embedded import free_port
from tests.api.helpers import PASSWORD, make_login_user, make_user_with_pat
from tests.content.http_world import HttpWorld, sha

ROOT = Path(__file__).resolve().parents[2]


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-1500:] if path.exists() else ""


@pytest.fixture(scope="module")
def cluster(database_url, milvus_services, redis_url, s3_server) -> Iterator[dict]:
    """``openkb serve`` twice and ``openkb worker`` twice, as separate processes, one home each."""
    work = Path(tempfile.mkdtemp(prefix="openkb-scaleout-"))
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "MILVUS_URI": milvus_services["milvus_uri"],
        "OPENKB_EMBEDDER_URL": milvus_services["embedder_url"] or "off",
        "REDIS_URL": redis_url,
        "S3_ENDPOINT": s3_server["endpoint"],
        "S3_BUCKET": s3_server["bucket"],
        "S3_ACCESS_KEY": s3_server["access_key"],
        "S3_SECRET_KEY": s3_server["secret_key"],
        "OPENKB_SECRET_KEY": "scale-out-shared-secret-" + uuid.uuid4().hex,
        "OPENKB_ENV": "test",
        "OPENKB_LOG_LEVEL": "WARNING",
    }
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []
    bases = []

    def start(name: str, args: list[str], **extra: str) -> None:
        home = work / name
        home.mkdir()
        log = work / f"{name}.log"
        with open(log, "wb") as fh:
            p = subprocess.Popen(
                [sys.executable, "-m", "cli.main", *args],
                cwd=ROOT,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**env, "OPENKB_HOME": str(home), **extra},
            )
        procs.append((p, log))

    for i in (1, 2):
        port = free_port()
        bases.append(f"http://127.0.0.1:{port}")
        start(f"api{i}", ["serve", "--host", "127.0.0.1", "--port", str(port)])
        # INFO: huey logs every task it finishes ("<task id> executed in ..."), read by the test
        start(f"worker{i}", ["worker", "--workers", "2"], OPENKB_LOG_LEVEL="INFO")
    try:
        deadline = time.monotonic() + 240
        pending = set(bases)
        while pending and time.monotonic() < deadline:
            for p, log in procs:
                if p.poll() is not None:
                    pytest.fail(f"{log.name} exited with {p.returncode}: {_tail(log)}")
            for b in list(pending):
                try:
                    if httpx.get(b + "/readyz", timeout=5).status_code == 200:
                        pending.discard(b)
                except httpx.HTTPError:
                    pass
            time.sleep(0.2)
        assert not pending, f"not ready: {pending}; " + " | ".join(_tail(log) for _, log in procs)
        yield {
            "a": bases[0],
            "b": bases[1],
            "procs": procs,
            "worker_logs": [log for _, log in procs if log.name.startswith("worker")],
        }
    finally:
        for p, _ in procs:
            p.terminate()
        for p, _ in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture()
def world(cluster, committed):
    w = HttpWorld(cluster["a"], committed)
    yield w
    w.close()


def on(base: str, client: httpx.Client) -> httpx.Client:
    """The same caller (its token or cookies) talking to another API process."""
    return httpx.Client(base_url=base, headers=dict(client.headers), cookies=client.cookies, timeout=60)


def test_concurrent_saves_of_one_base_give_one_success(cluster, world):
    doc = world.doc("Contended", markdown="start\n")
    owner_a, owner_b = world.c["owner"], on(cluster["b"], world.c["owner"])
    base = doc["current_version_id"]

    def save(i: int) -> httpx.Response:
        md = f"edit {i}\n"
        client = owner_a if i % 2 else owner_b
        return client.post(
            f"/api/documents/{doc['id']}/versions",
            json={"base_version_id": base, "markdown": md, "markdown_hash": sha(md)},
        )

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(save, range(8)))
    codes = sorted(r.status_code for r in results)
    assert codes.count(201) + codes.count(200) == 1, [(r.status_code, r.text[:200]) for r in results]
    assert all(r.json()["error"] == "VERSION_CONFLICT" for r in results if r.status_code == 409)
    assert codes.count(409) == 7
    owner_b.close()


def test_a_session_its_csrf_and_its_logout_hold_on_both_apis(cluster, committed):
    acct = make_login_user(committed)
    r = httpx.post(cluster["a"] + "/api/auth/login", json={"email": acct.email, "password": PASSWORD}, timeout=30)
    assert r.status_code == 200, r.text
    csrf = r.json()["csrf_token"]
    with (
        httpx.Client(base_url=cluster["b"], cookies=r.cookies, timeout=30) as b,
        httpx.Client(base_url=cluster["a"], cookies=r.cookies, timeout=30) as a,
    ):
        assert b.get("/api/me").status_code == 200  # made on A, known to B
        assert b.post("/api/auth/logout").status_code == 403  # no CSRF token: refused on B too
        assert b.post("/api/auth/logout", headers={"X-CSRF-Token": csrf}).status_code in (200, 204)
        assert a.get("/api/me").status_code == 401  # logged out on B, gone on A


def test_the_login_throttle_counts_attempts_on_either_api(cluster, committed):
    window = sessions_svc.LOGIN_WINDOW_SECONDS
    if time.time() % window > window - 20:  # fixed windows: keep the burst inside one
        time.sleep(window + 1 - time.time() % window)
    acct = make_login_user(committed)
    try:
        for i in range(sessions_svc.LOGIN_LIMIT_PER_ACCOUNT):
            base = cluster["a"] if i % 2 else cluster["b"]
            r = httpx.post(base + "/api/auth/login", json={"email": acct.email, "password": "wrong"}, timeout=30)
            assert r.status_code == 401, r.text
        for base in (cluster["a"], cluster["b"]):  # each process has seen only half of them
            r = httpx.post(base + "/api/auth/login", json={"email": acct.email, "password": PASSWORD}, timeout=30)
            assert r.status_code == 429 and r.json()["error"] == "RATE_LIMITED"
    finally:
        with committed() as s:
            s.execute(
                text("DELETE FROM rate_limit_buckets WHERE key IN (:a, 'login:ip:127.0.0.1')"),
                {"a": f"login:acct:{acct.email}"},
            )
            s.commit()


def test_every_index_job_runs_once(cluster, world, engine):
    owner_b = on(cluster["b"], world.c["owner"])
    ids = []
    for i in range(6):
        client = world.c["owner"] if i % 2 else owner_b
        r = client.post(
            "/api/documents",
            json={
                "knowledge_base_id": world.kb["id"],
                "title": f"Spread {i}",
                "markdown": f"spread {i} {uuid.uuid4().hex}\n",
            },
        )
        assert r.status_code == 201, r.text
        ids.append(uuid.UUID(r.json()["id"]))
    owner_b.close()
    deadline = time.monotonic() + 180
    while True:
        with Session(engine) as s:
            docs = s.exec(select(Document).where(col(Document.id).in_(ids))).all()
        if all(d.index_status == "indexed" and d.indexed_version_id == d.current_version_id for d in docs):
            break
        if time.monotonic() > deadline:
            pytest.fail(f"not indexed by the workers: {[(d.index_status, d.index_error) for d in docs]}")
        time.sleep(0.2)
    # each document was indexed by one job, run by one of the four consumers, once
    runs = Counter(
        m
        for log in cluster["worker_logs"]
        for m in re.findall(r"Executing workers\.tasks\.openkb\.run_job: ([0-9a-f-]{36})", log.read_text())
    )
    assert len(runs) >= len(ids), runs
    assert max(runs.values()) == 1, {k: n for k, n in runs.items() if n > 1}


def test_a_rebuild_started_on_one_api_is_followed_and_controlled_from_the_other(cluster, committed):
    _, token = make_user_with_pat(
        committed, role="system_admin", scopes=("kb:read", "kb:search", "doc:read", "doc:write", "kb:write", "admin")
    )
    headers = {"Authorization": f"Bearer {token}"}
    name = f"scale_{uuid.uuid4().hex[:8]}"
    with (
        httpx.Client(base_url=cluster["a"] + "/api/admin/milvus", headers=headers, timeout=60) as a,
        httpx.Client(base_url=cluster["b"] + "/api/admin/milvus", headers=headers, timeout=60) as b,
    ):
        r = a.post("/index-profiles", json={"name": name})
        assert r.status_code == 201, r.text
        r = a.post("/rebuild-jobs", json={"profile": name})
        assert r.status_code == 202, r.text
        job_id = r.json()["id"]
        deadline = time.monotonic() + 180
        while (job := b.get(f"/rebuild-jobs/{job_id}").json())["status"] not in ("succeeded", "failed"):
            assert time.monotonic() < deadline, job
            time.sleep(0.2)
        assert job["status"] == "succeeded", job.get("error")
        assert any(j["id"] == job_id for j in b.get("/rebuild-jobs").json()["items"])
        r = b.delete(f"/index-profiles/{name}/collection")
        assert r.status_code == 200, r.text
        mine = [p for p in a.get("/index-profiles").json()["items"] if p["name"] == name]
        assert mine and mine[0]["status"] == "dropped", mine
