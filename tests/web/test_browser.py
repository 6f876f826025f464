"""The web app in a real browser (Chromium through Playwright) against the live server.

Selectors are roles and labels (the app's accessibility is what makes them stable), never CSS
classes, except the editor's ProseMirror surface. Waits are Playwright's auto-waits on visible
states ("Saved", a dialog, a tree item), never sleeps. Every page is checked for CSP violations
(tests/web/conftest.py).
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import expect
from sqlalchemy import text as sa_text
from sqlmodel import Session

from tests.api.helpers import (
    PASSWORD,
    auth_settings_override,
    login,
    mailed_token,
    make_login_user,
    outbox_messages,
    smtp_delivery,
    unique_email,
)

pytestmark = pytest.mark.slow


def sign_in(page, email: str, password: str = PASSWORD, next_path: str | None = None) -> None:
    page.goto("/login" + (f"?next={next_path}" if next_path else ""))
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(re.escape(next_path or "/app") + "$"))


def editor(page):
    surface = page.locator(".editor[data-ready='true'] .ProseMirror")
    expect(surface).to_be_visible()
    return surface


def type_at_end(page, text: str) -> int:
    """Type at the end of the document; returns how many saves the page had made before."""
    surface = editor(page)
    before = int(page.get_by_role("status").get_attribute("data-saves"))
    surface.click()
    page.keyboard.press("Control+End")
    page.keyboard.type(text)
    return before


def autosaved(page, before: int) -> None:
    """The debounced autosave ran after the edit and nothing is left unsaved."""
    status = page.get_by_role("status")
    expect(status).to_have_attribute("data-saves", re.compile(rf"^(?!{before}$)\d+$"))
    expect(status).to_have_text("Saved")


@pytest.fixture(scope="module")
def owner(live_server, engine):
    """A signed-up owner with a workspace and a knowledge base, made over the API (the UI flow
    itself is test_register_verify_create_and_autosave)."""
    acct = make_login_user(lambda: Session(engine, expire_on_commit=False))
    with login(live_server, acct.email) as c:
        ws = c.post("/api/workspaces", json={"name": f"Team {uuid.uuid4().hex[:6]}"}).json()
        kb = c.post(
            "/api/knowledge-bases", json={"workspace_id": ws["id"], "title": "Handbook", "visibility": "workspace"}
        ).json()
    return {"email": acct.email, "user_id": acct.user_id, "ws": ws, "kb": kb}


def api(live_server, owner) -> httpx.Client:
    return login(live_server, owner["email"])


def new_kb(c: httpx.Client, owner, title: str) -> dict:
    """A knowledge base the workspace can see, in the owner's workspace."""
    r = c.post(
        "/api/knowledge-bases", json={"workspace_id": owner["ws"]["id"], "title": title, "visibility": "workspace"}
    )
    assert r.status_code == 201, r.text
    return r.json()


def new_page(c: httpx.Client, kb_id: str, title: str, markdown: str, **kw) -> dict:
    r = c.post(
        "/api/documents", json={"knowledge_base_id": kb_id, "type": "page", "title": title, "markdown": markdown, **kw}
    )
    assert r.status_code == 201, r.text
    return r.json()


def save_body(c: httpx.Client, doc: dict, markdown: str) -> None:
    """A new version of ``doc`` (its body as created) with ``markdown``."""
    r = c.post(
        f"/api/documents/{doc['id']}/versions",
        json={
            "base_version_id": doc["current_version_id"],
            "markdown": markdown,
            "markdown_hash": hashlib.sha256(markdown.encode()).hexdigest(),
        },
    )
    assert r.status_code == 201, r.text


def test_register_verify_create_and_autosave(contexts, live_server, committed, test_home):
    email = unique_email("web")
    with auth_settings_override(committed, email_verification_required=True, default_signup_status="active"):
        page = contexts.page()
        page.goto("/register")
        page.get_by_label("Display name").fill("Web Owner")
        page.get_by_label("Email").fill(email)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Create account").click()
        # no SMTP server here: the page says where the link went, and the command that confirms
        # the account in its place (docs/accounts.md#mail)
        expect(page.get_by_role("status")).to_contain_text("was written to the server's outbox folder")
        expect(page.locator("pre code")).to_have_text(f"openkb user activate {email}")

        # the mailed link names APP_BASE_URL; open its path and query on the served app
        token = mailed_token(test_home, email, "/verify-email")
        page.goto(f"/verify-email?token={token}")
        expect(page.get_by_role("status")).to_have_text("Your email address is confirmed.")
        page.get_by_role("link", name="Continue to sign in").click()
        sign_in(page, email)

    expect(page.get_by_role("heading", name="Home")).to_be_visible()
    page.get_by_role("button", name="New workspace").click()
    page.get_by_label("Workspace name").fill("Browser team")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="Browser team")).to_be_visible()

    page.get_by_role("button", name="New knowledge base").click()
    page.get_by_label("Title").fill("Field notes")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="Field notes")).to_be_visible()
    kb_id = urlsplit(page.url).path.rsplit("/", 1)[1]

    page.get_by_role("button", name="New folder").click()
    page.get_by_label("Title").fill("Guides")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("treeitem", name="Guides")).to_be_visible()

    page.get_by_role("button", name="New page").first.click()
    page.get_by_label("Title").fill("Welcome")
    page.get_by_role("button", name="Create").click()
    expect(page).to_have_url(re.compile(rf"/app/kb/{kb_id}/docs/[0-9a-f-]+$"))
    doc_id = urlsplit(page.url).path.rsplit("/", 1)[1]

    autosaved(page, type_at_end(page, "Hello from the browser"))
    page.reload()
    expect(editor(page)).to_contain_text("Hello from the browser")
    expect(page.get_by_role("treeitem", name="Welcome")).to_have_attribute("aria-current", "page")

    with login(live_server, email) as c:
        doc = c.get(f"/api/documents/{doc_id}").json()
        assert "Hello from the browser" in doc["markdown"]
        recent = c.get("/api/me/recent-documents").json()["items"]
        assert recent[0]["id"] == doc_id

    page.get_by_role("link", name="OpenKB").click()
    expect(page.get_by_role("link", name="Welcome")).to_be_visible()  # recent documents on the home page
    workspaces = page.get_by_role("region", name="My workspaces")
    expect(workspaces.get_by_role("listitem").filter(has_text="Browser team")).to_contain_text("Owner")  # not "owner"


def test_sign_up_says_what_a_password_needs_and_why_one_is_refused(contexts, committed):
    """The rule is under the field (and read out with it); a common password is refused with the
    reason, before any account exists."""
    email = unique_email("weak")
    with auth_settings_override(committed, email_verification_required=True, default_signup_status="active"):
        page = contexts.page()
        page.goto("/register")
        field = page.get_by_label("Password")
        expect(field).to_have_accessible_description(re.compile(r"^At least 8 characters\. Common passwords"))
        page.get_by_label("Email").fill(email)
        field.fill("password1")
        page.get_by_role("button", name="Create account").click()
        expect(page.get_by_role("alert")).to_contain_text(
            "password is too easy to guess (this is a very common password)"
        )
        field.fill(PASSWORD)
        page.get_by_role("button", name="Create account").click()
        expect(page.get_by_role("status")).to_contain_text("the link to confirm")


def test_with_a_mail_server_the_pages_say_check_your_mailbox(contexts, committed, app_ctx):
    """Sign-up and password reset tell a visitor to look in their mailbox only when mail is sent;
    without a mail server they say the link is in the server's outbox (tests above)."""
    email = unique_email("web")
    with smtp_delivery(app_ctx) as sink, auth_settings_override(committed, email_verification_required=True):
        page = contexts.page()
        page.goto("/register")
        page.get_by_label("Email").fill(email)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Create account").click()
        expect(page.get_by_role("status")).to_have_text(f"Check your mailbox: we sent a link to confirm {email}.")
        expect(page.locator("pre code")).to_have_count(0)
        page.goto("/reset-password")
        page.get_by_label("Email").fill(email)
        page.get_by_role("button", name="Send reset link").click()
        expect(page.get_by_role("status")).to_have_text("If the address has an account, a reset link is on its way.")
        assert len([m for m in sink.messages if str(m["To"]) == email]) == 2
    page.goto("/reset-password")
    page.get_by_label("Email").fill(email)
    page.get_by_role("button", name="Send reset link").click()
    expect(page.get_by_role("status")).to_contain_text("a reset link was written to the server's outbox folder")


