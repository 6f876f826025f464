"""Uploads into the blob store and reads after the document check; the upload size limit."""

from __future__ import annotations

import io

import httpx


def test_upload_and_read(w):
    o = w.c["owner"]
    page = w.doc("P", markdown="p\n")
    data = bytes(range(256)) * 100
    r = o.post(
        "/api/uploads", data={"document_id": page["id"]}, files={"file": ("图 1.png", io.BytesIO(data), "image/png")}
    )
    assert r.status_code == 201, r.text
    a = r.json()
    assert a["size_bytes"] == len(data) and a["ref"] == f"asset://{a['id']}" and a["filename"] == "图 1.png"
    r = w.c["member"].get(f"/api/assets/{a['id']}")
    assert r.status_code == 200 and r.content == data
    assert r.headers["content-type"] == "image/png" and r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-disposition"].startswith("inline")
    r = w.c["member"].post(
        "/api/uploads", data={"document_id": page["id"]}, files={"file": ("x.txt", io.BytesIO(b"x"), "text/plain")}
    )
    assert r.status_code == 403  # a reader cannot attach files
    # unattached uploads (import sources) are the uploader's only
    r = o.post("/api/uploads", files={"file": ("evil.html", io.BytesIO(b"<script>alert(1)</script>"), "text/html")})
    own = r.json()
    assert own["document_id"] is None
    r = o.get(f"/api/assets/{own['id']}")
    assert r.status_code == 200 and r.headers["content-disposition"].startswith("attachment")
    assert r.headers["content-type"].startswith("application/octet-stream")  # never served as HTML
    assert w.c["member"].get(f"/api/assets/{own['id']}").status_code == 404
    # losing read access to the document loses the asset
    o.delete(f"/api/documents/{page['id']}")
    assert w.c["member"].get(f"/api/assets/{a['id']}").status_code == 404
    assert o.delete(f"/api/assets/{own['id']}").status_code == 204
    assert o.get(f"/api/assets/{own['id']}").status_code == 404


def test_upload_errors(w, settings):
    o = w.c["owner"]
    r = o.post("/api/uploads", json={"file": "nope"})
    assert r.status_code == 415 and r.json()["error"] == "UNSUPPORTED_MEDIA_TYPE"
    r = o.post("/api/uploads", data={"other": "x"}, files={"not_file": ("a", io.BytesIO(b"a"), "text/plain")})
    assert r.status_code == 422
    r = w.anon.post("/api/uploads", files={"file": ("a", io.BytesIO(b"a"), "text/plain")})
    assert r.status_code == 401
    big = settings.max_upload_bytes + 1
    r = o.post("/api/uploads", files={"file": ("big.bin", io.BytesIO(b"\0" * big), "application/octet-stream")})
    assert r.status_code == 413 and r.json()["error"] == "UPLOAD_TOO_LARGE"

    def chunks():  # no Content-Length: the limit still holds while streaming
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="s.bin"\r\n\r\n'
        sent = 0
        while sent <= big:
            yield b"\0" * (1 << 20)
            sent += 1 << 20
        yield b"\r\n--b--\r\n"

    r = httpx.post(
        w.base + "/api/uploads",
        content=chunks(),
        timeout=60,
        headers={**dict(o.headers), "Content-Type": "multipart/form-data; boundary=b"},
    )
    assert r.status_code == 413 and r.json()["error"] == "UPLOAD_TOO_LARGE"
