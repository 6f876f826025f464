"""``on_unsupported`` on POST /api/documents and the keyed upsert (docs/importing.md#api-writers):
``reject`` (the default) keeps refusing what the editor cannot keep; ``convert`` repairs it as an
import does and answers the repairs."""

from __future__ import annotations

from tests.content.http_world import sha

RAW = "---\ntitle: x\ntags: [a]\n---\n# Title\n\none<br>two <span>kept</span>\n\n<!-- note -->\n"


def test_reject_is_the_default_and_convert_repairs(w):
    r = w.c["owner"].post("/api/documents", json={"knowledge_base_id": w.kb["id"], "title": "Raw", "markdown": RAW})
    assert r.status_code == 422 and r.json()["error"] == "MARKDOWN_DIALECT_ERROR"
    r = w.c["owner"].post(
        "/api/documents",
        json={
            "knowledge_base_id": w.kb["id"],
            "title": "Raw",
            "markdown": RAW,
            "markdown_hash": sha(RAW),
            "on_unsupported": "convert",
        },
    )
    assert r.status_code == 201, r.text
    doc = r.json()
    assert doc["markdown"] == "# Title\n\none\\\ntwo kept\n"
    assert doc["tags"] == ["a"] and doc["metadata"] == {"front_matter": {"title": "x"}}
    assert any("comment dropped" in x for x in doc["warnings"]) and any("hard break" in x for x in doc["warnings"])
    bad = w.c["owner"].post(
        "/api/documents",
        json={
            "knowledge_base_id": w.kb["id"],
            "title": "Raw",
            "markdown": RAW,
            "markdown_hash": "0" * 64,
            "on_unsupported": "convert",
        },
    )
    assert bad.status_code == 422 and bad.json()["error"] == "MARKDOWN_HASH_MISMATCH"


def test_keyed_upsert_converts_and_stays_idempotent(w):
    url = f"/api/knowledge-bases/{w.kb['id']}/documents/by-key/ext/raw-1"
    body = {"title": "Raw", "markdown": RAW, "on_unsupported": "convert"}
    assert w.c["owner"].put(url, json={"title": "Raw", "markdown": RAW}).status_code == 422
    first = w.c["owner"].put(url, json=body)
    assert first.status_code == 200 and first.json()["status"] == "created", first.text
    assert first.json()["warnings"]
    again = w.c["owner"].put(url, json=body).json()
    assert again["status"] == "unchanged" and again["document_id"] == first.json()["document_id"]
