"""POST /api/import-jobs run by a real worker: a Notion-style export zip (links, images, a CSV
database), several files into a folder, permissions, the source asset, and the imported pages
found by search (docs/importing.md#api-and-worker)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.importing import files

NOTION = {
    "Export-42/Team Wiki 1a2b.md": "# Team Wiki\n\nSee [Onboarding](Team%20Wiki%201a2b/Onboarding%203c4d.md) and "
    "the [tasks](Tasks%205e6f.csv).\n\n![diagram](Team%20Wiki%201a2b/diagram.png)\n",
    "Export-42/Team Wiki 1a2b/Onboarding 3c4d.md": "# Onboarding\n\nThe zebracorn handbook: 量子纠缠 explained.\n\n"
    "Back to [wiki](../Team%20Wiki%201a2b.md).\n",
    "Export-42/Tasks 5e6f.csv": "Name,Status\nWrite docs,Done\n",
}


def wait_job(c, job_id: str, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = c.get(f"/api/import-jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"import job {job_id} did not finish: {job}")


def post(c, kb_id: str, parts: list[tuple[str, bytes]], parent_id: str | None = None):
    data = {"knowledge_base_id": kb_id, **({"parent_id": parent_id} if parent_id else {})}
    return c.post("/api/import-jobs", data=data, files=[("file", (name, blob)) for name, blob in parts])


@pytest.fixture(scope="module")
def notion_job(w, worker):
    zipped = files.zip_of(
        {**{k: v.encode() for k, v in NOTION.items()}, "Export-42/Team Wiki 1a2b/diagram.png": files.png("blue")}
    )
    r = post(w.c["owner"], w.kb["id"], [("notion-export.zip", zipped)])
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "pending"
    return wait_job(w.c["owner"], r.json()["id"])


def test_notion_export_zip(w, notion_job):
    job = notion_job
    assert job["status"] == "succeeded", job
    by = {f["path"]: f for f in job["files"]}
    assert by["Export-42/Team Wiki 1a2b.md"]["status"] == "created"
    assert by["Export-42/Tasks 5e6f.csv"]["converter"] == "markitdown"
    assert len(job["document_ids"]) == 5  # 2 folders + 3 pages; the image is the wiki page's asset
    wiki = w.c["owner"].get(f"/api/documents/{by['Export-42/Team Wiki 1a2b.md']['document_id']}").json()
    onboarding = by["Export-42/Team Wiki 1a2b/Onboarding 3c4d.md"]["document_id"]
    tasks = by["Export-42/Tasks 5e6f.csv"]["document_id"]
    assert f"(openkb://document/{onboarding})" in wiki["markdown"]
    assert f"(openkb://document/{tasks})" in wiki["markdown"]
    assert "(asset://" in wiki["markdown"] and "diagram" in wiki["markdown"]
    table = w.c["owner"].get(f"/api/documents/{tasks}").json()
    assert "| Write docs" in table["markdown"]
    # the CSV's original is kept as its source asset, readable with the page
    src = table["metadata"]["import"]["source_asset_id"]
    assert w.c["owner"].get(f"/api/assets/{src}").content == NOTION["Export-42/Tasks 5e6f.csv"].encode()


def test_imported_pages_are_searchable(w, notion_job):
    onboarding = {f["path"]: f for f in notion_job["files"]}["Export-42/Team Wiki 1a2b/Onboarding 3c4d.md"]
    deadline = time.monotonic() + 180
    hits: list[Any] = []
    while time.monotonic() < deadline:
        hits = (
            w.c["owner"]
            .post("/api/search", json={"query": "zebracorn handbook", "knowledge_base_ids": [w.kb["id"]]})
            .json()["results"]
        )
        if any(h["document_id"] == onboarding["document_id"] for h in hits):
            break
        time.sleep(0.3)
    assert any(h["document_id"] == onboarding["document_id"] for h in hits), hits
    assert not w.c["outsider"].post("/api/search", json={"query": "zebracorn handbook"}).json()["results"]


def test_several_files_into_a_folder_and_who_may(w, worker):
    folder = w.doc("Imports", type="folder")
    parts = [
        ("papers/报告.docx", files.docx()),
        ("papers/notes.md", b"# Notes\n\nsee [report](%E6%8A%A5%E5%91%8A.docx)\n"),
    ]
    for who in ("outsider", "other_tenant"):
        r = post(w.c[who], w.kb["id"], parts, folder["id"])
        assert r.status_code == 404, (who, r.text)
    r = post(w.c["owner"], w.kb["id"], parts, folder["id"])
    assert r.status_code == 202, r.text
    job = wait_job(w.c["owner"], r.json()["id"])
    assert job["status"] == "succeeded", job
    assert w.c["admin"].get(f"/api/import-jobs/{job['id']}").status_code == 404  # the creator's only
    by = {f["path"]: f for f in job["files"]}
    report = w.c["owner"].get(f"/api/documents/{by['papers/报告.docx']['document_id']}").json()
    assert report["title"] == "季度报告 Q3" and report["path"][0]["id"] == folder["id"]
    notes = w.c["owner"].get(f"/api/documents/{by['papers/notes.md']['document_id']}").json()
    assert f"(openkb://document/{report['id']})" in notes["markdown"]


def test_a_broken_file_fails_the_job_with_per_file_reasons(w, worker):
    r = post(w.c["owner"], w.kb["id"], [("a.md", b"# fine\n"), ("b.md", b"\x00\x01binary")])
    job = wait_job(w.c["owner"], r.json()["id"])
    assert job["status"] == "failed" and job["error"] == "1 of 2 files failed"
    by = {f["path"]: f for f in job["files"]}
    assert by["a.md"]["status"] == "created" and "binary" in by["b.md"]["error"]


def test_a_zip_that_is_not_one_is_refused_with_the_upload(w):
    """A ``.zip`` whose bytes are no zip archive (a partial download, a renamed file) answers
    422 CONVERSION_FAILED at once instead of becoming one page of whatever it holds."""
    before = w.c["owner"].get("/api/import-jobs", params={"knowledge_base_id": w.kb["id"]}).json()
    r = post(w.c["owner"], w.kb["id"], [("export.zip", b"# not a zip at all\n")])
    assert r.status_code == 422 and r.json()["error"] == "CONVERSION_FAILED", r.text
    assert "export.zip is not a zip archive" in r.json()["detail"]
    after = w.c["owner"].get("/api/import-jobs", params={"knowledge_base_id": w.kb["id"]}).json()
    assert after == before  # no job, nothing stored


def test_a_job_whose_upload_was_pruned_still_reads(w, worker, engine, test_home):
    """After the retention the job's uploaded file goes (openkb.assets.prune_detached); the job's
    record stays, listed and read with ``source_asset_id: null``."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import text

    from openkb.assets import prune_detached
    from openkb.db import session_scope
    from openkb.storage import LocalBlobStore

    r = post(w.c["owner"], w.kb["id"], [("kept.md", b"# Kept\n\nafter its upload is gone\n")])
    job = wait_job(w.c["owner"], r.json()["id"])
    assert job["status"] == "succeeded" and job["source_asset_id"]
    long_ago = datetime(1990, 1, 1, tzinfo=UTC)  # before what other test files age their rows to
    with session_scope(engine) as s:
        s.execute(
            text("UPDATE document_assets SET detached_at = :w WHERE id = :a"),
            {"w": long_ago, "a": job["source_asset_id"]},
        )
    out = prune_detached(
        lambda: session_scope(engine),
        LocalBlobStore(test_home / "blobs"),
        older_than=timedelta(days=30),
        now=long_ago + timedelta(days=45),
    )
    assert out["rows"] == 1
    again = w.c["owner"].get(f"/api/import-jobs/{job['id']}")
    assert again.status_code == 200 and again.json()["source_asset_id"] is None, again.text
    assert again.json()["document_ids"] == job["document_ids"]
    listed = w.c["owner"].get("/api/import-jobs", params={"knowledge_base_id": w.kb["id"]})
    assert listed.status_code == 200, listed.text
    assert {j["id"]: j["source_asset_id"] for j in listed.json()["items"]}[job["id"]] is None
    assert w.c["owner"].get(f"/api/assets/{job['source_asset_id']}").status_code == 404


def test_jobs_are_listed_per_knowledge_base(w, worker):
    other = w.new_kb(visibility="workspace")
    here = wait_job(w.c["owner"], post(w.c["owner"], w.kb["id"], [("here.md", b"# Here\n")]).json()["id"])
    there = wait_job(w.c["owner"], post(w.c["owner"], other["id"], [("there.md", b"# There\n")]).json()["id"])

    def listed(kb_id: str) -> set[str]:
        r = w.c["owner"].get("/api/import-jobs", params={"knowledge_base_id": kb_id, "limit": 100})
        assert r.status_code == 200, r.text
        assert r.json()["total"] == len(r.json()["items"])
        return {j["id"] for j in r.json()["items"]}

    assert here["id"] in listed(w.kb["id"]) and there["id"] not in listed(w.kb["id"])
    assert listed(other["id"]) == {there["id"]}
    assert w.c["member"].get("/api/import-jobs", params={"knowledge_base_id": other["id"]}).json()["items"] == []
    r = w.c["owner"].get("/api/import-jobs", params={"knowledge_base_id": "nope"})
    assert r.status_code == 422 and r.json()["error"] == "VALIDATION_ERROR"
