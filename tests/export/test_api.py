"""GET /api/knowledge-bases/{id}/export and GET /api/documents/{id}/export over HTTP: a streamed
zip, 404 for who cannot read, 401 without a login, the size cap; the zip goes back in through
POST /api/import-jobs as it is (docs/export.md#api)."""

from __future__ import annotations

import io
import json
import uuid
import zipfile

import pytest
from sqlmodel import Session, col, select

from openkb.models import AuditLog
from tests.content.http_world import HttpWorld
from tests.importing.test_api_jobs import post, wait_job


@pytest.fixture(scope="module")
def content(w):
    kb = w.new_kb(visibility="private")
    folder = w.doc("资料 Folder", kb=kb, type="folder")
    page = w.doc("页面 Page", kb=kb, parent_id=folder["id"], markdown="# 页面\n\nHello.\n")
    w.doc("Other", kb=kb, markdown=f"# Other\n\nSee [page](openkb://document/{page['id']}#x).\n")
    return kb, folder, page


@pytest.fixture(scope="module")
def w(live_server, engine):
    """The HTTP persona world (tests/content/http_world.py), once per module."""
    world = HttpWorld(live_server, lambda: Session(engine, expire_on_commit=False))
    yield world
    world.close()


def test_knowledge_base_export_streams_a_zip(w, content):
    kb, _folder, _page = content
    with w.c["owner"].stream("GET", f"/api/knowledge-bases/{kb['id']}/export") as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"] == "application/zip"
        assert (
            "attachment" in r.headers["content-disposition"] and "filename*=UTF-8''" in r.headers["content-disposition"]
        )
        assert int(r.headers["x-export-bytes"]) > 0
        assert "content-length" not in r.headers  # streamed, not built first
        data = b"".join(r.iter_bytes())
    z = zipfile.ZipFile(io.BytesIO(data))
    names = z.namelist()
    assert "资料 Folder/页面 Page.md" in names and "Other.md" in names
    assert "[page](<资料 Folder/页面 Page.md#x>)" in z.read("Other.md").decode()
    assert w.c["owner"].get(f"/api/knowledge-bases/{kb['id']}/export").content == data  # byte-identical


def test_the_download_is_named_after_what_it_exports(w, content):
    """``filename*`` carries the title (any script); ``filename``, what clients reading only it
    (curl -OJ, wget) save as, is the title when it is plain ASCII, else ``export.zip``."""
    kb = w.new_kb(visibility="private", title="Team Docs (v2)")
    r = w.c["owner"].get(f"/api/knowledge-bases/{kb['id']}/export")
    assert r.headers["content-disposition"] == (
        "attachment; filename=\"Team Docs (v2).zip\"; filename*=UTF-8''Team%20Docs%20%28v2%29.zip"
    )
    _kb, folder, _page = content
    r = w.c["owner"].get(f"/api/documents/{folder['id']}/export")
    assert r.headers["content-disposition"] == (
        "attachment; filename=\"export.zip\"; filename*=UTF-8''%E8%B5%84%E6%96%99%20Folder.zip"
    )


def test_folder_export_is_its_subtree(w, content):
    _kb, folder, _page = content
    r = w.c["owner"].get(f"/api/documents/{folder['id']}/export")
    assert r.status_code == 200
    names = zipfile.ZipFile(io.BytesIO(r.content)).namelist()
    assert sorted(names) == ["openkb-export.json", "资料 Folder/", "资料 Folder/页面 Page.md"]


@pytest.mark.parametrize("who", ["member", "guest", "outsider", "other_tenant"])
def test_who_cannot_read_gets_404(w, content, who):
    kb, folder, _page = content
    for url in (f"/api/knowledge-bases/{kb['id']}/export", f"/api/documents/{folder['id']}/export"):
        r = w.c[who].get(url)
        assert r.status_code == 404, (who, r.text)
        assert r.json()["error"] == "NOT_FOUND"
    assert w.c["owner"].get(f"/api/documents/{uuid.uuid4()}/export").status_code == 404


def test_anonymous_gets_401(w, content):
    kb, _folder, _page = content
    assert w.anon.get(f"/api/knowledge-bases/{kb['id']}/export").status_code == 401


def test_import_job_takes_the_zip_as_it_is(w, content, worker):
    kb, _folder, _page = content
    data = w.c["owner"].get(f"/api/knowledge-bases/{kb['id']}/export").content
    empty = w.new_kb(visibility="private")
    r = post(w.c["owner"], empty["id"], [("export.zip", data)])
    assert r.status_code == 202, r.text
    job = wait_job(w.c["owner"], r.json()["id"])
    assert job["status"] == "succeeded", job
    assert {f["converter"] for f in job["files"] if f["type"] == "page"} == {"openkb-export"}
    again = w.c["owner"].get(f"/api/knowledge-bases/{empty['id']}/export").content
    a, b = zipfile.ZipFile(io.BytesIO(data)), zipfile.ZipFile(io.BytesIO(again))
    assert a.namelist() == b.namelist()
    for name in a.namelist():
        if name != "openkb-export.json":
            assert a.read(name) == b.read(name), name
    # a newer format is refused whole: the job fails and says why
    newer = io.BytesIO()
    with zipfile.ZipFile(newer, "w") as z:
        for name in a.namelist():
            body = a.read(name)
            if name == "openkb-export.json":
                m = json.loads(body)
                m["format_version"] = 99
                body = json.dumps(m).encode()
            z.writestr(name, body)
    r = post(w.c["owner"], w.new_kb(visibility="private")["id"], [("newer.zip", newer.getvalue())])
    job = wait_job(w.c["owner"], r.json()["id"])
    assert job["status"] == "failed" and "format version 99" in job["error"], job


def _exports_audited(engine, kb_id: str) -> int:
    with Session(engine) as s:
        return len(
            s.exec(
                select(AuditLog.id).where(
                    col(AuditLog.action) == "content.exported", col(AuditLog.object_id) == uuid.UUID(kb_id)
                )
            ).all()
        )


def test_a_large_download_is_one_request_and_one_audit_row(w, content, engine):
    """What the web app does for a zip too large to collect in the tab (ExportDownload.tsx):
    HEAD for the size, then the browser's own GET. Only the GET exports, so one audit row (the
    app used to GET, cancel, and GET again: two rows for one click)."""
    kb, _folder, _page = content
    url = f"/api/knowledge-bases/{kb['id']}/export"
    before = _exports_audited(engine, kb["id"])
    head = w.c["owner"].head(url)
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["x-export-bytes"]) > 0 and "filename*=UTF-8''" in head.headers["content-disposition"]
    assert _exports_audited(engine, kb["id"]) == before  # a size preview sends nothing, audits nothing
    with w.c["owner"].stream("GET", url) as r:
        assert r.status_code == 200 and r.headers["x-export-bytes"] == head.headers["x-export-bytes"]
        b"".join(r.iter_bytes())
    assert _exports_audited(engine, kb["id"]) == before + 1
    # the preview refuses as the export would
    assert w.c["member"].head(url).status_code == 404
    assert w.anon.head(url).status_code == 401
    assert w.c["owner"].head(f"/api/documents/{uuid.uuid4()}/export").status_code == 404