def test_language_follows_the_browser_and_can_be_switched(contexts):
    page = contexts.page(locale="zh-CN")
    page.goto("/login")
    expect(page.get_by_role("heading", name="登录")).to_be_visible()
    page.get_by_label("语言").select_option("en")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.reload()  # the choice is remembered
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def test_conflict_dialog_when_another_context_saved_first(contexts, live_server, owner):
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Shared notes", "Start\n")
    url = f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}"
    mine = contexts.page()
    sign_in(mine, owner["email"], next_path=url)
    editor(mine)
    theirs = contexts.page()
    sign_in(theirs, owner["email"], next_path=url)
    autosaved(theirs, type_at_end(theirs, " theirs"))

    type_at_end(mine, " mine")
    dialog = mine.get_by_role("dialog", name="Someone else saved this document")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_label("Their text (current version)")).to_contain_text("theirs")
    expect(dialog.get_by_label("Your text")).to_contain_text("mine")
    # and what differs, line by line, the changed words marked (docs/web.md#version-history)
    dialog.get_by_text("What differs: their text to yours").click()
    differs = dialog.get_by_role("region", name="What differs: their text to yours")
    expect(differs.locator("tr.del mark")).to_have_text(["theirs"])
    expect(differs.locator("tr.add mark")).to_have_text(["mine"])
    before = int(mine.get_by_role("status").get_attribute("data-saves"))
    dialog.get_by_role("button", name="Keep mine as a new version").click()
    autosaved(mine, before)
    with api(live_server, owner) as c:
        got = c.get(f"/api/documents/{doc['id']}").json()
        assert "mine" in got["markdown"] and got["version_no"] == 3


def test_source_mode_refuses_bad_markdown_with_its_position(contexts, live_server, owner):
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Source page", "Fine\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    editor(page)
    page.get_by_role("button", name="Source", exact=True).click()
    page.get_by_label("Markdown source").fill("Fine\n\nbad<br>line\n")
    page.get_by_role("button", name="Save source").click()
    expect(page.get_by_role("alert")).to_contain_text("Line 3, column 4")
    page.get_by_label("Markdown source").fill("Fine\n\ngood line\n")
    page.get_by_role("button", name="Save source").click()
    expect(editor(page)).to_contain_text("good line")
    with api(live_server, owner) as c:
        assert c.get(f"/api/documents/{doc['id']}").json()["markdown"] == "Fine\n\ngood line\n"


def test_outline_click_scrolls_to_the_heading(contexts, live_server, owner):
    body = "".join(f"## Part {i}\n\n" + "Some text. " * 80 + "\n\n" for i in range(1, 9))
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Long page", body)
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    target = editor(page).get_by_role("heading", name="Part 8")
    expect(target).not_to_be_in_viewport()
    outline = page.get_by_role("complementary", name="Outline")
    outline.get_by_role("button", name="Part 8").click()
    expect(target).to_be_in_viewport()
    expect(outline.get_by_role("button", name="Part 8")).to_have_attribute("aria-current", "location")


def test_drag_a_page_into_a_folder(contexts, live_server, owner):
    with api(live_server, owner) as c:
        folder = c.post(
            "/api/documents", json={"knowledge_base_id": owner["kb"]["id"], "type": "folder", "title": "Archive"}
        ).json()
        doc = new_page(c, owner["kb"]["id"], "Loose page", "x\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}")
    tree = page.get_by_role("tree")
    expect(tree.get_by_role("treeitem", name="Loose page")).to_be_visible()
    page.wait_for_load_state("networkidle")
    tree.get_by_role("treeitem", name="Loose page").locator("> div").drag_to(
        tree.get_by_role("treeitem", name="Archive").locator("> div")
    )
    expect(tree.get_by_role("treeitem", name="Archive").get_by_role("treeitem", name="Loose page")).to_be_visible()
    with api(live_server, owner) as c:
        assert c.get(f"/api/documents/{doc['id']}").json()["parent_id"] == folder["id"]
        second = new_page(c, owner["kb"]["id"], "Second inside", "y\n", parent_id=folder["id"])

    def inside() -> list[str]:
        with api(live_server, owner) as c:
            items = [
                i
                for i in c.get(f"/api/knowledge-bases/{owner['kb']['id']}/tree").json()["items"]
                if i["parent_id"] == folder["id"]
            ]
        return [i["id"] for i in sorted(items, key=lambda i: i["sort_order"])]

    # onto a page's top edge: placed before it, among its siblings
    page.reload()
    archive = tree.get_by_role("treeitem", name="Archive")
    # the reloaded tree lists both before the drag starts (a drag during its first render was lost)
    expect(archive.get_by_role("group").get_by_role("treeitem")).to_contain_text(["Loose page", "Second inside"])
    page.wait_for_load_state("networkidle")  # and the home page's own lists have rendered: no re-render mid-drag
    row = archive.get_by_role("treeitem", name="Loose page").locator("> div")
    height = row.bounding_box()["height"]
    archive.get_by_role("treeitem", name="Second inside").locator("> div").drag_to(
        row, target_position={"x": 30, "y": 2}
    )
    expect(archive.get_by_role("group").get_by_role("treeitem")).to_contain_text(["Second inside", "Loose page"])
    assert inside() == [second["id"], doc["id"]]

    # onto the next page's bottom edge: placed after it (a page moves down by one, which a drop
    # that only placed before could not do)
    archive.get_by_role("treeitem", name="Second inside").locator("> div").drag_to(
        archive.get_by_role("treeitem", name="Loose page").locator("> div"),
        target_position={"x": 30, "y": height - 2},
    )
    expect(archive.get_by_role("group").get_by_role("treeitem")).to_contain_text(["Loose page", "Second inside"])
    assert inside() == [doc["id"], second["id"]]

    # onto a page's middle: under it (a page holds pages too)
    archive.get_by_role("treeitem", name="Second inside").locator("> div").drag_to(
        archive.get_by_role("treeitem", name="Loose page").locator("> div")
    )
    expect(
        archive.get_by_role("treeitem", name="Loose page").get_by_role("treeitem", name="Second inside")
    ).to_be_visible()
    assert inside() == [doc["id"]]
    with api(live_server, owner) as c:
        assert c.get(f"/api/documents/{second['id']}").json()["parent_id"] == doc["id"]


