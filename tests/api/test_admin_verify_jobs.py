"""POST /api/admin/milvus/verify-jobs: the console's verify / repair, run by the worker through
``openkb.indexing.verify`` and polled; one live job at a time; administrators only."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import text as sql_text
from sqlmodel import select

import openkb.jobs as jobs
from openkb.db import session_scope
from openkb.indexing import milvus as mv
from openkb.indexing import service
from openkb.indexing.profiles import current_target
from openkb.models import AuditLog, IndexVerifyJob
from openkb.models._base import utcnow
from tests.api.helpers import login, make_login_user

pytestmark = pytest.mark.usefixtures("worker")


@pytest.fixture()
def hueyqueue(app_ctx):
    from workers.queue import HueyQueue

    previous = jobs._queue
    jobs.set_queue(HueyQueue())
    with session_scope(app_ctx.engine) as s:
        service.ensure_default_profile(app_ctx, s)
    yield
    jobs.set_queue(previous)


def _wait(c, job_id: str) -> dict:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = c.get(f"/api/admin/milvus/verify-jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.3)
    raise AssertionError(f"verify job {job_id} did not finish: {job}")


def test_admin_repairs_the_active_collection_through_a_polled_job(app_ctx, live_server, committed, hueyqueue):
    admin, member = make_login_user(committed, role="tenant_admin"), make_login_user(committed)
    client, coll = app_ctx.milvus, current_target(app_ctx.milvus, app_ctx.settings.milvus_active_alias)
    ghost = mv.chunk_row(
        chunk_id=uuid.uuid4(),
        tenant_id=uuid.uuid4(),
        workspace_id=uuid.uuid4(),
        knowledge_base_id=uuid.uuid4(),
        document_id=uuid.uuid4(),
        version_id=uuid.uuid4(),
        doc_status="published",
        visibility_eff="workspace",
        content_text="ghost row",
    )
    mv.upsert_rows(client, coll, [ghost])

    with login(live_server, member.email) as m:
        assert m.post("/api/admin/milvus/verify-jobs", json={}).status_code == 403
    with login(live_server, admin.email) as a:
        r = a.post("/api/admin/milvus/verify-jobs", json={"repair": True})
        assert r.status_code == 202, r.text
        job = _wait(a, r.json()["id"])
        assert job["status"] == "succeeded", job
        assert job["collection"] == coll and job["report"]["extra"] >= 1 and job["report"]["repaired"] is True
        assert job["progress"] is None and "progress" not in job["report"]
        assert a.get("/api/admin/milvus/verify-jobs").json()["items"][0]["id"] == job["id"]  # found after a reload
        assert a.get(f"/api/admin/milvus/verify-jobs/{uuid.uuid4()}").status_code == 404
    client.flush(coll)
    assert mv.query_rows(client, coll, f'id == "{ghost["id"]}"', output_fields=["id"], limit=1) == []
    with committed() as s:
        started = s.exec(
            select(AuditLog).where(AuditLog.action == "milvus.verify.start", AuditLog.object_id == uuid.UUID(job["id"]))
        ).one()
        assert started.actor_user_id == admin.user_id and started.meta["repair"] is True
        repaired = s.exec(
            select(AuditLog).where(AuditLog.action == "milvus.index.repair", AuditLog.actor_user_id == admin.user_id)
        ).all()
        assert repaired  # the job ran as the administrator who started it


def _ghost():
    return mv.chunk_row(
        chunk_id=uuid.uuid4(),
        tenant_id=uuid.uuid4(),
        workspace_id=uuid.uuid4(),
        knowledge_base_id=uuid.uuid4(),
        document_id=uuid.uuid4(),
        version_id=uuid.uuid4(),
        doc_status="published",
        visibility_eff="workspace",
        content_text="ghost row",
    )


def test_verify_reports_progress_by_phase(app_ctx, hueyqueue):
    """``verify(progress=...)`` hears the pages compared, then the documents to repair."""
    from openkb.indexing.verify import verify
    from openkb.permissions.principal import Principal

    client, coll = app_ctx.milvus, current_target(app_ctx.milvus, app_ctx.settings.milvus_active_alias)
    mv.upsert_rows(client, coll, [_ghost()])
    heard: list[tuple[str, int, int]] = []
    with session_scope(app_ctx.engine) as s:
        pages = s.execute(sql_text("SELECT count(*) FROM documents WHERE type = 'page'")).scalar_one()
        rep = verify(app_ctx, s, Principal.system(), repair=True, progress=lambda *a: heard.append(a))
    assert rep["repaired"]
    compare = [h for h in heard if h[0] == "compare"]
    assert compare[0] == ("compare", 0, pages) and compare[-1] == ("compare", pages, pages)
    assert [h[1] for h in compare] == sorted(h[1] for h in compare)
    assert heard[-1][0] == "repair"


def test_one_live_job_at_a_time(live_server, committed):
    admin = make_login_user(committed, role="tenant_admin")
    with committed() as s:
        live = IndexVerifyJob(status="running", phase="verifying")
        s.add(live)
        s.commit()
        live_id = str(live.id)
    try:
        with login(live_server, admin.email) as a:
            r = a.post("/api/admin/milvus/verify-jobs", json={"repair": False})
            assert r.status_code == 200 and r.json()["id"] == live_id, r.text
    finally:
        with committed() as s:
            s.get(IndexVerifyJob, uuid.UUID(live_id)).status = "failed"
            s.commit()


def test_a_job_that_lost_its_worker_stops_blocking(live_server, committed):
    """Regression: a job left running by a killed worker showed live for ever (buttons disabled)."""
    admin = make_login_user(committed, role="tenant_admin")
    with committed() as s:
        lost = IndexVerifyJob(status="running", phase="compare", created_at=utcnow() - timedelta(hours=3))
        s.add(lost)
        s.commit()
        lost_id = str(lost.id)
    with login(live_server, admin.email) as a:
        items = a.get("/api/admin/milvus/verify-jobs", params={"limit": 50}).json()["items"]
        row = next(j for j in items if j["id"] == lost_id)
        assert row["status"] == "failed" and row["error"].startswith("lost"), row


def test_a_failure_without_a_message_still_says_what_failed(app_ctx, committed, monkeypatch):
    """Regression: an exception with no text (``TimeoutError()``) left the job ``failed`` with no
    reason for the console to show."""
    from openkb.indexing import verify_jobs

    def times_out(*_a, **_k):
        raise TimeoutError()

    monkeypatch.setattr(verify_jobs, "verify", times_out)
    with committed() as s:
        job = IndexVerifyJob(status="pending")
        s.add(job)
        s.commit()
        job_id = job.id
    with session_scope(app_ctx.engine) as s:
        assert verify_jobs.run_verify_job(app_ctx, s, job_id=job_id)["status"] == "failed"
    with committed() as s:
        row = s.get(IndexVerifyJob, job_id)
        assert (row.status, row.error) == ("failed", "TimeoutError")
