"""Keyed upsert over HTTP (created/updated/unchanged, queue assertions) and every limit's code."""

from __future__ import annotations

from tests.content.http_world import recording_queue, sha


def test_keyed_upsert(w):
    o = w.c["owner"]
    url = f"/api/knowledge-bases/{w.kb['id']}/documents/by-key/notion/page-1"
    body = {"title": "日报 2026-09-29", "markdown": "# 今天\n\n- a\n", "metadata": {"date": "2026-09-29"}}
    with recording_queue() as q:
        r = o.put(url, json=body)
    assert r.status_code == 200 and r.json()["status"] == "created", r.text
    created = r.json()
    assert q.jobs == [("index_document", {"document_id": created["document_id"]})]
    before = o.get("/api/changes", params={"object_id": created["document_id"]}).json()["items"]

    with recording_queue() as q:
        r = o.put(url, json=body)
    assert r.json() == {
        **r.json(),
        "status": "unchanged",
        "document_id": created["document_id"],
        "version_id": created["version_id"],
    }
    assert q.jobs == []  # unchanged enqueues nothing
    after = o.get("/api/changes", params={"object_id": created["document_id"]}).json()["items"]
    assert len(after) == len(before)  # ... and writes nothing

    with recording_queue() as q:
        r = o.put(url, json={**body, "markdown": "# 今天\n\n- a\n- b\n"})
    assert r.json()["status"] == "updated" and r.json()["version_id"] != created["version_id"]
    assert q.jobs == [("index_document", {"document_id": created["document_id"]})]
    got = o.get(url).json()
    assert got["external_key"] == "notion/page-1" and got["version_no"] == 2 and got["metadata"] == body["metadata"]

    r = w.c["member"].put(url, json=body)
    assert r.status_code == 403
    r = w.c["other_tenant"].put(url, json=body)
    assert r.status_code == 404
    r = o.put(f"/api/knowledge-bases/{w.kb['id']}/documents/by-key/hashed", json={**body, "markdown_hash": "00"})
    assert r.status_code == 422 and r.json()["error"] == "MARKDOWN_HASH_MISMATCH"
    o.delete(f"/api/documents/{created['document_id']}")
    r = o.put(url, json=body)
    assert r.status_code == 409 and r.json()["error"] == "DOCUMENT_IN_TRASH"


def test_limits_each_with_its_code(w, settings):
    o = w.c["owner"]
    page = w.doc("P", markdown="x\n")
    kb = w.kb["id"]
    cases = [
        (o.post("/api/documents", json={"knowledge_base_id": kb, "title": "t" * 1001}), 413, "TITLE_TOO_LONG"),
        (
            o.post("/api/documents", json={"knowledge_base_id": kb, "title": "m", "metadata": {"x": "y" * 65_600}}),
            413,
            "METADATA_TOO_LARGE",
        ),
        (o.post("/api/workspaces", json={"name": "n" * 1001}), 413, "NAME_TOO_LONG"),
        (o.put(f"/api/knowledge-bases/{kb}/documents/by-key/{'k' * 1001}", json={"title": "t"}), 413, "NAME_TOO_LONG"),
        (o.post("/api/documents", json={"knowledge_base_id": kb, "title": "nul\u0000"}), 422, "VALIDATION_ERROR"),
        (
            o.put(f"/api/documents/{page['id']}", json={"tags": ["x"] * 0 + [f"t{i}" for i in range(300)]}),
            422,
            "TOO_MANY_TAGS",
        ),
    ]
    for r, code, err in cases:
        assert (r.status_code, r.json()["error"]) == (code, err), r.text
    assert cases[0][0].json()["max"] == settings.max_title_chars
    # duplicates (after trimming) count once; a list far past the limit is refused in time linear
    # in its length (duplicates used to be found by a list scan: 40,000 tags took 10 s, these
    # 200,000 would have taken minutes of a server thread)
    many = [f" t{i % 200_000} " for i in range(400_000)]
    r = o.put(f"/api/documents/{page['id']}", json={"tags": many})
    assert (r.status_code, r.json()["error"], r.json()["actual"]) == (422, "TOO_MANY_TAGS", 200_000)
    r = o.put(f"/api/documents/{page['id']}", json={"tags": [" b", "a", "b ", "a", "c"]})
    assert r.status_code == 200 and r.json()["tags"] == ["b", "a", "c"]
    big = "a" * (settings.max_markdown_chars + 1)
    r = o.post(
        f"/api/documents/{page['id']}/versions",
        json={"base_version_id": page["current_version_id"], "markdown": big, "markdown_hash": sha(big)},
    )
    assert (
        r.status_code == 413 and r.json()["error"] == "MARKDOWN_TOO_LARGE" and r.json()["limit"] == "max_markdown_chars"
    )
    # folder depth: the default limit is 10 levels
    parent = None
    for i in range(settings.max_folder_depth):
        parent = w.doc(f"L{i}", type="folder", **({"parent_id": parent["id"]} if parent else {}))
    r = o.post("/api/documents", json={"knowledge_base_id": kb, "title": "too deep", "parent_id": parent["id"]})
    assert r.status_code == 422 and r.json()["error"] == "FOLDER_DEPTH_EXCEEDED"


def test_a_title_is_one_line(w):
    """Line breaks in a title (pasted from a multi-line source, sent by a client) become one
    space on every write path, so lists, exports and file names never get a title in pieces."""
    o = w.c["owner"]
    kb = w.kb["id"]
    r = o.post(
        "/api/documents", json={"knowledge_base_id": kb, "title": " Q3 \r\n  plan\u2028draft ", "markdown": "x\n"}
    )
    assert r.status_code == 201 and r.json()["title"] == "Q3 plan draft", r.text
    doc = r.json()
    r = o.put(f"/api/documents/{doc['id']}", json={"title": "two\n\nparagraphs"})
    assert r.status_code == 200 and r.json()["title"] == "two paragraphs"
    assert o.get(f"/api/documents/{doc['id']}").json()["title"] == "two paragraphs"
    r = o.put(f"/api/knowledge-bases/{kb}", json={"title": "Hand\nbook"})
    assert r.status_code == 200 and r.json()["title"] == "Hand book"
    # a keyed upsert sending the same multi-line title again changes nothing
    url = f"/api/knowledge-bases/{kb}/documents/by-key/one-line"
    body = {"title": "日报\n2026-12-04", "markdown": "a\n"}
    first = o.put(url, json=body).json()
    assert o.get(url).json()["title"] == "日报 2026-12-04"
    assert o.put(url, json=body).json()["status"] == "unchanged", first
    # only breaks: still empty
    r = o.post("/api/documents", json={"knowledge_base_id": kb, "title": "\n\r\n"})
    assert r.status_code == 422 and r.json()["error"] == "VALIDATION_ERROR"
