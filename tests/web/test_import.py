"""Import in the web app (docs/importing.md#the-web-app): the knowledge base page's Import button
with picked files (live progress, per-file results, a failed file with its code, links between
the files resolved), and files dropped from outside onto a folder of the tree (its menu has
Import too); a real worker runs the jobs."""

from __future__ import annotations

import base64
import json

import pytest
from playwright.sync_api import expect

from tests.web.test_browser import api, owner, sign_in  # noqa: F401 - owner is a fixture

pytestmark = pytest.mark.slow


def _drop_files(page, target, files: dict[str, bytes]) -> None:
    """Drop files from outside the page onto ``target`` (what a user's file manager does)."""
    payload = json.dumps({name: base64.b64encode(data).decode() for name, data in files.items()})
    handle = page.evaluate_handle(
        """(payload) => {
            const dt = new DataTransfer()
            for (const [name, b64] of Object.entries(JSON.parse(payload))) {
                const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))
                dt.items.add(new File([bytes], name, { type: 'text/markdown' }))
            }
            return dt
        }""",
        payload,
    )
    for event in ("dragenter", "dragover", "drop"):
        target.dispatch_event(event, {"dataTransfer": handle})


def test_import_from_the_knowledge_base_page_and_by_drop(contexts, live_server, owner, worker):  # noqa: F811
    kb_id = owner["kb"]["id"]
    with api(live_server, owner) as c:
        inbox = c.post("/api/documents", json={"knowledge_base_id": kb_id, "type": "folder", "title": "Inbox"}).json()
    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{kb_id}")

    page.get_by_role("main").get_by_role("button", name="Import", exact=True).click()
    dialog = page.get_by_role("dialog", name="Import files and folders")
    expect(dialog).to_contain_text("Into the top of the knowledge base.")
    dialog.get_by_label("Choose files…").set_input_files(
        [
            {"name": "Alpha.md", "mimeType": "text/markdown", "buffer": b"# Alpha\n\nSee [beta](Beta.md).\n"},
            {"name": "Beta.md", "mimeType": "text/markdown", "buffer": "# Beta\n\n第二页 line<br>two\n".encode()},
            {"name": "broken.md", "mimeType": "text/markdown", "buffer": b"\x00\x01\x02binary"},
        ]
    )
    chosen = dialog.get_by_role("list", name="Files to import").get_by_role("listitem")
    expect(chosen).to_have_count(3)
    expect(chosen.filter(has_text="Alpha.md")).to_have_text("Alpha.md (30 B)")  # its size, not "1 KB"
    dialog.get_by_role("button", name="Import 3 files").click()
    status = dialog.get_by_role("status", name="Import progress")
    expect(status).to_contain_text("Import finished; some files failed.", timeout=120_000)
    expect(status).to_contain_text("2 created")
    results = dialog.get_by_role("table", name="Import results")
    broken = results.get_by_role("row").filter(has_text="broken.md")
    expect(broken).to_contain_text("failed")
    expect(broken).to_contain_text("UNSUPPORTED_FILE_TYPE")  # the error code, then its reason
    beta_row = results.get_by_role("row").filter(has_text="Beta.md")
    expect(beta_row).to_contain_text("created")
    expect(beta_row).to_contain_text("hard break")  # the <br> repair, recorded as a warning
    dialog.get_by_role("button", name="Close").click()
    tree = page.get_by_role("tree")
    expect(tree.get_by_role("treeitem", name="Alpha")).to_be_visible()
    with api(live_server, owner) as c:
        items = {i["title"]: i for i in c.get(f"/api/knowledge-bases/{kb_id}/tree").json()["items"]}
        alpha = c.get(f"/api/documents/{items['Alpha']['id']}").json()
        assert f"(openkb://document/{items['Beta']['id']})" in alpha["markdown"]

    # the folder's menu offers Import into it
    folder = tree.get_by_role("treeitem", name="Inbox")
    folder.locator("> div").hover()  # the actions button shows on hover
    folder.get_by_role("button", name="Actions for Inbox").click()
    folder.get_by_role("menuitem", name="Import").click()
    dialog = page.get_by_role("dialog", name="Import files and folders")
    expect(dialog).to_contain_text("Into the folder “Inbox”.")
    dialog.get_by_role("button", name="Cancel").click()

    # files dropped from outside onto the folder: imported into it
    _drop_files(page, folder.locator("> div"), {"Dropped note.md": "# Dropped note\n\n拖放导入\n".encode()})
    dialog = page.get_by_role("dialog", name="Import files and folders")
    expect(dialog).to_contain_text("Into the folder “Inbox”.")
    expect(dialog.get_by_role("list", name="Files to import")).to_contain_text("Dropped note.md")
    dialog.get_by_role("button", name="Import 1 file").click()
    expect(dialog.get_by_role("status", name="Import progress")).to_contain_text("Import finished.", timeout=120_000)
    dialog.get_by_role("table", name="Import results").get_by_role("link", name="Dropped note.md").click()
    expect(page.get_by_role("main")).to_contain_text("拖放导入")
    with api(live_server, owner) as c:
        dropped = [
            i for i in c.get(f"/api/knowledge-bases/{kb_id}/tree").json()["items"] if i["title"] == "Dropped note"
        ]
        assert [i["parent_id"] for i in dropped] == [inbox["id"]]
