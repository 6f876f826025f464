"""Milvus & index in the admin console: a tenant admin creates a BM25-only profile, starts a
rebuild that switches the alias when healthy, watches it finish (polled, surviving a reload),
and rolls back. The original active collection is restored whatever happens."""

from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import expect

import openkb.jobs as jobs
from openkb.db import session_scope
from openkb.indexing import service
from openkb.indexing.profiles import current_target, get_profile
from openkb.indexing.rebuild import drop, rollback
from openkb.permissions.principal import Principal
from openkb.retrieval import forget_active_profile
from openkb.runtime import lite_files
from tests.api.helpers import make_login_user
from tests.web.test_browser import sign_in

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("worker")]


@pytest.fixture()
def hueyqueue(app_ctx):
    from workers.queue import HueyQueue

    previous = jobs._queue
    jobs.set_queue(HueyQueue())
    with session_scope(app_ctx.engine) as s:
        service.ensure_default_profile(app_ctx, s)
    yield
    jobs.set_queue(previous)


def test_tenant_admin_rebuilds_switches_and_rolls_back(contexts, app_ctx, committed, hueyqueue):
    alias = app_ctx.settings.milvus_active_alias
    original = current_target(app_ctx.milvus, alias)
    name = f"web-{uuid.uuid4().hex[:6]}"
    admin = make_login_user(committed, role="tenant_admin")
    page = contexts.page()
    sign_in(page, admin.email)
    page.goto("/admin/index")
    expect(page.get_by_test_id("active-collection")).to_have_text(original)
    # the embedded Lite's files, read from its manifest (docs/retrieval.md#flushes)
    lite = page.get_by_test_id("lite-files")
    expect(lite).to_have_text(re.compile(r"^\d+ data files?, \d+ delta files? of deletions$"))
    with pytest.MonkeyPatch.context() as mp:  # once they pile up, what to do about it
        mp.setattr(lite_files, "DELTA_FILES_WARN", 0)
        page.reload()
        expect(lite).to_contain_text("rebuild the active profile with “Switch the alias when the rebuild is healthy”")
    try:
        page.get_by_label("Profile", exact=True).fill(name)
        page.get_by_role("button", name="New profile").click()
        profiles = page.get_by_role("table", name="Index profiles")
        expect(profiles.get_by_role("row").filter(has_text=name)).to_be_visible()
        with committed() as s:
            collection = get_profile(s, name).collection_name

        expect(page.get_by_label("Switch the alias when the rebuild is healthy")).to_be_checked()
        page.get_by_role("button", name=f"Rebuild {name}").click()
        job = page.get_by_role("list", name="Rebuilds").get_by_role("listitem").filter(has_text=collection)
        expect(job).to_be_visible()
        page.reload()  # progress is the server's: a reload finds the job again and keeps polling
        expect(job.locator(".job-status")).to_have_text("succeeded", timeout=180_000)
        expect(page.get_by_test_id("active-collection")).to_have_text(collection)
        assert current_target(app_ctx.milvus, alias) == collection
        expect(page.get_by_role("list", name="Alias history").get_by_role("listitem").first).to_contain_text(
            re.compile(rf"{re.escape(original)} → {re.escape(collection)}")
        )

        page.once("dialog", lambda d: d.accept())
        page.get_by_role("button", name="Roll back").click()
        expect(page.get_by_test_id("active-collection")).to_have_text(original)
    finally:
        if current_target(app_ctx.milvus, alias) != original:
            with session_scope(app_ctx.engine) as s:
                rollback(app_ctx, s, Principal.system())
        forget_active_profile()
        with session_scope(app_ctx.engine) as s:
            try:
                drop(app_ctx, s, Principal.system(), name, force=True)
            except Exception as exc:  # noqa: BLE001 - cleanup: the profile may not exist
                print(f"cleanup: {exc}")
    assert current_target(app_ctx.milvus, alias) == original


def test_a_new_profile_can_take_the_functions_of_an_existing_one(contexts, app_ctx, committed, hueyqueue):
    """ "Same functions as": the new profile gets the chosen one's embedding (no service address to
    restate) and the latest lexical transform, which the profiles table names."""
    from openkb.indexing.lexical import LEXICAL_V2
    from openkb.indexing.profiles import spec_of

    alias = app_ctx.settings.milvus_active_alias
    with committed() as s:
        source = spec_of(get_profile(s, current_target(app_ctx.milvus, alias)))
    name = f"like-{uuid.uuid4().hex[:6]}"
    admin = make_login_user(committed, role="tenant_admin")
    page = contexts.page()
    sign_in(page, admin.email)
    page.goto("/admin/index")
    page.get_by_label("Profile", exact=True).fill(name)
    page.get_by_label("Same functions as").select_option(source.name)
    expect(page.get_by_label("Embedding model")).to_be_disabled()
    page.get_by_role("button", name="New profile").click()
    row = page.get_by_role("table", name="Index profiles").get_by_role("row").filter(has_text=name)
    expect(row).to_contain_text(f"keywords {LEXICAL_V2}")
    with committed() as s:
        made = spec_of(get_profile(s, name))
    assert made.embedding == source.embedding and made.lexical == LEXICAL_V2
    if source.embedding is not None:
        expect(row).to_contain_text(source.embedding.model_name)
