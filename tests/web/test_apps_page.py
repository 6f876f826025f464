"""Apps on your knowledge (/app/account/apps) in a real browser: a switch turned on in the page
lets the app's next call through, its write shows under recent changes and reverts from there,
and a delete-uninstall kills the credential and is undone from the page (docs/apps.md)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from sqlmodel import select

from openkb.apps import registry
from openkb.apps.client import AppApiError, KnowledgeClient
from openkb.bootstrap import default_tenant
from openkb.models import Document
from openkb.permissions import Principal
from tests.api.helpers import login, make_login_user
from tests.web.test_browser import sign_in

pytestmark = pytest.mark.slow


def test_switches_changes_and_uninstall(contexts, live_server, committed):
    acct = make_login_user(committed)
    with committed() as s:
        user = Principal.user(acct.user_id, default_tenant(s).id)
        app = registry.register_app(
            s, user, name=f"diary-{acct.user_id.hex[:6]}", description="keeps your diary",
            permissions=["collections.read:diary", "collections.write:diary"],
        )  # fmt: skip
        credential = registry.install_app(s, user, app.id).credential
        s.commit()
    kb = KnowledgeClient(live_server, credential)
    page = contexts.page()
    sign_in(page, acct.email)
    page.goto("/app/account")
    page.get_by_role("link", name="Apps that use your knowledge").click()
    expect(page.get_by_role("heading", name=app.name, level=2)).to_be_visible()
    write = page.get_by_role("switch", name="Write to your diary")
    expect(write).not_to_be_checked()
    with pytest.raises(AppApiError) as e:
        kb.documents.upsert(collection="diary", key="2026-09-29", title="2026-09-29", body="rain")
    assert "lacks knowledge permission collections.write:diary" in e.value.detail

    with page.expect_response(lambda r: r.url.endswith("/grants") and r.request.method == "PUT") as put:
        write.check()
    assert put.value.ok
    expect(write).to_be_checked()
    assert (
        kb.documents.upsert(collection="diary", key="2026-09-29", title="2026-09-29", body="rain")["status"]
        == "created"
    )

    page.reload()
    changes = page.get_by_role("region", name="Recent changes")
    expect(changes.get_by_role("cell", name="applied")).to_be_visible()
    changes.get_by_role("button", name="Revert: created page '2026-09-29'").click()
    expect(changes.get_by_role("cell", name="reverted")).to_be_visible()

    assert (
        kb.documents.upsert(collection="diary", key="2026-09-30", title="2026-09-30", body="sun")["status"] == "created"
    )
    page.get_by_role("button", name="Uninstall").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("1 document, 0 collections and")
    dialog.get_by_label("Delete them too (you can undo this)").check()
    dialog.get_by_role("button", name="Uninstall").click()
    expect(page.get_by_role("status")).to_contain_text("was uninstalled")
    with pytest.raises(AppApiError) as e:
        kb.collections.list()
    assert e.value.status == 401
    with committed() as s:
        assert (
            s.exec(select(Document).where(Document.title == "2026-09-30", Document.tenant_id == user.tenant_id))
            .one()
            .status
            == "deleted"
        )
    page.get_by_role("button", name="Bring its content back").click()
    expect(page.get_by_role("status")).to_have_count(0)
    with committed() as s:
        assert (
            s.exec(select(Document).where(Document.title == "2026-09-30", Document.tenant_id == user.tenant_id))
            .one()
            .status
            == "published"
        )
    kb.close()


def test_a_folder_chosen_for_user_selected_is_all_the_app_reaches(contexts, live_server, committed):
    """issue 18: the user-selected collections are knowledge bases or folders; a folder chosen in
    the page is what the app lists and reads, not the rest of its knowledge base."""
    acct = make_login_user(committed)
    with login(live_server, acct.email) as c:
        ws = c.post("/api/workspaces", json={"name": f"Home {acct.user_id.hex[:6]}"}).json()
        kb_id = c.post("/api/knowledge-bases", json={"workspace_id": ws["id"], "title": "Handbook"}).json()["id"]

        def create(**body):
            r = c.post("/api/documents", json={"knowledge_base_id": kb_id, **body})
            assert r.status_code == 201, r.text
            return r.json()["id"]

        specs = create(type="folder", title="Specs")
        drafts = create(type="folder", title="Drafts", parent_id=specs)
        create(type="page", title="Inside", markdown="inside\n", parent_id=drafts)
        create(type="page", title="Outside", markdown="outside\n")
    with committed() as s:
        user = Principal.user(acct.user_id, default_tenant(s).id)
        app = registry.register_app(
            s, user, name=f"reader-{acct.user_id.hex[:6]}", description="reads what you choose",
            permissions=["collections.read:user-selected"],
        )  # fmt: skip
        credential = registry.install_app(s, user, app.id).credential
        s.commit()
    page = contexts.page()
    sign_in(page, acct.email, next_path="/app/account/apps")
    page.get_by_role("switch", name=re.compile("collections.read:user-selected")).check()
    chosen = page.get_by_role("region", name="Collections you chose")
    chosen.get_by_label("Add a knowledge base").select_option(label="Handbook")
    chosen.get_by_label("Only the folder").select_option(label="Specs / Drafts")
    with page.expect_response(lambda r: r.url.endswith("/collections") and r.request.method == "PUT") as put:
        chosen.get_by_role("button", name="Add", exact=True).click()
    assert put.value.ok
    expect(chosen.get_by_role("listitem")).to_have_text(["Handbook / Specs / Drafts Remove"])
    expect(chosen.get_by_role("button", name="Remove Handbook / Specs / Drafts")).to_be_visible()

    with KnowledgeClient(live_server, credential) as kb:
        [folder] = [col for col in kb.collections.list() if col["name"] == "Drafts"]
        assert folder["kind"] == "folder"
        assert not [col for col in kb.collections.list() if col["name"] in ("Handbook", "Specs")]
        assert [d["title"] for d in kb.documents.list(folder["ref"])] == ["Inside"]
