"""Server skeleton and worker skeleton over the real components."""

from __future__ import annotations

import json
import os
import time
import uuid

from sqlmodel import select

from openkb.jobs import RecordingQueue, enqueue_after_commit, get_queue, set_queue
from openkb.models import AuditLog


def test_healthz_and_readyz(http):
    assert http.get("/healthz").json() == {"status": "alive"}
    r = http.get("/readyz")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ready"
    # dense: the active profile's embedding route (docs/operations.md#outages), present once an
    # active profile with dense vectors exists (earlier tests in the session create it)
    assert {"postgresql", "milvus", "queue"} <= set(body["checks"]) <= {"postgresql", "milvus", "queue", "dense"}
    assert all(c["ok"] for c in body["checks"].values()) and not body.get("degraded")
    assert body["warmup"]["done"] is True
    # the Chinese word segmenter's dictionary is loaded by the warm-up, not by the first search
    assert body["warmup"]["segmenter_s"] >= 0
    from openkb.retrieval import segment

    assert segment._tokenizer is not None


def test_readyz_shows_the_supervised_parts_and_is_503_while_one_restarts(http, app_ctx):
    """Under `openkb up` /readyz reads the supervisor's run/parts.json (docs/operations.md#supervision):
    a part in backoff makes it 503 and is named; an embedder given up on only degrades it."""
    from openkb.runtime.home import Home
    from openkb.runtime.supervision import write_parts

    home = Home(app_ctx.settings.openkb_home).ensure()
    path = home.run_dir / "parts.json"
    running = {"state": "running", "pid": 1, "restarts": 0, "last_exit": None, "optional": False}
    parts = {
        "postgresql": running,
        "milvus": {**running, "state": "backoff", "pid": None, "restarts": 2, "last_exit": "killed by SIGKILL"},
        "embedder": {**running, "state": "failed", "optional": True, "last_exit": "exited with code 1"},
    }
    try:
        write_parts(home, {"supervisor_pid": os.getpid(), "parts": parts})  # a live "supervisor"
        r = http.get("/readyz")
        assert r.status_code == 503, r.text
        body = r.json()
        assert body["parts_down"] == ["milvus"]
        assert body["parts"]["milvus"]["last_exit"] == "killed by SIGKILL"
        assert body["parts"]["milvus"]["restarts"] == 2
        parts["milvus"] = running
        write_parts(home, {"supervisor_pid": os.getpid(), "parts": parts})
        r = http.get("/readyz")
        assert r.status_code == 200, r.text
        assert r.json()["parts_down"] == [] and r.json()["parts"]["embedder"]["state"] == "failed"
    finally:
        path.unlink(missing_ok=True)
    assert "parts" not in http.get("/readyz").json()  # no supervisor: nothing claimed


def test_openapi_is_served(http):
    spec = http.get("/api/openapi.json").json()
    assert spec["info"]["title"] == "OpenKB"
    assert "/readyz" in spec["paths"]


def test_unknown_route_uses_error_shape(http):
    r = http.get("/api/definitely-not-a-route")
    assert r.status_code == 404
    assert r.json()["error"] == "NOT_FOUND"
    assert r.headers["x-request-id"]


def test_request_id_is_echoed(http):
    r = http.get("/healthz", headers={"X-Request-Id": "abc123"})
    assert r.headers["x-request-id"] == "abc123"


def test_job_runs_through_a_real_consumer(worker, committed):
    from workers.queue import HueyQueue

    previous = None
    try:
        previous = get_queue()
    except RuntimeError:
        pass
    set_queue(HueyQueue())
    note = uuid.uuid4().hex
    try:
        with committed() as s:
            enqueue_after_commit(s, "ping", note=note)
            s.commit()
        deadline = time.monotonic() + 30
        found = None
        while time.monotonic() < deadline and found is None:
            with committed() as s:
                found = s.exec(
                    select(AuditLog).where(AuditLog.action == "worker.ping").where(AuditLog.meta["note"].astext == note)
                ).first()
            time.sleep(0.1)
        assert found is not None, "the consumer never ran the job"
    finally:
        set_queue(previous)


def test_jobs_are_dropped_on_rollback(committed):
    import openkb.jobs

    previous = openkb.jobs._queue  # the live server's queue: later HTTP tests need it back
    q = RecordingQueue()
    set_queue(q)
    try:
        with committed() as s:
            enqueue_after_commit(s, "ping", note="never")
            s.rollback()
        with committed() as s:
            enqueue_after_commit(s, "ping", note="once")
            enqueue_after_commit(s, "ping", note="once")  # same job twice in one unit of work
            s.commit()
        assert q.jobs == [("ping", {"note": "once"})]
    finally:
        set_queue(previous)


