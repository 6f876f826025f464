"""A knowledge base's index panel over HTTP: counts for managers, retry of the failed pages."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlmodel import select

from openkb import jobs
from openkb.models import AuditLog
from tests.api.helpers import login, make_login_user


@pytest.fixture()
def no_worker():
    """Jobs are recorded, not run: a worker of the session would index the pages while the test
    sets their statuses by hand (seen in a full run: 3 indexed instead of 1/1/1)."""
    previous = jobs._queue
    q = jobs.RecordingQueue()
    jobs.set_queue(q)
    yield q
    jobs.set_queue(previous)


def test_counts_and_retry_for_managers_only(live_server, committed, no_worker):
    owner, member = make_login_user(committed), make_login_user(committed)
    with login(live_server, owner.email) as c:
        ws = c.post("/api/workspaces", json={"name": f"Idx {uuid.uuid4().hex[:6]}"}).json()
        assert (
            c.post(f"/api/workspaces/{ws['id']}/members", json={"email": member.email, "role": "member"}).status_code
            == 201
        )
        kb = c.post(
            "/api/knowledge-bases", json={"workspace_id": ws["id"], "title": "Idx", "visibility": "workspace"}
        ).json()
        docs = [
            c.post(
                "/api/documents",
                json={"knowledge_base_id": kb["id"], "type": "page", "title": f"P{i}", "markdown": f"# P{i}\n"},
            ).json()
            for i in range(3)
        ]
    with committed() as s:
        s.execute(
            text(
                "UPDATE documents SET index_status = 'failed', index_attempts = 5, index_error = 'boom' WHERE id = :a"
            ),
            {"a": docs[0]["id"]},
        )
        s.execute(text("UPDATE documents SET index_status = 'indexed' WHERE id = :b"), {"b": docs[1]["id"]})
        s.execute(text("UPDATE documents SET index_status = 'pending' WHERE id = :c"), {"c": docs[2]["id"]})
        s.commit()
    url = f"/api/knowledge-bases/{kb['id']}"
    with login(live_server, member.email) as m:  # may read the knowledge base, not manage it
        assert m.get(url).status_code == 200
        assert m.get(url + "/index-status").status_code == 403
        assert m.post(url + "/index-retry").status_code == 403
    with login(live_server, owner.email) as c:
        assert c.get(url + "/index-status").json() == {"pending": 1, "indexed": 1, "failed": 1}
        assert c.post(url + "/index-retry").json() == {"queued": 1}
        assert any(docs[0]["id"] in str(kw) for name, kw in no_worker.jobs if name.startswith("index")), no_worker.jobs
        assert c.get(url + "/index-status").json() == {"pending": 2, "indexed": 1, "failed": 0}
        assert c.post(url + "/index-retry").json() == {"queued": 0}
        assert c.get(f"/api/knowledge-bases/{uuid.uuid4()}/index-status").status_code == 404
    with committed() as s:
        row = s.execute(
            text("SELECT index_attempts, index_error FROM documents WHERE id = :a"), {"a": docs[0]["id"]}
        ).one()
        assert tuple(row) == (0, None)
        audits = s.exec(select(AuditLog).where(AuditLog.action == "knowledge_base.index_retried")).all()
        assert len([a for a in audits if str(a.object_id) == kb["id"]]) == 1  # the empty retry audits nothing