def test_reorder_without_dragging(contexts, live_server, owner):
    """Move up / Move down in an item's menu and Alt+Up/Down on a focused item reorder siblings:
    dragging is not the only way (docs/web.md#the-document-page)."""
    with api(live_server, owner) as c:
        folder = c.post(
            "/api/documents", json={"knowledge_base_id": owner["kb"]["id"], "type": "folder", "title": "Reorder shelf"}
        ).json()
        pages = [
            new_page(c, owner["kb"]["id"], f"Shelf {n}", "x\n", parent_id=folder["id"]) for n in ("one", "two", "three")
        ]

    def order() -> list[str]:
        with api(live_server, owner) as c:
            items = c.get(f"/api/knowledge-bases/{owner['kb']['id']}/tree").json()["items"]
        titles = {p["id"]: p["title"] for p in pages}
        return [titles[i["id"]] for i in sorted(items, key=lambda i: i["sort_order"]) if i["id"] in titles]

    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}")
    shelf = page.get_by_role("tree").get_by_role("treeitem", name="Reorder shelf")
    rows = shelf.get_by_role("group").get_by_role("treeitem")
    expect(rows).to_contain_text(["Shelf one", "Shelf two", "Shelf three"])

    shelf.get_by_role("treeitem", name="Shelf one").locator("> div").hover()
    shelf.get_by_role("button", name="Actions for Shelf one").click()
    expect(page.get_by_role("menuitem", name="Move up")).to_have_count(0)  # the first has none above
    page.get_by_role("menuitem", name="Move down").click()
    expect(rows).to_contain_text(["Shelf two", "Shelf one", "Shelf three"])
    assert order() == ["Shelf two", "Shelf one", "Shelf three"]

    shelf.get_by_role("treeitem", name="Shelf three").focus()
    page.keyboard.press("Alt+ArrowUp")
    expect(rows).to_contain_text(["Shelf two", "Shelf three", "Shelf one"])
    expect(shelf.get_by_role("treeitem", name="Shelf three")).to_be_focused()  # focus stays on what moved
    page.keyboard.press("Alt+ArrowUp")
    expect(rows).to_contain_text(["Shelf three", "Shelf two", "Shelf one"])
    assert order() == ["Shelf three", "Shelf two", "Shelf one"]

    # dropped on the bottom edge of the open folder, where the line shows between it and its
    # first child, from the children's indentation: first inside it
    head = shelf.locator("> div")
    child = shelf.get_by_role("treeitem", name="Shelf three").locator("> div")
    child_indent = child.evaluate("e => getComputedStyle(e).paddingLeft")
    assert child_indent != head.evaluate("e => getComputedStyle(e).paddingLeft")

    def hover_at(row, y: float) -> None:
        # a few moves with pauses: a drag's dragover events follow the pointer's moves
        box = row.bounding_box()
        for dy in (4, 2, 0):
            page.mouse.move(box["x"] + 30, box["y"] + y + (dy if y < box["height"] / 2 else -dy))
            page.wait_for_timeout(60)

    source = shelf.get_by_role("treeitem", name="Shelf one").locator("> div").bounding_box()
    page.mouse.move(source["x"] + 30, source["y"] + source["height"] / 2)
    page.mouse.down()
    page.mouse.move(source["x"] + 34, source["y"] + source["height"] / 2)  # starts the drag
    hover_at(child, 2)  # first, a child's top edge: the line starts where that child does
    expect(child).to_have_class(re.compile(r"\bdrop-before\b"))
    assert child.evaluate("e => getComputedStyle(e, '::before').left") == child_indent
    hover_at(head, head.bounding_box()["height"] - 2)
    expect(head).to_have_class(re.compile(r"\bdrop-after\b"))
    assert head.evaluate("e => getComputedStyle(e, '::after').left") == child_indent
    page.mouse.up()
    expect(rows).to_contain_text(["Shelf one", "Shelf three", "Shelf two"])
    assert order() == ["Shelf one", "Shelf three", "Shelf two"]


def test_a_page_opened_from_elsewhere_is_scrolled_into_the_tree(contexts, live_server, owner):
    """Opened by its address (as from search or a link), a page far down a long tree is in the
    sidebar's view; a click on a page already in view does not move the tree."""
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Long shelf")
        folder = c.post(
            "/api/documents", json={"knowledge_base_id": kb["id"], "type": "folder", "title": "Deep"}
        ).json()
        pages = [new_page(c, kb["id"], f"Entry {i:02d}", "x\n", parent_id=folder["id"]) for i in range(60)]
    page = contexts.page()
    page.set_viewport_size({"width": 1280, "height": 700})
    sign_in(page, owner["email"], next_path=f"/app/kb/{kb['id']}/docs/{pages[-1]['id']}")
    tree = page.get_by_role("tree")
    current = tree.get_by_role("treeitem", name="Entry 59")
    expect(current).to_have_attribute("aria-current", "page")
    expect(current.locator("> div")).to_be_in_viewport()
    expect(tree.get_by_role("treeitem", name="Entry 00").locator("> div")).not_to_be_in_viewport()
    sidebar = page.locator(".sidebar")
    top = sidebar.evaluate("e => e.scrollTop")
    assert top > 0
    tree.get_by_role("treeitem", name="Entry 57").locator("> div").get_by_role("link").click()
    expect(tree.get_by_role("treeitem", name="Entry 57")).to_have_attribute("aria-current", "page")
    assert sidebar.evaluate("e => e.scrollTop") == top
    # on a phone the tree is a closed drawer: the page is in view when the drawer opens
    ctx = contexts.browser.new_context(base_url=live_server, viewport={"width": 390, "height": 700})
    contexts.opened.append(ctx)
    phone = ctx.new_page()
    contexts.watch(phone)
    sign_in(phone, owner["email"], next_path=f"/app/kb/{kb['id']}/docs/{pages[-1]['id']}")
    expect(phone.get_by_role("tree")).to_be_hidden()
    phone.get_by_role("button", name="Contents").click()
    expect(phone.get_by_role("tree").get_by_role("treeitem", name="Entry 59").locator("> div")).to_be_in_viewport()


def test_a_guest_sees_no_private_item(contexts, live_server, committed, owner):
    guest = make_login_user(committed)
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Guest view")
        r = c.post(f"/api/workspaces/{owner['ws']['id']}/members", json={"email": guest.email, "role": "guest"})
        assert r.status_code == 201, r.text
        r = c.post(
            f"/api/objects/knowledge_base/{kb['id']}/collaborators",
            json={"subject_type": "user", "subject_id": str(guest.user_id), "role": "viewer"},
        )
        assert r.status_code == 201, r.text
        new_page(c, kb["id"], "Visible page", "hello\n")
        secret = new_page(c, kb["id"], "Secret plans", "hidden\n")
        r = c.put(f"/api/documents/{secret['id']}", json={"permission_mode": "custom", "visibility": "private"})
        assert r.status_code == 200, r.text
    page = contexts.page()
    sign_in(page, guest.email, next_path=f"/app/kb/{kb['id']}")
    tree = page.get_by_role("tree")
    expect(tree.get_by_role("treeitem", name="Visible page")).to_be_visible()
    expect(tree.get_by_role("treeitem")).to_have_count(1)
    expect(page.get_by_text("Secret plans")).to_have_count(0)
    expect(page.get_by_role("button", name="New page")).to_have_count(0)  # a viewer creates nothing


def test_password_share_link_in_a_fresh_anonymous_context(contexts, live_server, owner):
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Shared by link", "# Public words\n\nread me\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    editor(page)
    page.get_by_role("button", name="Share", exact=True).click()
    dialog = page.get_by_role("dialog", name="Share and collaborate")
    field = dialog.get_by_label("Password (optional)")
    field.fill("abc")  # too short to withstand guessing: the form says so before sending it
    dialog.get_by_role("button", name="Create share link").click()
    assert field.evaluate("el => el.validity.tooShort")
    expect(dialog.get_by_role("textbox", name="Share links")).to_have_count(0)
    field.fill("open sesame")
    dialog.get_by_role("button", name="Create share link").click()
    url = dialog.get_by_role("textbox", name="Share links").input_value()
    assert re.fullmatch(re.escape(os.environ["APP_BASE_URL"]) + r"/share/kbshare_[A-Za-z0-9_-]+", url), url  # as mailed

    visitor = contexts.page()
    visitor.goto(urlsplit(url).path)
    expect(visitor.get_by_text("This link is protected by a password.")).to_be_visible()
    visitor.get_by_label("Password").fill("wrong")
    visitor.get_by_role("button", name="Open").click()
    expect(visitor.get_by_role("alert")).to_have_text("Wrong password.")
    visitor.get_by_label("Password").fill("open sesame")
    visitor.get_by_role("button", name="Open").click()
    expect(visitor.get_by_role("heading", name="Shared by link", level=1)).to_be_visible()
    expect(visitor.locator(".reader[data-ready='true']")).to_contain_text("read me")
    expect(visitor.locator(".reader .ProseMirror")).to_have_attribute("contenteditable", "false")  # read-only


def test_a_shared_knowledge_base_shows_its_tree_by_level_one_line_per_page(contexts, live_server, owner):
    """The share page's tree indents a child under its parent and keeps a long title on one
    line (cut, whole in its tooltip), as the app's own tree does."""
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Shared shelf")
        parent = new_page(c, kb["id"], "Parent page", "top\n")
        child = new_page(c, kb["id"], "Child page", "below\n", parent_id=parent["id"])
        new_page(c, kb["id"], "y" * 200, "long\n")
        link = c.post(f"/api/objects/knowledge_base/{kb['id']}/share-links", json={}).json()
    visitor = contexts.page()
    visitor.goto(urlsplit(link["url"]).path)
    tree = visitor.get_by_role("navigation")
    top, below = tree.get_by_role("link", name="Parent page"), tree.get_by_role("link", name="Child page")
    expect(below).to_have_attribute("href", re.compile(child["id"]))
    assert below.bounding_box()["x"] > top.bounding_box()["x"]  # one level in
    long = tree.get_by_role("link", name="y" * 200)
    expect(long).to_have_attribute("title", "y" * 200)
    assert long.bounding_box()["height"] < 2 * top.bounding_box()["height"]  # one line


