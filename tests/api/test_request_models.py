"""Request bodies: an unknown field is a 422 naming it, never dropped; broken JSON is a 400.

Regression for issue 10 §6: ``PUT /api/documents/:id`` with ``{"markdown": ...}`` answered 200
and saved nothing, and some routes accepted unknown fields while others refused them.
"""

from __future__ import annotations

import typing
from typing import Any

from fastapi.routing import APIRoute
from pydantic import BaseModel

from server.schemas import RequestModel
from tests.api.helpers import app_routes
from tests.content.http_world import sha

# Not ours to shape: Dify's External Knowledge request (parsed by hand in server/routers/dify.py;
# newer Dify versions add fields, and refusing them would break every Dify app using OpenKB).
FOREIGN_WIRE_FORMATS = {"/retrieval"}
# Taken as a plain JSON object and validated by a RequestModel inside the route (so that a
# credential-like field is refused with its own message before any "unknown field").
RAW_BODIES = {"/api/admin/milvus/index-profiles"}


def _models(tp: Any) -> list[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for arg in typing.get_args(tp) for m in _models(arg)]


def _all_models(model: type[BaseModel], seen: set[type[BaseModel]]) -> None:
    if model in seen:
        return
    seen.add(model)
    for f in model.model_fields.values():
        for m in _models(f.annotation):
            _all_models(m, seen)


def test_every_request_body_model_forbids_unknown_fields(app):
    """Walks the app's routes, so a route added later can't forget (nested models included)."""
    checked = 0
    for route in app_routes(app):
        if not isinstance(route, APIRoute) or route.body_field is None or route.path in FOREIGN_WIRE_FORMATS:
            continue
        seen: set[type[BaseModel]] = set()
        for m in _models(route.body_field.field_info.annotation):
            _all_models(m, seen)
        if not seen:
            assert route.path in RAW_BODIES, f"{route.path}: a body that is no pydantic model"
            continue
        for m in seen:
            if m.__name__.startswith("Body_"):  # FastAPI's wrapper of several embedded body params
                continue
            assert m.model_config.get("extra") == "forbid", f"{sorted(route.methods)} {route.path}: {m.__name__}"
            assert issubclass(m, RequestModel), f"{route.path}: {m.__name__} should derive from RequestModel"
            checked += 1
    assert checked >= 30


def test_openapi_documents_closed_bodies(http):
    """Clients generated from /api/openapi.json see the same rule: additionalProperties false."""
    spec = http.get("/api/openapi.json").json()
    comps = spec["components"]["schemas"]

    def walk(schema: dict[str, Any], where: str, seen: set[str]) -> None:
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            if name not in seen:
                seen.add(name)
                walk(comps[name], f"{where} -> {name}", seen)
            return
        if "properties" in schema:
            assert schema.get("additionalProperties") is False, where
            for p in schema["properties"].values():
                walk(p, where, seen)
        for key in ("anyOf", "oneOf", "allOf"):
            for s in schema.get(key, []):
                walk(s, where, seen)
        if isinstance(schema.get("items"), dict):
            walk(schema["items"], where, seen)

    n = 0
    for path, ops in spec["paths"].items():
        if path in FOREIGN_WIRE_FORMATS:
            continue
        for method, op in ops.items():
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                walk(body["schema"], f"{method.upper()} {path}", set())
                assert "400" in op["responses"], f"{method.upper()} {path} does not document 400 INVALID_JSON"
                n += 1
    assert n >= 30


def test_markdown_on_document_update_is_refused_and_points_to_versions(w):
    page = w.doc("Keep me", markdown="# original\n")
    r = w.c["owner"].put(f"/api/documents/{page['id']}", json={"title": "Renamed", "markdown": "# replaced\n"})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "VALIDATION_ERROR"
    assert body["detail"].startswith("markdown: unknown field")
    assert "POST /api/documents/{id}/versions" in body["detail"] and "accepted fields: title" in body["detail"]
    after = w.c["owner"].get(f"/api/documents/{page['id']}").json()
    assert after["title"] == "Keep me" and after["markdown"] == "# original\n"  # nothing half-applied
    # the documented way works
    r = w.save(page, "# replaced\n")
    assert r.status_code == 201, r.text


