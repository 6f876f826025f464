"""Every non-upload request body is capped before it is parsed (413 ``PAYLOAD_TOO_LARGE``),
chunked bodies without Content-Length included; uploads and Dify keep their own limits."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlparse

import pytest


@pytest.fixture()
def small_limit(app_ctx, monkeypatch):
    monkeypatch.setattr(app_ctx.settings, "max_json_body_bytes", 4096)
    return 4096


def _raw(live_server, method, path, headers, body_chunks=None, body=None):
    """A request with exact framing (httpx always sets Content-Length for bytes bodies)."""
    u = urlparse(live_server)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        if body_chunks is not None:
            conn.putrequest(method, path)
            for k, v in {**headers, "Transfer-Encoding": "chunked"}.items():
                conn.putheader(k, v)
            conn.endheaders()
            try:
                for chunk in body_chunks:
                    conn.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                conn.send(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may answer and close before the whole body is sent
        else:
            conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, json.loads(r.read() or b"null"), dict(r.getheaders())
    finally:
        conn.close()


def test_body_over_the_limit_is_413_before_parsing(w, small_limit, live_server):
    o = w.c["owner"]
    page = w.doc("P", markdown="x\n")
    big = "a" * (small_limit + 10)
    url = f"/api/documents/{page['id']}/versions"
    r = o.post(url, json={"base_version_id": page["current_version_id"], "markdown": big, "markdown_hash": "0" * 64})
    assert r.status_code == 413, r.text
    assert r.json() == {
        "error": "PAYLOAD_TOO_LARGE",
        "detail": f"the request body is larger than {small_limit} bytes",
        "limit": "max_json_body_bytes",
        "max": small_limit,
    }
    assert r.headers.get("x-request-id")
    # refused before parsing: not even a malformed body or an unknown route gets further
    r = o.post(url, content=b"{" * (small_limit + 1), headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"] == "PAYLOAD_TOO_LARGE"
    r = w.anon.post("/api/auth/login", content=b"x" * (small_limit + 1))
    assert r.status_code == 413
    # under the limit: business as usual
    assert w.save(page, "small\n").status_code == 201
    assert w.c["owner"].get(f"/api/documents/{page['id']}").json()["markdown"] == "small\n"

    auth = dict(o.headers)
    headers = {"Authorization": auth["authorization"], "Content-Type": "application/json"}
    # chunked, no Content-Length: cut off as soon as it passes the limit
    chunks = [b'{"title": "' + b"t" * 1000] + [b"t" * 1000] * 10 + [b'"}']
    status, body, _ = _raw(live_server, "PUT", f"/api/documents/{page['id']}", headers, body_chunks=chunks)
    assert status == 413 and body["error"] == "PAYLOAD_TOO_LARGE"
    # a small chunked body passes through intact
    status, body, _ = _raw(
        live_server, "PUT", f"/api/documents/{page['id']}", headers, body_chunks=[b'{"title": ', b'"Chunked title"}']
    )
    assert status == 200 and body["title"] == "Chunked title", body


def test_uploads_and_dify_keep_their_own_limits(w, small_limit, live_server):
    import io

    o = w.c["owner"]
    page = w.doc("P", markdown="x\n")
    r = o.post(
        "/api/uploads",
        data={"document_id": page["id"]},
        files={"file": ("a.bin", io.BytesIO(b"\0" * (small_limit * 4)), "application/octet-stream")},
    )
    assert r.status_code == 201, r.text  # max_upload_bytes applies, not the JSON cap
    r = w.anon.post("/retrieval", content=b"x" * (small_limit + 1), headers={"content-type": "application/json"})
    assert "error_code" in r.json()  # Dify's own shape, from its own check


def test_default_limit_fits_a_full_markdown_body(settings):
    # every one of 5,000,000 characters escaped as \\uXXXX still fits, with room for the rest
    assert settings.json_body_limit >= settings.max_markdown_chars * 6 + 64 * 1024
    assert settings.json_body_limit < settings.max_upload_bytes


def test_413_is_documented_on_every_operation_with_a_body(http):
    spec = http.get("/api/openapi.json").json()
    seen = 0
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            if "requestBody" not in op:
                continue
            # every body is bounded in time, the streamed ones (uploads, imports, Dify) included
            assert "REQUEST_TIMEOUT" in op["responses"]["408"]["x-error-codes"], (method, path)
            if path in ("/retrieval", "//retrieval", "/retrieval/retrieval"):
                assert "413" not in op["responses"]
                continue
            seen += 1
            ref = op["responses"]["413"]["content"]["application/json"]["schema"]["$ref"]
            assert ref.endswith("/ErrorBody"), (method, path)
    assert seen > 20