def test_a_share_link_on_a_phone_opens_its_tree_from_its_button(contexts, live_server, owner):
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Pocket shelf")
        new_page(c, kb["id"], "Pocket one", "first pocket page\n")
        link = c.post(f"/api/objects/knowledge_base/{kb['id']}/share-links", json={}).json()
    ctx = contexts.browser.new_context(base_url=live_server, viewport={"width": 390, "height": 844})
    contexts.opened.append(ctx)
    visitor = ctx.new_page()
    contexts.watch(visitor)
    visitor.goto(urlsplit(link["url"]).path)
    tree = visitor.get_by_role("navigation", name="Contents")
    expect(tree).to_be_hidden()
    visitor.get_by_role("button", name="Contents").click()
    tree.get_by_role("link", name="Pocket one").click()
    expect(visitor.get_by_role("heading", name="Pocket one", level=1)).to_be_visible()
    expect(tree).to_be_hidden()  # closed once the page is open
    expect(visitor.locator(".reader[data-ready='true']")).to_contain_text("first pocket page")


def test_a_mailed_invitation_accepted_by_a_new_user(contexts, live_server, committed, test_home, owner):
    email = unique_email("invited")
    with api(live_server, owner) as c:
        r = c.post(
            f"/api/objects/knowledge_base/{owner['kb']['id']}/invitations", json={"role": "editor", "email": email}
        )
        assert r.status_code == 201, r.text
    # the mail goes out when the request's unit of work commits, before the answer
    links = [
        m
        for msg in outbox_messages(test_home, email)
        for m in re.findall(r"/invitations/([A-Za-z0-9_-]+)", msg.get_content())
    ]
    assert len(links) == 1, links
    token = links[0]
    with auth_settings_override(committed, email_verification_required=False, default_signup_status="active"):
        page = contexts.page()
        page.goto(f"/invitations/{token}")
        expect(page.get_by_text("You are invited to Handbook as editor.")).to_be_visible()
        page.get_by_label("Display name").fill("New Editor")
        page.get_by_label("Email").fill(email)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Create account").click()
        expect(page.get_by_role("status")).to_contain_text("Invitation accepted.")
        sign_in(page, email, next_path=f"/app/kb/{owner['kb']['id']}")
    expect(page.get_by_role("button", name="New page")).to_be_visible()  # an editor may create pages


def _sign_up_through_invitation(page, live_server, owner, object_ref: str, email: str, test_home) -> list[str]:
    """The owner invites to ``object_ref`` ("knowledge_base/<id>", "document/<id>"); the page opens
    the link, signs up, follows the mailed verification link and signs in. Returns the URLs that
    answered 404 from the sign-in on."""
    with api(live_server, owner) as c:
        r = c.post(f"/api/objects/{object_ref}/invitations", json={"role": "viewer"})
        assert r.status_code == 201, r.text
        token = r.json()["token"]
    page.goto(f"/invitations/{token}")
    page.get_by_label("Display name").fill("Invited Reader")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    expect(page.get_by_role("status")).to_contain_text("confirm your email address")
    mail = next(
        m.get_content()
        for m in reversed(outbox_messages(test_home, email))
        if "/verify-email?token=" in m.get_content()
    )
    link = re.search(r"(/verify-email\?token=[A-Za-z0-9_-]+&invitation=[A-Za-z0-9_-]+)", mail.replace("=\n", ""))
    assert link, mail
    page.goto(link.group(1))
    expect(page.get_by_role("status")).to_have_text("Your email address is confirmed.")
    page.get_by_role("link", name="Continue to sign in").click()
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    return missing


def test_an_invitation_to_a_page_leads_to_it_after_verification(contexts, live_server, test_home, owner):
    """A page shared by invitation (its own permissions): after confirming the address and signing
    in, the invited person lands on the page, not on an empty home."""
    email = unique_email("invited-doc")
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Shared plan", "The plan.\n")
        assert c.put(f"/api/documents/{doc['id']}", json={"permission_mode": "custom"}).status_code == 200
    page = contexts.page()
    missing = _sign_up_through_invitation(page, live_server, owner, f"document/{doc['id']}", email, test_home)
    expect(page).to_have_url(re.compile(rf"/app/kb/{owner['kb']['id']}/docs/{doc['id']}$"))
    expect(page.get_by_role("heading", name="Shared plan", level=1)).to_be_visible()
    # the knowledge base itself is not theirs to read: its side panel holds this page alone
    panel = page.get_by_role("navigation", name="Contents")
    expect(panel).to_contain_text("Shared with you: this page")
    expect(panel.get_by_role("treeitem")).to_have_text(["Shared plan"])
    expect(panel.get_by_text("Not found.")).to_have_count(0)
    expect(panel.get_by_role("link", name="Knowledge base home")).to_have_count(0)
    page.wait_for_load_state("networkidle")
    kb_api = f"/api/knowledge-bases/{owner['kb']['id']}"
    assert {urlsplit(u).path for u in missing} <= {kb_api, kb_api + "/tree"}  # asked, refused: nothing else

    # their home page leads back to it: no workspace, no knowledge base, one shared document
    page.get_by_role("link", name="OpenKB").click()
    expect(page.get_by_text("You are not in any workspace yet.")).to_be_visible()
    shared = page.get_by_role("region", name="Documents shared with you")
    expect(shared.get_by_role("listitem")).to_have_count(1)
    # the knowledge base they cannot open is not named (docs/permissions.md#outsiders-get-404)
    expect(shared.get_by_role("listitem")).to_have_text(re.compile(r"^Shared plan Viewer · shared by \S"))
    shared.get_by_role("link", name="Shared plan").click()
    expect(page).to_have_url(re.compile(rf"/app/kb/{owner['kb']['id']}/docs/{doc['id']}$"))
    expect(page.get_by_role("heading", name="Shared plan", level=1)).to_be_visible()


def test_an_invitation_to_a_knowledge_base_leads_there_after_verification(contexts, live_server, test_home, owner):
    """Someone who signs up through a knowledge base's invitation link confirms the address, signs
    in and lands on that knowledge base; their home lists it (they are in no workspace)."""
    email = unique_email("invited-kb")
    page = contexts.page()
    missing = _sign_up_through_invitation(
        page, live_server, owner, f"knowledge_base/{owner['kb']['id']}", email, test_home
    )
    expect(page).to_have_url(re.compile(rf"/app/kb/{owner['kb']['id']}$"))
    expect(page.get_by_role("heading", name="Handbook", level=1)).to_be_visible()
    expect(page.get_by_role("region", name="Contents")).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert missing == []  # not a member of its workspace: its breadcrumb asks nothing that can only be 404

    page.get_by_role("link", name="OpenKB").click()
    expect(page.get_by_text("You are not in any workspace yet.")).to_be_visible()
    outside = page.get_by_role("region", name="Knowledge bases outside your workspaces")
    expect(outside.locator(f"a[href='/app/kb/{owner['kb']['id']}']")).to_have_text("Handbook")


def _drawn_svg(img) -> str:
    """The SVG text of a drawn diagram (its <img>'s data: URL)."""
    from urllib.parse import unquote

    src = img.get_attribute("src")
    assert src.startswith("data:image/svg+xml;charset=utf-8,"), src[:80]
    return unquote(src.split(",", 1)[1])


