"""Verify and repair in the console's Milvus & index tab: a planted ghost row is found and
removed by a job the worker runs; the page polls it and finds it again after a reload."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from openkb.indexing import milvus as mv
from openkb.indexing.profiles import current_target
from tests.api.helpers import make_login_user
from tests.api.test_admin_verify_jobs import hueyqueue  # noqa: F401 - fixture
from tests.web.test_browser import sign_in

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("worker")]


def test_admin_verifies_and_repairs_with_live_progress(contexts, app_ctx, committed, hueyqueue):  # noqa: F811
    admin = make_login_user(committed, role="tenant_admin")
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
    page = contexts.page()
    sign_in(page, admin.email)
    page.goto("/admin/index")
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Verify and repair", exact=True).click()
    status = page.get_by_test_id("verify-status")
    expect(status).to_be_visible()  # the job exists before the reload
    page.reload()  # the job is found again, and followed to its end
    expect(status).to_have_attribute("data-status", "succeeded", timeout=120_000)
    expect(status).to_contain_text("repaired")
    expect(page.get_by_role("button", name="Verify", exact=True)).to_be_enabled()
    client.flush(coll)
    assert mv.query_rows(client, coll, f'id == "{ghost["id"]}"', output_fields=["id"], limit=1) == []