def test_settings_mask_secrets(monkeypatch):
    from openkb.config import Settings

    monkeypatch.setenv("S3_SECRET_KEY", "supersecret")
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:hunter2@db.example.com:5432/kb")
    monkeypatch.setenv("SMTP_PASSWORD", "mailpw")
    rows = {r["name"]: r for r in Settings().describe()}
    text = repr(rows)
    assert "supersecret" not in text and "hunter2" not in text and "mailpw" not in text
    assert rows["DATABASE_URL"]["mode"] == "external"
    assert rows["MILVUS_ACTIVE_ALIAS"]["value"] == "openkb_chunks_active"
    assert rows["S3_ENDPOINT"]["mode"] == "embedded"


def test_secret_key_generated_once(tmp_path):
    from openkb.config import Settings

    s = Settings(openkb_home=tmp_path)
    k1 = s.secret_key
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600
    assert Settings(openkb_home=tmp_path).secret_key == k1


def test_production_requires_explicit_secret(tmp_path):
    import pytest

    from openkb.config import Settings
    from openkb.errors import ConfigError

    with pytest.raises(ConfigError):
        _ = Settings(openkb_home=tmp_path, openkb_env="production").secret_key


def test_doctor_warns_when_a_dense_profile_has_no_embedder(app_ctx):
    import dataclasses

    from sqlmodel import Session

    from openkb.context import AppContext
    from openkb.db import session_scope
    from openkb.health import alias_target_quiet, check_embedder
    from openkb.indexing.profiles import find_by_collection
    from openkb.indexing.service import ensure_default_profile

    with session_scope(app_ctx.engine) as s:
        ensure_default_profile(app_ctx, s)
    target = alias_target_quiet(app_ctx.milvus, app_ctx.settings.milvus_active_alias)
    with Session(app_ctx.engine) as s:
        active = find_by_collection(s, target)
    assert active is not None  # whichever profile earlier tests left active
    assert check_embedder(app_ctx).ok  # the test appliance runs the embedder
    no_embedder = AppContext.build(app_ctx.settings, dataclasses.replace(app_ctx.endpoints, embedder_url=None))
    try:
        down = check_embedder(no_embedder)
    finally:
        no_embedder.close()
    assert not down.ok and "BM25-only" in down.detail
    if active.vector_dim > 0:
        assert "dense vectors" in down.detail and active.name in down.detail
    else:
        assert "dense vectors" not in down.detail


# --- APP_BASE_URL unset: links follow the address actually served (docs/operations.md) ------------


def test_app_base_url_follows_the_served_address_when_unset(tmp_path, monkeypatch):
    from openkb.config import SERVED_URL_ENV, Settings, served_url

    monkeypatch.delenv("APP_BASE_URL", raising=False)
    monkeypatch.setenv(SERVED_URL_ENV, served_url("127.0.0.1", 18000))
    s = Settings(openkb_home=tmp_path)
    assert s.app_base_url == "http://127.0.0.1:18000"
    assert s.app_base_url_source.startswith("derived")
    row = {r["name"]: r for r in s.describe()}["APP_BASE_URL"]
    assert row["value"] == "http://127.0.0.1:18000" and row["source"] == s.app_base_url_source

    monkeypatch.setenv("APP_BASE_URL", "https://kb.example.com")  # set: it wins
    s = Settings(openkb_home=tmp_path)
    assert (s.app_base_url, s.app_base_url_source) == ("https://kb.example.com", "environment")


def test_cli_process_takes_the_base_url_of_the_running_up(tmp_path, monkeypatch):
    """A CLI command (`openkb dify info`) is not the server: it reads the live `up` record."""
    from openkb.config import SERVED_URL_ENV, Settings
    from openkb.runtime.home import Home, write_record

    monkeypatch.delenv("APP_BASE_URL", raising=False)
    monkeypatch.delenv(SERVED_URL_ENV, raising=False)
    fresh = Settings(openkb_home=tmp_path)
    assert fresh.app_base_url == "http://127.0.0.1:8000" and fresh.app_base_url_source.startswith("default")
    write_record(Home(tmp_path).ensure(), "up", {"url": "http://127.0.0.1:18001"})  # this (live) process
    s = Settings(openkb_home=tmp_path)
    assert s.app_base_url == "http://127.0.0.1:18001"
    assert "openkb up" in s.app_base_url_source and str(os.getpid()) in s.app_base_url_source
    (tmp_path / "run" / "up.json").write_text(json.dumps({"url": "http://127.0.0.1:18002", "pid": 999999999}))
    assert Settings(openkb_home=tmp_path).app_base_url == "http://127.0.0.1:8000"  # a dead up's record


def test_served_url_of_a_wildcard_bind_is_a_reachable_name():
    import socket

    from openkb.config import served_url

    assert served_url("0.0.0.0", 8080) == f"http://{socket.gethostname()}:8080"
    assert served_url("::1", 8080) == "http://[::1]:8080"
    assert served_url("kb.internal", 80) == "http://kb.internal:80"