def test_a_mermaid_block_is_drawn_as_a_diagram_under_the_strict_policy(contexts, live_server, owner):
    """A ```mermaid block stays a code block in the Markdown and is drawn as an image of its SVG
    (in a hidden frame of the app's own origin, docs/markdown.md#diagrams): under the code in Edit
    mode, alone in Read mode; a block that is not a diagram says why and keeps its code. The
    fixture fails the test on any CSP violation the page reports."""
    md = (
        "Flow:\n\n```mermaid\ngraph TD\n  A[开始 Start] --> B{Ready?}\n  B -->|yes| C[Ship it]\n"
        '  B -->|no| D["<img src=x onerror=alert(1)>"]\n```\n\nBroken:\n\n```mermaid\ngraph TD\n  A -->\n```\n\n'
        "```python\nprint(1)\n```\n"
    )
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Diagrams", md)
        stored = c.get(f"/api/documents/{doc['id']}").json()["markdown"]
    assert "```mermaid\ngraph TD\n  A[开始 Start]" in stored  # the text is what is stored
    page = contexts.page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    blocked: list[tuple[str, str]] = []
    page.on("console", lambda m: blocked.append((m.text, m.location.get("url", ""))) if "Policy" in m.text else None)
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    editor(page)
    blocks = page.locator(".milkdown-code-block")
    drawn = blocks.nth(0).locator(".preview img.diagram")
    expect(drawn).to_be_visible(timeout=30_000)
    svg = _drawn_svg(drawn)
    assert svg.startswith("<svg") and all(w in svg for w in ("开始", "Start", "Ready?", "Ship", "yes")), svg
    assert "<script" not in svg and "onerror" not in svg.replace("onerror=alert(1)&gt;", "")
    expect(blocks.nth(0).locator(".codemirror-host")).to_be_visible()  # Edit mode: the code stays
    expect(blocks.nth(1).locator(".diagram-error")).to_contain_text("Not a diagram Mermaid can draw")
    expect(blocks.nth(2).locator(".preview-panel")).to_have_count(0)  # other languages: no preview
    page.get_by_role("button", name="Read", exact=True).click()
    expect(blocks.nth(0).locator(".codemirror-host")).to_be_hidden()
    expect(drawn).to_be_visible()
    expect(blocks.nth(1).locator(".codemirror-host")).to_be_visible()  # not drawn: its code is shown
    expect(blocks.nth(2).locator(".codemirror-host")).to_be_visible()
    assert dialogs == []
    # The hostile label made Mermaid build an <img onerror=...> inside its frame, whose CSP refused
    # to run the handler (and whose sandbox keeps anything that runs there away from this page).
    # That refusal is the only report allowed, and only from a script this page never loaded.
    loaded_here = set(page.evaluate("performance.getEntriesByType('resource').map(e => e.name)"))
    for text, url in blocked:
        assert "inline event handler" in text and url.endswith(".js") and url not in loaded_here, (text, url)
    contexts.csp_violations[:] = [v for v in contexts.csp_violations if "inline event handler" not in v]

    # the slash menu's *Diagram (Mermaid)* inserts an empty ```mermaid block, drawn as it is typed
    page.get_by_role("button", name="Edit", exact=True).click()
    surface = editor(page)
    before = int(page.get_by_role("status").get_attribute("data-saves"))
    page.wait_for_load_state("networkidle")
    surface.locator("p").filter(has_text="Broken:").click()
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    page.keyboard.type("/")
    page.locator(".milkdown-slash-menu").get_by_text("Diagram (Mermaid)").click()
    page.keyboard.type("graph LR\nX-->Y")
    expect(page.locator(".preview img.diagram")).to_have_count(2)
    autosaved(page, before)
    with api(live_server, owner) as c:
        assert (
            "Broken:\n\n```mermaid\ngraph LR\nX-->Y\n```\n" in c.get(f"/api/documents/{doc['id']}").json()["markdown"]
        )


def test_the_slash_menu_math_item_keeps_the_cursor_in_its_new_block(contexts, live_server, owner):
    """*Math* in the slash menu, chosen above a code block, makes a formula block and what is typed
    next goes into it (the editor's own item left the cursor in the code block below, which got
    the keys)."""
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Formulas", "Before:\n\n```python\nprint(1)\n```\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    surface = editor(page)
    page.wait_for_load_state("networkidle")
    before = int(page.get_by_role("status").get_attribute("data-saves"))
    surface.locator("p").filter(has_text="Before:").click()
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    page.keyboard.type("/")
    page.locator(".milkdown-slash-menu").get_by_text("Math", exact=True).click()
    page.keyboard.type("e^{i\\pi}+1=0")
    autosaved(page, before)
    with api(live_server, owner) as c:
        stored = c.get(f"/api/documents/{doc['id']}").json()["markdown"]
    assert "Before:\n\n$$\ne^{i\\pi}+1=0\n$$\n\n```python\nprint(1)\n```\n" in stored, stored


def test_an_inline_formula_katex_cannot_parse_shows_its_source(contexts, live_server, owner):
    """``$\\frac{$`` is kept as written and shown as its source, in the error colour, beside a
    drawn one; the editor's own node drew KaTeX's error span with a ``style`` attribute, which
    the CSP refused (the fixture fails on any violation)."""
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Inline formulas", "Good $x^2$ and bad $\\frac{$ here.\n")
        stored = c.get(f"/api/documents/{doc['id']}").json()["markdown"]
    assert "$\\frac{$" in stored
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    surface = editor(page)
    expect(surface.locator("span[data-type='math_inline'] .katex")).to_have_count(1)
    bad = surface.locator("span[data-type='math_inline'].formula-error")
    expect(bad).to_have_text("\\frac{")
    assert "KaTeX parse error" in bad.get_attribute("title")
    page.get_by_role("button", name="Read", exact=True).click()
    expect(bad).to_have_text("\\frac{")


def test_read_mode_links_internal_opens_in_app_unsafe_does_nothing(contexts, live_server, owner):
    with api(live_server, owner) as c:
        target = new_page(c, owner["kb"]["id"], "Link target", "target body\n")
        doc = new_page(
            c,
            owner["kb"]["id"],
            "Links",
            f"Go [to the target](openkb://document/{target['id']}) or [nowhere](javascript:alert(1)).\n",
        )
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    editor(page)
    page.get_by_role("button", name="Read", exact=True).click()
    page.get_by_role("link", name="nowhere").click()
    expect(page.get_by_role("heading", name="Links", level=1)).to_be_visible()  # still here, nothing ran
    page.get_by_role("link", name="to the target").click()
    expect(page).to_have_url(re.compile(rf"/app/kb/{owner['kb']['id']}/docs/{target['id']}$"))
    expect(editor(page)).to_contain_text("target body")


def test_tree_keyboard_rename_and_leave_guard(contexts, live_server, owner):
    with api(live_server, owner) as c:
        first = new_page(c, owner["kb"]["id"], "Keyboard one", "one\n")
        new_page(c, owner["kb"]["id"], "Keyboard two", "two\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{first['id']}")
    editor(page)
    tree = page.get_by_role("tree")
    current = tree.get_by_role("treeitem", name="Keyboard one")
    expect(current).to_have_attribute("tabindex", "0")  # the tree's one tab stop is the current page
    current.focus()
    page.keyboard.press("ArrowDown")
    expect(tree.get_by_role("treeitem", name="Keyboard two")).to_be_focused()
    page.keyboard.press("F2")
    dialog = page.get_by_role("dialog", name="Rename")
    dialog.get_by_label("Title").fill("Keyboard renamed")
    page.keyboard.press("Enter")
    expect(tree.get_by_role("treeitem", name="Keyboard renamed")).to_be_visible()

    # unsaved work: leaving asks first; declining keeps the page
    editor(page).click()
    page.keyboard.type("x")
    page.once("dialog", lambda d: d.dismiss())
    tree.get_by_role("link", name="Keyboard renamed").click()
    expect(page).to_have_url(re.compile(rf"/docs/{first['id']}$"))


def test_invitation_link_with_approval_from_the_knowledge_base_panel(contexts, live_server, committed, owner):
    joiner = make_login_user(committed)
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}")
    page.get_by_role("button", name="Share", exact=True).click()
    dialog = page.get_by_role("dialog", name="Share and collaborate")
    expect(dialog.get_by_label("Visibility")).to_have_value("workspace")
    dialog.get_by_label("Visibility").select_option("private")
    expect(dialog.get_by_label("Visibility")).to_have_value("private")
    invitations = dialog.get_by_role("region", name="Invitation links")
    invitations.get_by_label("Role").select_option("editor")
    invitations.get_by_label("I approve each acceptance").check()
    invitations.get_by_role("button", name="Create invitation link").click()
    url = invitations.get_by_role("textbox", name="Invitation links").input_value()
    assert url.startswith(os.environ["APP_BASE_URL"] + "/invitations/"), url  # as mailed, not this page's origin

    other = contexts.page()
    sign_in(other, joiner.email, next_path=urlsplit(url).path)
    other.get_by_role("button", name="Accept invitation").click()
    expect(other.get_by_role("status")).to_have_text("Your request waits for approval.")

    page.reload()
    page.get_by_role("button", name="Share", exact=True).click()
    dialog = page.get_by_role("dialog", name="Share and collaborate")
    dialog.get_by_role("button", name="1 waiting for approval").click()
    dialog.get_by_role("button", name="Approve").click()
    expect(dialog.get_by_role("button", name="1 waiting for approval")).to_have_count(0)
    other.goto(f"/app/kb/{owner['kb']['id']}")
    expect(other.get_by_role("button", name="New page")).to_be_visible()  # now an editor
    with api(live_server, owner) as c:
        assert c.get(f"/api/knowledge-bases/{owner['kb']['id']}").json()["visibility"] == "private"
        c.put(f"/api/knowledge-bases/{owner['kb']['id']}", json={"visibility": "workspace"})


