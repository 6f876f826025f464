"""Opening a page is not an edit (docs/web.md#the-document-page): the editor completes some
documents as it loads them (an empty paragraph after a final list, task list, table or code
block, which the stored text already ends with); that must not send a save, show the page as
unsaved, or ask about unsaved changes when one leaves it a moment later."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from sqlmodel import Session

from tests.api.helpers import make_login_user
from tests.web.test_browser import api, editor, new_kb, new_page, owner, sign_in  # noqa: F401 - owner is a fixture

pytestmark = pytest.mark.slow

ENDINGS = {
    "list": "- one\n- two\n",
    "task list": "- [ ] tag\n- [ ] announce\n",
    "table": "| a | b |\n| --- | --- |\n| 1 | 2 |\n",
    "code": "```python\nprint(1)\n```\n",
    "quote": "> quoted\n",
}


def test_a_page_that_ends_in_a_block_opens_without_a_save(contexts, live_server, owner):  # noqa: F811
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Endings")
        docs = {name: new_page(c, kb["id"], f"Ends with a {name}", body) for name, body in ENDINGS.items()}
        other = new_page(c, kb["id"], "Elsewhere", "Another page.\n")
    page = contexts.page()
    saves: list[str] = []
    page.on("request", lambda r: saves.append(r.url) if r.method == "POST" and r.url.endswith("/versions") else None)
    asked: list[str] = []
    page.on("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    first = next(iter(docs.values()))
    sign_in(page, owner["email"], next_path=f"/app/kb/{kb['id']}/docs/{first['id']}")
    tree = page.get_by_role("tree")
    for name, doc in docs.items():
        if not page.url.endswith(doc["id"]):
            tree.get_by_role("link", name=f"Ends with a {name}", exact=True).click()
        expect(page).to_have_url(re.compile(rf"/docs/{doc['id']}$"))
        editor(page)
        # past the editor's change report (200 ms) and the autosave's pause (800 ms)
        page.wait_for_timeout(1500)
        expect(page.get_by_role("status")).to_have_text("Saved")
        assert saves == [], (name, saves)
    # leaving right after opening: no question, the link is followed
    tree.get_by_role("link", name="Ends with a list", exact=True).click()
    editor(page)
    tree.get_by_role("link", name="Elsewhere", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/docs/{other['id']}$"))
    assert asked == [] and saves == []
    with api(live_server, owner) as c:
        assert all(c.get(f"/api/documents/{d['id']}").json()["version_no"] == 1 for d in docs.values())


def test_a_reader_opens_and_leaves_a_page_without_a_save_or_a_question(contexts, live_server, owner, engine):  # noqa: F811
    """A reader's editor is read-only: nothing it reports is theirs to save (a save would be
    refused, and leaving would ask about unsaved changes they never made)."""
    reader = make_login_user(lambda: Session(engine, expire_on_commit=False))
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Read only endings")
        doc = new_page(c, kb["id"], "Checklist", "Steps:\n\n- [ ] one\n- [x] two\n")
        other = new_page(c, kb["id"], "Next", "Next page.\n")
        r = c.post(f"/api/workspaces/{owner['ws']['id']}/members", json={"email": reader.email, "role": "member"})
        assert r.status_code in (200, 201), r.text
    page = contexts.page()
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method != "GET" and "/api/documents/" in r.url else None)
    asked: list[str] = []
    page.on("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    sign_in(page, reader.email, next_path=f"/app/kb/{kb['id']}/docs/{doc['id']}")
    expect(page.locator(".editor[data-ready='true']")).to_contain_text("two")
    page.wait_for_timeout(1500)
    page.get_by_role("tree").get_by_role("link", name="Next", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/docs/{other['id']}$"))
    assert posts == [] and asked == []