def test_unknown_fields_are_named_on_several_routes(w):
    owner = w.c["owner"]
    page = w.doc("Page", markdown="x\n")
    cases = [
        ("post", "/api/workspaces", {"name": "W", "colour": "red"}, "colour"),
        ("post", "/api/knowledge-bases", {"workspace_id": w.ws["id"], "title": "K", "model": "x"}, "model"),
        ("post", "/api/documents", {"knowledge_base_id": w.kb["id"], "title": "T", "content": "x"}, "content"),
        (
            "post",
            f"/api/documents/{page['id']}/versions",
            {
                "base_version_id": page["current_version_id"],
                "markdown": "y\n",
                "markdown_hash": sha("y\n"),
                "force": True,
            },
            "force",
        ),
        ("put", f"/api/knowledge-bases/{w.kb['id']}/documents/by-key/k1", {"title": "T", "body": "x"}, "body"),
        (
            "post",
            "/api/search",
            {"query": "x", "filters": {"time_range": {"since": "2020-01-01"}}},
            "filters.time_range.since",
        ),
        ("post", "/api/changes/revert", {"run_id": "r", "dry_run": True}, "dry_run"),
        ("post", "/api/auth/login", {"email": "a@b.example", "password": "x", "remember_me": True}, "remember_me"),
    ]
    for method, url, payload, field in cases:
        r = getattr(owner, method)(url, json=payload)
        assert r.status_code == 422, (url, r.text)
        assert r.json()["error"] == "VALIDATION_ERROR", url
        assert r.json()["detail"].startswith(f"{field}: unknown field"), (url, r.json()["detail"])


def test_unknown_field_reported_before_a_missing_one(w):
    """A misspelt field name explains the missing one: name the unknown field first."""
    r = w.c["owner"].post("/api/documents", json={"knowledge_base_id": w.kb["id"], "titel": "T"})
    assert r.status_code == 422
    assert r.json()["detail"].startswith("titel: unknown field")
    assert {tuple(e["loc"]) for e in r.json()["errors"]} == {("body", "titel"), ("body", "title")}


def test_unknown_upload_form_field(w):
    r = w.c["owner"].post("/api/uploads", files={"file": ("a.txt", b"hi", "text/plain")}, data={"folder": "x"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("folder: unknown field")


def test_invalid_json_is_400_with_line_and_column(w):
    r = w.c["owner"].post(
        "/api/documents",
        content=b'{"title": "x",\n  "knowledge_base_id": }',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400, r.text
    assert r.json() == {"error": "INVALID_JSON", "detail": "line 2, column 24: Expecting value"}
    r = w.anon.post(
        "/api/auth/login",
        content=b'{"email": "a@b.example", "password": "x"',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400 and r.json()["error"] == "INVALID_JSON"
    assert r.json()["detail"].startswith("line 1, column 41: ")


def test_body_that_is_not_utf8_is_invalid_json(w):
    r = w.anon.post("/api/auth/login", content=b'{"email": "\x80"}', headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "INVALID_JSON"


def test_non_object_and_wrongly_typed_bodies(w):
    owner = w.c["owner"]
    for payload, kind in (([1, 2], "an array"), ("text", "a string"), (7, "a number")):
        r = owner.post("/api/workspaces", json=payload)
        assert r.status_code == 422, r.text
        assert r.json() == {
            **r.json(),
            "error": "VALIDATION_ERROR",
            "detail": f"the request body must be a JSON object, not {kind}",
        }
    r = owner.post("/api/workspaces", content=b"name=W", headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 422
    assert "Content-Type: application/json" in r.json()["detail"]
    assert "application/x-www-form-urlencoded" in r.json()["detail"]
    r = owner.post("/api/workspaces")
    assert r.status_code == 422 and r.json()["detail"].startswith("the request body is missing")
