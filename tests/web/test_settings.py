"""Knowledge base and workspace settings in a real browser: the owner edits the knowledge base,
restores and purges from the trash, and finds NO model / embedding / rerank / Milvus setting
anywhere on the page (docs/retrieval.md#principles); a workspace owner adds a member."""

from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import expect
from sqlalchemy import text as sql

from tests.api.helpers import login, make_login_user
from tests.web.test_browser import new_page, sign_in

pytestmark = pytest.mark.slow

MODEL_WORDS = re.compile(r"model|embedding|rerank|milvus|vector|index profile|模型|向量|重排", re.IGNORECASE)


def test_kb_owner_settings_trash_and_no_model_setting(contexts, live_server, committed):
    owner = make_login_user(committed)
    with login(live_server, owner.email) as c:
        ws = c.post("/api/workspaces", json={"name": f"Team {uuid.uuid4().hex[:6]}"}).json()
        kb = c.post("/api/knowledge-bases", json={"workspace_id": ws["id"], "title": "Playbook"}).json()
        kept = new_page(c, kb["id"], "Keep me", "# Keep me\n")
        gone = new_page(c, kb["id"], "Drop me", "# Drop me\n")
        assert c.delete(f"/api/documents/{kept['id']}").status_code in (200, 204)
        assert c.delete(f"/api/documents/{gone['id']}").status_code in (200, 204)
    page = contexts.page()
    sign_in(page, owner.email)
    page.goto(f"/app/kb/{kb['id']}")
    page.get_by_role("link", name="Settings", exact=True).click()
    expect(page.get_by_role("heading", name="Knowledge base settings")).to_be_visible()

    page.get_by_label("Title").fill("Playbook 2")
    page.get_by_label("Description").fill("How we work")
    page.get_by_label("Visibility").select_option("private")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Saved")
    with login(live_server, owner.email) as c:
        got = c.get(f"/api/knowledge-bases/{kb['id']}").json()
    assert (got["title"], got["description"], got["visibility"]) == ("Playbook 2", "How we work", "private")

    trash = page.get_by_role("table", name="Trash")
    trash.get_by_role("button", name="Restore Keep me").click()
    expect(trash.get_by_role("row").filter(has_text="Keep me")).to_have_count(0)
    page.once("dialog", lambda d: d.accept())
    trash.get_by_role("button", name="Delete Drop me for good").click()
    expect(page.get_by_text("The trash is empty.")).to_be_visible()
    with login(live_server, owner.email) as c:
        assert c.get(f"/api/documents/{kept['id']}").status_code == 200
        assert c.get(f"/api/documents/{gone['id']}").status_code == 404

    # the index panel: counts, and a retry of the pages the worker gave up on
    with committed() as s:
        s.execute(sql("UPDATE documents SET index_status = 'failed' WHERE id = :d"), {"d": kept["id"]})
        s.commit()
    page.reload()
    expect(page.get_by_test_id("kb-index-failed")).to_have_text("1")
    page.get_by_role("button", name="Retry failed pages").click()
    expect(page.get_by_role("status")).to_have_text("1 page queued again.")
    expect(page.get_by_test_id("kb-index-failed")).to_have_text("0")

    # the whole page, in both languages, offers nothing about models or Milvus
    for switch_label, lang in (("Language", "English"), ("Language", "简体中文"), ("语言", "English")):
        page.get_by_label(switch_label, exact=True).select_option(label=lang)
        expect(page.get_by_role("heading", level=1)).to_have_text(
            "Knowledge base settings" if lang == "English" else "知识库设置"
        )
        text = page.locator("body").inner_text()
        assert not MODEL_WORDS.search(text), MODEL_WORDS.search(text)
        assert page.locator("[name*=model], [name*=embed], [id*=model], [id*=embed]").count() == 0


def test_workspace_owner_renames_and_adds_a_member(contexts, live_server, committed):
    owner, other = make_login_user(committed), make_login_user(committed)
    with login(live_server, owner.email) as c:
        ws = c.post("/api/workspaces", json={"name": f"Crew {uuid.uuid4().hex[:6]}"}).json()
    page = contexts.page()
    sign_in(page, owner.email)
    page.goto(f"/app/workspaces/{ws['id']}")
    page.get_by_role("link", name="Settings", exact=True).click()
    expect(page.get_by_role("heading", name="Workspace settings")).to_be_visible()
    page.get_by_label("Workspace name").fill("Crew renamed")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Saved")

    add = page.get_by_role("form", name="Add member")
    nobody = f"nobody-{uuid.uuid4().hex[:6]}@example.com"
    add.get_by_label("Email").fill(nobody)
    add.get_by_role("button", name="Add member").click()
    expect(page.get_by_role("alert")).to_contain_text(f"No account uses {nobody}.")  # not a bare "Not found."
    add.get_by_label("Email").fill(other.email)
    add.get_by_label("Role").select_option("guest")
    add.get_by_role("button", name="Add member").click()
    members = page.get_by_role("table", name="Members")
    expect(members.get_by_role("row").filter(has_text=other.email)).to_be_visible()  # names, not ids
    with login(live_server, other.email) as c:
        got = c.get(f"/api/workspaces/{ws['id']}").json()
    assert got["name"] == "Crew renamed" and got["role"] == "guest"