def test_version_history_view_and_restore(contexts, live_server, owner):
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Versioned", "first words\n")
        save_body(c, doc, "second words\n")
        name = c.get("/api/auth/me").json()["user"]["display_name"]
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    expect(editor(page)).to_contain_text("second words")
    page.get_by_role("button", name="More").click()
    page.get_by_role("menuitem", name="Version history").click()
    dialog = page.get_by_role("dialog", name="Version history")
    # two saves a moment apart are one sitting: one row, its saves listed on demand
    expect(dialog.locator(".history > ul > li")).to_have_text(
        [re.compile(rf"^Versions 1–2 · current {re.escape(name)} · .+ · 2 saves View\s*Each save$")]
    )
    dialog.get_by_role("button", name="Each save").click()
    saves = dialog.get_by_role("list", name="Saves of versions 1–2").get_by_role("listitem")
    # who wrote each version, how long it is, which one is current
    expect(saves).to_have_text(
        [
            re.compile(rf"^Version 2 · current {re.escape(name)} · .+ · 13 characters View$"),
            re.compile(rf"^Version 1 {re.escape(name)} · .+ · 12 characters View\s*Restore$"),
        ]
    )
    first = saves.filter(has_text="Version 1")
    first.get_by_role("button", name="View").click()
    expect(dialog.get_by_role("region", name="Version 1")).to_contain_text("first words")
    first.get_by_role("button", name="Restore").click()
    expect(dialog).to_have_count(0)
    expect(editor(page)).to_contain_text("first words")
    with api(live_server, owner) as c:
        got = c.get(f"/api/documents/{doc['id']}").json()
        assert got["version_no"] == 3 and got["markdown"] == "first words\n"

    page.get_by_role("button", name="More").click()
    page.get_by_role("menuitem", name="Delete").click()
    page.get_by_role("dialog", name="Delete").get_by_role("button", name="Delete").click()
    expect(page).to_have_url(re.compile(rf"/app/kb/{owner['kb']['id']}$"))
    expect(page.get_by_role("tree").get_by_role("treeitem", name="Versioned")).to_have_count(0)


def _wait_indexed(c: httpx.Client, doc_id: str, timeout: float = 180) -> None:
    """Poll ``index_status`` (docs/api.md: how clients wait for indexing), as tests/indexing does."""
    import time

    deadline = time.monotonic() + timeout
    while (status := c.get(f"/api/documents/{doc_id}").json()["index_status"]) != "indexed":
        assert status != "failed" and time.monotonic() < deadline, status
        time.sleep(0.2)


@pytest.mark.usefixtures("worker")
def test_search_groups_by_document_highlights_and_filters(contexts, live_server, owner, engine):
    """The page renders the server's grouping (best chunk + ``snippets``) and ``highlights``
    (code-point offsets: the emoji before the word would shift a UTF-16 reading), and says when
    a result's document has a save that is not searchable yet (``index_status`` pending)."""
    word = f"zephyr{uuid.uuid4().hex[:6]}"
    with api(live_server, owner) as c:
        other_kb = new_kb(c, owner, "Other shelf")
        a = new_page(
            c,
            owner["kb"]["id"],
            "Search one",
            f"# Intro\n\nThe {word} appears here.\n\n# Later\n\n{'Filler text. ' * 60}\n\nAnd {word} again.\n",
        )
        b = new_page(c, other_kb["id"], "Search two", f"Only one \U0001f642 {word} in this one.\n")
        _wait_indexed(c, a["id"])
        _wait_indexed(c, b["id"])
        # a later save of "Search one" that the index has not caught up with yet
        with Session(engine) as s:
            s.execute(sa_text("UPDATE documents SET index_status = 'pending' WHERE id = :id"), {"id": a["id"]})
            s.commit()
        listed = c.post("/api/search", json={"query": word, "top_k": 30}).json()["results"]
        served = {r["title"]: r for r in listed}
        assert served["Search one"]["index_status"] == "pending"
        assert served["Search two"]["index_status"] == "indexed"
    page = contexts.page()
    sign_in(page, owner["email"])
    page.get_by_role("searchbox", name="Search").fill(word)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/app/search\?q="))
    results = page.get_by_role("list", name="Results")
    # one entry per document, in the server's order: the owner's other pages may come too (a
    # random word's embedding can sit near another page's, above the dense floor)
    expect(results.get_by_role("heading", level=2)).to_have_text([r["title"] for r in listed])
    one = results.get_by_role("listitem").filter(has=page.get_by_role("link", name="Search one"))
    two = results.get_by_role("listitem").filter(has=page.get_by_role("link", name="Search two"))
    expect(one).to_have_count(1)  # one entry, however many of its chunks match
    expect(two).to_have_count(1)
    expect(one.locator(".snippet")).to_have_count(1 + len(served["Search one"]["snippets"]))
    expect(one.get_by_role("note")).to_have_text("Indexing… recent changes are not searchable yet")
    expect(two.get_by_role("note")).to_have_count(0)
    expect(two.locator("mark")).to_have_text([word])
    # a new search from the top bar's box, then Back: the page's own box shows the query whose
    # results it lists (it kept the first query it was opened with)
    page.get_by_role("searchbox", name="Search", exact=True).fill("nothing like it")
    page.keyboard.press("Enter")
    expect(page.get_by_role("searchbox", name="Search documents")).to_have_value("nothing like it")
    page.go_back()
    expect(page.get_by_role("searchbox", name="Search documents")).to_have_value(word)
    expect(results.get_by_role("heading", level=2)).to_have_text([r["title"] for r in listed])
    page.get_by_label("Knowledge base").select_option(label="Other shelf")
    expect(results.get_by_role("heading", level=2)).to_have_text(["Search two"])


@pytest.mark.usefixtures("worker")
def test_a_snippet_that_opens_its_section_shows_the_heading_once(contexts, live_server, owner):
    """A chunk that opens a section starts with its heading line; the result shows that heading
    once, as the heading path, with its match marked, then the section's text."""
    word = f"quokka{uuid.uuid4().hex[:6]}"
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Heading once", f"# Rollout {word}\n\nSteps to ship the {word} build.\n")
        _wait_indexed(c, doc["id"])
        hit = next(
            r for r in c.post("/api/search", json={"query": word}).json()["results"] if r["document_id"] == doc["id"]
        )
    assert hit["heading_path"] == [f"Rollout {word}"]
    assert hit["content"].startswith(f"Rollout {word}\n")  # the case this test is about
    page = contexts.page()
    sign_in(page, owner["email"])
    page.goto(f"/app/search?q={word}")
    item = (
        page.get_by_role("list", name="Results")
        .get_by_role("listitem")
        .filter(has=page.get_by_role("link", name="Heading once"))
    )
    expect(item.locator(".snippet")).to_have_text(f"Rollout {word}: Steps to ship the {word} build.")
    expect(item.locator("mark")).to_have_text([word, word])


