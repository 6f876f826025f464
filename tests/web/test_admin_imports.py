"""The console's Imports tab: the tenant's import jobs with live progress (polled, no reload),
and no file names (operators see no content)."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from openkb.models import DocumentAsset, ImportJob, KnowledgeBase
from tests.api.helpers import login, make_login_user
from tests.web.test_browser import sign_in

pytestmark = pytest.mark.slow


def test_admin_follows_an_import_job_live(contexts, live_server, committed):
    admin, person = make_login_user(committed, role="tenant_admin"), make_login_user(committed)
    with login(live_server, person.email) as c:
        ws = c.post("/api/workspaces", json={"name": f"Imports {uuid.uuid4().hex[:6]}"}).json()
        kb = c.post("/api/knowledge-bases", json={"workspace_id": ws["id"], "title": "Inbox"}).json()
    # a running job written directly (nothing enqueued: no worker takes it over in this test)
    with committed() as s:
        tenant_id = s.get(KnowledgeBase, uuid.UUID(kb["id"])).tenant_id
        asset = DocumentAsset(
            tenant_id=tenant_id,
            object_key=f"test/{uuid.uuid4()}",
            filename="board-minutes-secret.zip",
            mime_type="application/zip",
            size_bytes=10,
            created_by=person.user_id,
        )
        s.add(asset)
        s.flush()
        job = ImportJob(
            tenant_id=asset.tenant_id,
            workspace_id=uuid.UUID(ws["id"]),
            knowledge_base_id=uuid.UUID(kb["id"]),
            source_asset_id=asset.id,
            status="running",
            converter="zip",
            created_by=person.user_id,
            results={"progress": {"phase": "write", "done": 1, "total": 3, "current": "board-minutes-secret.md"}},
        )
        s.add(job)
        s.commit()
        job_id = job.id

    page = contexts.page()
    sign_in(page, admin.email)
    page.goto("/admin/imports")
    row = page.get_by_role("row").filter(has_text=person.email)
    expect(row).to_contain_text("running")
    expect(row).to_contain_text("1/3 write")
    with committed() as s:
        j = s.get(ImportJob, job_id)
        j.status, j.results = "succeeded", {"counts": {"created": 3}}
        s.add(j)
        s.commit()
    expect(row).to_contain_text("finished")  # followed without a reload
    expect(row).to_contain_text("created: 3")
    assert "board-minutes-secret" not in page.locator("main").inner_text()
