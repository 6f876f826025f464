"""Export from the web app (docs/export.md#api): a page's More menu, an item's menu in the tree
(readers included) and the tree's head (the whole knowledge base) download the zip, with a
progress line that ends in "Exported"; a refusal shows why."""

from __future__ import annotations

import io
import zipfile

import pytest
from playwright.sync_api import expect
from sqlmodel import Session

from tests.api.helpers import make_login_user
from tests.web.test_browser import api, new_page, owner, sign_in  # noqa: F401 - owner is a fixture

pytestmark = pytest.mark.slow


def test_export_from_the_document_and_tree_menus(contexts, live_server, owner, engine):  # noqa: F811
    kb_id = owner["kb"]["id"]
    with api(live_server, owner) as c:
        r = c.post("/api/documents", json={"knowledge_base_id": kb_id, "type": "folder", "title": "资料 Export"})
        assert r.status_code == 201, r.text
        folder = r.json()
        doc = new_page(c, kb_id, "页面 Page", "# 页面\n\nHello export.\n", parent_id=folder["id"])

    page = contexts.page()
    sign_in(page, owner["email"], next_path=f"/app/kb/{kb_id}/docs/{doc['id']}")
    page.get_by_role("button", name="More", exact=True).click()
    with page.expect_download() as dl:
        page.get_by_role("menuitem", name="Export (.zip)").click()
    download = dl.value
    assert download.suggested_filename == "页面 Page.zip"
    z = zipfile.ZipFile(io.BytesIO(open(download.path(), "rb").read()))  # noqa: SIM115
    assert sorted(z.namelist()) == ["openkb-export.json", "页面 Page.md"]
    assert "Hello export." in z.read("页面 Page.md").decode()
    status = page.locator(".export-progress[data-state='done']")
    expect(status).to_contain_text("Exported 页面 Page.zip")

    folder_item = page.get_by_role("tree").get_by_role("treeitem", name="资料 Export")
    folder_item.locator("> div").hover()  # the actions button shows on hover
    folder_item.get_by_role("button", name="Actions for 资料 Export").click()
    with page.expect_download() as dl:
        folder_item.get_by_role("menuitem", name="Export (.zip)").click()
    z = zipfile.ZipFile(io.BytesIO(open(dl.value.path(), "rb").read()))  # noqa: SIM115
    assert sorted(z.namelist()) == ["openkb-export.json", "资料 Export/", "资料 Export/页面 Page.md"]

    # a reader: the item menu offers Export only; the tree's head exports the whole knowledge base
    reader = make_login_user(lambda: Session(engine, expire_on_commit=False))
    with api(live_server, owner) as c:
        r = c.post(f"/api/workspaces/{owner['ws']['id']}/members", json={"email": reader.email, "role": "member"})
        assert r.status_code == 201, r.text
    rpage = contexts.page()
    sign_in(rpage, reader.email, next_path=f"/app/kb/{kb_id}/docs/{doc['id']}")
    item = rpage.get_by_role("tree").get_by_role("treeitem", name="资料 Export")
    item.locator("> div").hover()
    item.get_by_role("button", name="Actions for 资料 Export").click()
    expect(item.get_by_role("menuitem")).to_have_text(["Export (.zip)"])
    with rpage.expect_download() as dl:
        rpage.get_by_role("button", name="Export all (.zip)").click()
    z = zipfile.ZipFile(io.BytesIO(open(dl.value.path(), "rb").read()))  # noqa: SIM115
    assert "资料 Export/页面 Page.md" in z.namelist()

    # a refusal is shown, not swallowed: the page is gone by the time the export is asked for
    with api(live_server, owner) as c:
        assert c.delete(f"/api/documents/{doc['id']}").status_code in (200, 204)
    page.get_by_role("button", name="More", exact=True).click()
    page.get_by_role("menuitem", name="Export (.zip)").click()
    failed = page.locator(".export-progress[data-state='failed']")
    expect(failed).to_contain_text("Export failed")
    failed.get_by_role("button", name="Close").click()
    expect(failed).to_have_count(0)