@pytest.mark.usefixtures("worker")
def test_the_knowledge_base_home_lists_what_was_updated_last(contexts, live_server, committed, owner):
    """Its *Recently updated* list is the search service's empty query on the knowledge base:
    newest first, only what the reader may read (a private page is not listed for a member)."""
    member = make_login_user(committed)
    with api(live_server, owner) as c:
        r = c.post(
            f"/api/workspaces/{owner['ws']['id']}/members", json={"user_id": str(member.user_id), "role": "member"}
        )
        assert r.status_code == 201, r.text
        kb = new_kb(c, owner, "Recent shelf")
        first = new_page(c, kb["id"], "Older notes", "old\n")
        second = new_page(c, kb["id"], "Newer notes", "new\n")
        hidden = new_page(c, kb["id"], "Private notes", "mine\n")
        r = c.put(f"/api/documents/{hidden['id']}", json={"permission_mode": "custom", "visibility": "private"})
        assert r.status_code == 200, r.text
        for doc in (first, second, hidden):
            _wait_indexed(c, doc["id"])
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{kb['id']}")
    recent = page.get_by_role("region", name="Recently updated")
    expect(recent.get_by_role("link")).to_have_text(["Private notes", "Newer notes", "Older notes"])
    recent.get_by_role("link", name="Older notes").click()
    expect(page).to_have_url(re.compile(rf"/app/kb/{kb['id']}/docs/{first['id']}$"))

    other = contexts.page()
    sign_in(other, member.email, next_path=f"/app/kb/{kb['id']}")
    expect(other.get_by_role("region", name="Recently updated").get_by_role("link")).to_have_text(
        ["Newer notes", "Older notes"]
    )


def test_the_knowledge_base_home_lists_its_contents_or_how_to_start(contexts, live_server, owner):
    """The home page of a knowledge base lists the top two levels of its tree, with how many
    documents lie deeper; an empty one tells an editor how to add the first pages."""
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Contents shelf")
        empty = new_kb(c, owner, "Empty shelf")
        r = c.post("/api/documents", json={"knowledge_base_id": kb["id"], "type": "folder", "title": "Guides"})
        assert r.status_code == 201, r.text
        guides = r.json()
        new_page(c, kb["id"], "Overview", "# Overview\n")
        new_page(c, kb["id"], "Onboarding", "Start here.\n", parent_id=guides["id"])
        incidents = new_page(c, kb["id"], "Incidents", "On call.\n", parent_id=guides["id"])
        runbook = new_page(c, kb["id"], "Runbook", "Steps.\n", parent_id=incidents["id"])
        new_page(c, kb["id"], "Rollback", "Undo.\n", parent_id=runbook["id"])
    page = contexts.page()
    sign_in(page, owner["email"])
    page.goto(f"/app/kb/{kb['id']}")
    contents = page.get_by_role("region", name="Contents")
    top = contents.locator(":scope > ol > li")
    expect(top.locator(":scope > a")).to_have_text(["Guides", "Overview"])
    expect(top.first.locator("ol > li")).to_have_text(["Onboarding", "Incidents · 2 more inside"])
    contents.get_by_role("link", name="Incidents").click()
    expect(page).to_have_url(re.compile(rf"/app/kb/{kb['id']}/docs/{incidents['id']}$"))

    page.goto(f"/app/kb/{empty['id']}")
    region = page.get_by_role("region", name="Contents")
    expect(region).to_contain_text("No documents yet: add the first page with New page")
    region.get_by_role("button", name="Import").click()
    expect(page.get_by_role("dialog")).to_be_visible()


def test_a_bad_or_cut_short_verification_link_says_how_to_get_a_new_one(contexts, live_server):
    """The page's title names what it does, not a success it has not seen; a link the server
    refuses, or one cut short before its token, says how to get a new one."""
    page = contexts.page()
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    page.goto("/verify-email?token=kbverify_not-a-real-token")
    expect(page.get_by_role("heading", level=1)).to_have_text("Confirm your email address")
    expect(page.get_by_role("alert")).to_have_text("This link is invalid, already used or expired.")
    expect(page.get_by_text("To get a new link, sign up again with the same address")).to_be_visible()
    expect(page.get_by_role("link", name="Create account")).to_have_attribute("href", "/register")
    expect(page.get_by_text("Your email address is confirmed.")).to_have_count(0)

    posts.clear()
    page.goto("/verify-email")
    expect(page.get_by_role("alert")).to_have_text(re.compile(r"^This link is incomplete"))
    expect(page.get_by_role("link", name="Sign in")).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert not [u for u in posts if u.endswith("/api/auth/verify-email")]  # nothing to send


def test_a_page_that_writes_as_it_opens_waits_for_the_session_token(contexts, live_server, owner):
    """Opening a search URL afresh (a bookmark, a reload) posts the search while the session is
    still loading: the post waits for the CSRF token that load brings instead of going without
    it, answering CSRF_FAILED and going again (web/src/api/client.ts)."""
    page = contexts.page()
    sign_in(page, owner["email"])
    posts: list[tuple[int, str | None]] = []
    page.on(
        "response",
        lambda r: (
            posts.append((r.status, r.request.headers.get("x-csrf-token")))
            if r.url.endswith("/api/search") and r.request.method == "POST"
            else None
        ),
    )
    page.goto("/app/search?q=anything")  # a full load: the app starts with no session
    expect(page.get_by_role("list", name="Results")).to_be_attached()
    page.wait_for_load_state("networkidle")
    assert len(posts) == 1 and posts[0][0] == 200 and posts[0][1], posts


def test_a_long_unbroken_title_wraps_instead_of_widening_the_page(contexts, live_server, owner):
    """A title with no space in it (a pasted identifier, a URL) in the home page's recent
    documents takes one line, cut with an ellipsis (the full title is the link's tooltip); the
    page never scrolls sideways."""
    with api(live_server, owner) as c:
        new_page(c, owner["kb"]["id"], "x" * 300, "long\n")
    page = contexts.page()
    sign_in(page, owner["email"])
    link = page.get_by_role("link", name="x" * 300).first
    expect(link).to_be_visible()
    expect(link).to_have_attribute("title", "x" * 300)
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    line = page.evaluate("parseFloat(getComputedStyle(document.body).lineHeight) || 24")
    assert link.bounding_box()["height"] < 2 * line


def test_the_title_box_grows_with_a_long_title_and_keeps_it_one_line(contexts, live_server, owner):
    """Editing a long title: the box wraps and grows so all of it shows (it used to be a one-line
    box that scrolled the title out of sight); Enter goes on into the body, and a line break
    pasted into the title is saved as a space."""
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "z" * 300, "body\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    editor(page)
    box = page.get_by_label("Title")
    expect(box).to_have_value("z" * 300)
    fits = "el => el.scrollWidth <= el.clientWidth && el.scrollHeight <= el.clientHeight + 1"
    assert box.evaluate(fits)  # nothing hidden on either axis
    assert box.bounding_box()["height"] > 2 * 30  # several lines of the 30px title
    box.click()
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    expect(page.locator(".editor .ProseMirror")).to_be_focused()
    expect(box).to_have_value("z" * 300)
    before = int(page.get_by_role("status").get_attribute("data-saves"))
    box.fill("Release\nnotes")
    expect(box).to_have_value("Release notes")
    assert box.bounding_box()["height"] < 2 * 40  # shrinks back to one line
    autosaved(page, before)
    with api(live_server, owner) as c:
        assert c.get(f"/api/documents/{doc['id']}").json()["title"] == "Release notes"


def test_on_a_phone_the_tree_opens_from_its_button(contexts, live_server, owner):
    """Below 720 px the sidebar is hidden: the knowledge base and document pages offer a
    Contents button that opens the tree over the page, so every page stays reachable, and the
    search box moves to a row of its own; on a wide screen the tree is always there and the
    button is not."""
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Pocket page", "small screens\n")
    ctx = contexts.browser.new_context(base_url=live_server, viewport={"width": 390, "height": 844})
    contexts.opened.append(ctx)
    page = ctx.new_page()
    contexts.watch(page)
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}")
    tree = page.get_by_role("tree")
    expect(tree).to_be_hidden()
    toggle = page.get_by_role("button", name="Contents")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    tree.get_by_role("treeitem", name="Pocket page").click()
    expect(page).to_have_url(re.compile(rf"/docs/{doc['id']}$"))
    expect(page.get_by_role("tree")).to_be_hidden()  # closed on the new page
    expect(page.get_by_role("button", name="Share", exact=True)).to_be_in_viewport()  # the toolbar wraps
    search = page.get_by_role("searchbox", name="Search")  # a row of its own under the bar
    expect(search).to_be_in_viewport()
    search.fill("pocket")
    search.press("Enter")
    expect(page).to_have_url(re.compile(r"/app/search\?q=pocket$"))
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    wide = contexts.page()
    sign_in(wide, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}")
    expect(wide.get_by_role("tree")).to_be_visible()
    expect(wide.get_by_role("button", name="Contents")).to_be_hidden()


def test_pages_under_a_page_show_in_the_tree_and_are_made_from_its_menu(contexts, live_server, owner):
    """A page may hold pages (a sub-document): the tree opens and closes it like a folder, and
    its menu makes a page inside it; before, such children were in the API's tree but nowhere
    in the web app's."""
    with api(live_server, owner) as c:
        kb = new_kb(c, owner, "Nested shelf")
        parent = new_page(c, kb["id"], "Handbook", "top\n")
        new_page(c, kb["id"], "Chapter one", "below\n", parent_id=parent["id"])
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{kb['id']}")
    tree = page.get_by_role("tree")
    handbook = tree.get_by_role("treeitem", name="Handbook")
    expect(handbook).to_have_attribute("aria-expanded", "true")
    expect(handbook.get_by_role("treeitem", name="Chapter one")).to_be_visible()
    handbook.get_by_role("button", name="Collapse").first.click()
    expect(handbook).to_have_attribute("aria-expanded", "false")
    expect(tree.get_by_role("treeitem", name="Chapter one")).to_have_count(0)
    handbook.get_by_role("button", name="Actions for Handbook").click()
    page.get_by_role("menuitem", name="New page inside").click()
    page.get_by_label("Title").fill("Chapter two")
    page.get_by_role("button", name="Create").click()
    expect(page).to_have_url(re.compile(rf"/app/kb/{kb['id']}/docs/[0-9a-f-]+$"))
    two = urlsplit(page.url).path.rsplit("/", 1)[1]
    # the new page's parent opens to show it
    expect(handbook.get_by_role("treeitem", name="Chapter two")).to_have_attribute("aria-current", "page")
    with api(live_server, owner) as c:
        assert c.get(f"/api/documents/{two}").json()["parent_id"] == parent["id"]


def test_a_mistyped_url_opens_the_app_s_not_found_page(contexts, live_server):
    """A URL outside the app's routes, opened in the browser: the app's page saying so, with a
    way home, not the API's JSON (the answer is still a 404)."""
    page = contexts.page()
    response = page.goto("/knowledge-base/typo")
    assert response is not None and response.status == 404
    expect(page.get_by_text("This page does not exist.")).to_be_visible()
    expect(page.get_by_role("link", name="Home")).to_be_visible()
    expect(page.get_by_text('"NOT_FOUND"')).to_have_count(0)


def test_an_outsider_opening_a_knowledge_base_link_sees_not_found_and_nothing_of_it(
    contexts, live_server, owner, committed
):
    """A knowledge base the visitor may not read answers as one that does not exist (404): the
    page says Not found with a way home, and offers no tree and no Export all of it."""
    outsider = make_login_user(committed)
    page = contexts.page()
    sign_in(page, outsider.email)
    for kb_id in (owner["kb"]["id"], str(uuid.uuid4())):
        page.goto(f"/app/kb/{kb_id}")
        expect(page.get_by_role("alert")).to_have_text("Not found.")
        expect(page.get_by_role("link", name="Home")).to_be_visible()
        expect(page.get_by_role("tree")).to_have_count(0)
        expect(page.get_by_role("button", name="Export all (.zip)")).to_have_count(0)
        expect(page.get_by_text(owner["kb"]["title"])).to_have_count(0)


PNG_1X1 = bytes.fromhex(  # a 1x1 transparent PNG
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360f8cfc0f01f0005000201e5270de60000000049454e44ae426082"
)


def _page_showing_a_dot(c, owner, title: str, markdown_of) -> tuple[dict, str]:
    """A page whose body is ``markdown_of("asset://<id>")`` of a 1x1 PNG uploaded to it; (page, asset id)."""
    doc = new_page(c, owner["kb"]["id"], title, "placeholder\n")
    r = c.post("/api/uploads", files={"file": ("dot.png", PNG_1X1, "image/png")}, data={"document_id": doc["id"]})
    assert r.status_code == 201, r.text
    asset_id = r.json()["id"]
    save_body(c, doc, markdown_of(f"asset://{asset_id}"))
    return doc, asset_id


def test_asset_images_load_through_the_permission_checked_route(contexts, live_server, owner):
    with api(live_server, owner) as c:
        doc, asset_id = _page_showing_a_dot(c, owner, "Pictures", lambda ref: f"![a dot]({ref})\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    img = editor(page).locator(f"img[src='/api/assets/{asset_id}']")
    expect(img).to_have_count(1)
    expect(img).to_have_js_property("naturalWidth", 1)  # loaded with the session, under the CSP


def test_an_image_that_cannot_load_is_a_labelled_box_and_the_page_is_unchanged(contexts, live_server, owner):
    """An image whose asset is gone shows as a box saying so (a broken image with the image
    block's empty alt took no space at all); the page's Markdown does not change for it."""
    with api(live_server, owner) as c:
        gone = uuid.uuid4()
        doc = new_page(c, owner["kb"]["id"], "Lost picture", f"Before\n\n![a chart](asset://{gone})\n\nAfter\n")
        before = c.get(f"/api/documents/{doc['id']}").json()["current_version_id"]
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    img = editor(page).locator(f"img[src='/api/assets/{gone}']")
    expect(img).to_have_class(re.compile(r"\bimage-missing\b"))
    expect(img).to_have_attribute("title", "Image not available")
    box = img.bounding_box()
    assert box is not None and box["width"] >= 150 and box["height"] >= 30, box
    page.wait_for_timeout(1500)  # an autosave would have come by now
    with api(live_server, owner) as c:
        assert c.get(f"/api/documents/{doc['id']}").json()["current_version_id"] == before


def test_an_image_block_tells_screen_readers_its_alt_text(contexts, live_server, owner):
    """The image block's view wrote its caption into ``<img alt>``: ``![Architecture diagram](...)``
    reached a screen reader as an image without a name. It gets the Markdown's alt text now (the
    caption when there is none), in the editor and read-only, and the page does not change."""
    with api(live_server, owner) as c:
        doc, _ = _page_showing_a_dot(
            c,
            owner,
            "Diagrams",
            lambda ref: f'![Architecture diagram]({ref} "Figure 1")\n\n![]({ref} "Only a caption")\n',
        )
        before = c.get(f"/api/documents/{doc['id']}").json()["current_version_id"]
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    images = editor(page).locator("img[src^='/api/assets/']")
    expect(images).to_have_count(2)
    expect(images.nth(0)).to_have_attribute("alt", "Architecture diagram")
    expect(images.nth(1)).to_have_attribute("alt", "Only a caption")
    expect(page.get_by_role("img", name="Architecture diagram")).to_have_count(1)
    page.wait_for_timeout(1500)  # an autosave would have come by now
    with api(live_server, owner) as c:
        assert c.get(f"/api/documents/{doc['id']}").json()["current_version_id"] == before


def test_a_screenshot_pasted_on_a_new_line_goes_above_the_cursor(contexts, live_server, owner):
    """New line, paste a screenshot, type on: the words go below the picture and no empty line is
    left above it (the image used to land below the line, the cursor above it)."""
    with api(live_server, owner) as c:
        doc = new_page(c, owner["kb"]["id"], "Screenshots", "First line\n")
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{owner['kb']['id']}/docs/{doc['id']}")
    surface = editor(page)
    before = int(page.get_by_role("status").get_attribute("data-saves"))
    surface.click()
    page.keyboard.press("Control+End")
    page.keyboard.press("Enter")
    page.evaluate(
        """async () => {
          const canvas = document.createElement('canvas')
          canvas.width = 12
          canvas.height = 8
          canvas.getContext('2d').fillRect(0, 0, 12, 8)
          const blob = await new Promise((done) => canvas.toBlob(done, 'image/png'))
          const data = new DataTransfer()
          data.items.add(new File([blob], 'shot.png', { type: 'image/png' }))
          const paste = new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true })
          document.querySelector('.ProseMirror').dispatchEvent(paste)
        }"""
    )
    expect(surface.locator("img[src^='/api/assets/']")).to_have_count(1)
    page.keyboard.type("Below the picture")
    autosaved(page, before)
    with api(live_server, owner) as c:
        md = c.get(f"/api/documents/{doc['id']}").json()["markdown"]
    assert re.fullmatch(r"First line\n\n!\[[^\]]*\]\(asset://[0-9a-f-]{36}\)\n\nBelow the picture\n", md), md
