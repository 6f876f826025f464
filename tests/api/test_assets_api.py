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


def _upload(w, data: bytes, name: str = "clip.mp4", mime: str = "video/mp4") -> dict:
    page = w.doc("Media", markdown="m\n")
    r = w.c["owner"].post(
        "/api/uploads", data={"document_id": page["id"]}, files={"file": (name, io.BytesIO(data), mime)}
    )
    assert r.status_code == 201, r.text
    return r.json()


def test_ranges_and_revalidation(w):
    """A player seeks with Range (206), a browser revalidates with If-None-Match (304); both
    only after the read check (docs/api.md#assets)."""
    data = bytes(range(256)) * 1000  # 256,000 bytes: several chunks of the store
    a = _upload(w, data)
    url = f"/api/assets/{a['id']}"
    m = w.c["member"]
    whole = m.get(url)
    etag = whole.headers["etag"]
    assert whole.status_code == 200 and whole.content == data and whole.headers["accept-ranges"] == "bytes"
    assert etag == f'"{a["sha256"]}"'
    for header, first, last in (
        ("bytes=0-0", 0, 0),
        ("bytes=100-70099", 100, 70_099),  # across the store's 64 KB chunks
        ("bytes=255990-", 255_990, 255_999),
        ("bytes=-10", 255_990, 255_999),
        ("bytes=250000-999999999", 250_000, 255_999),  # the end is cut to the asset's
        ("bytes=-999999", 0, 255_999),
        ("BYTES = 5 - 9", 5, 9),
    ):
        r = m.get(url, headers={"Range": header})
        assert r.status_code == 206, (header, r.status_code)
        assert r.content == data[first : last + 1], header
        assert r.headers["content-range"] == f"bytes {first}-{last}/{len(data)}", header
        assert r.headers["content-length"] == str(last - first + 1) and r.headers["etag"] == etag
    for header in ("bytes=0-1,5-9", "items=0-9", "bytes=9-5", "bytes=x-", "bytes=-", "bytes 0-9"):
        r = m.get(url, headers={"Range": header})  # not served as a range: the whole, as RFC 9110 allows
        assert r.status_code == 200 and r.content == data, header
    for header in ("bytes=256000-", "bytes=999999999999999999999999-", "bytes=-0"):
        r = m.get(url, headers={"Range": header})
        assert r.status_code == 416 and r.json()["error"] == "RANGE_NOT_SATISFIABLE", header
        assert r.headers["content-range"] == f"bytes */{len(data)}"
    # If-Range: the range only when the client's copy is this asset
    assert m.get(url, headers={"Range": "bytes=0-9", "If-Range": etag}).status_code == 206
    r = m.get(url, headers={"Range": "bytes=0-9", "If-Range": '"something-else"'})
    assert r.status_code == 200 and r.content == data
    # revalidation
    for inm in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        r = m.get(url, headers={"If-None-Match": inm})
        assert r.status_code == 304 and r.content == b"" and r.headers["etag"] == etag, inm
    assert m.get(url, headers={"If-None-Match": '"other"'}).status_code == 200
    # HEAD: the size and validator without the bytes (server/head.py)
    r = m.head(url)
    assert r.status_code == 200 and r.content == b"" and r.headers["content-length"] == str(len(data))
    assert r.headers["etag"] == etag and r.headers["accept-ranges"] == "bytes"
    r = m.head(url, headers={"Range": "bytes=-10"})
    assert r.status_code == 206 and r.headers["content-range"] == f"bytes 255990-255999/{len(data)}"
    assert w.c["outsider"].head(url).status_code == 404
    # an outsider learns nothing: no range, no 304, no ETag
    for c in (w.c["outsider"], w.c["other_tenant"], w.anon):
        for h in ({"Range": "bytes=0-9"}, {"If-None-Match": etag}, {"Range": "bytes=999999999-"}):
            r = c.get(url, headers=h)
            assert r.status_code == 404 and "etag" not in r.headers, (h, r.status_code)


def test_ranges_through_a_share_link(w):
    data = b"0123456789" * 10
    a = _upload(w, data, "notes.pdf", "application/pdf")
    r = w.c["owner"].post(f"/api/objects/document/{a['document_id']}/share-links", json={})
    assert r.status_code == 201, r.text
    url = f"/api/share/{r.json()['token']}/assets/{a['id']}"
    r = w.anon.get(url, headers={"Range": "bytes=10-19"})
    assert r.status_code == 206 and r.content == b"0123456789" and r.headers["content-range"] == "bytes 10-19/100"
    assert w.anon.get(url, headers={"If-None-Match": r.headers["etag"]}).status_code == 304
    other = _upload(w, b"private")  # a page the link does not open
    r = w.anon.get(url.replace(a["id"], other["id"]), headers={"Range": "bytes=0-1"})
    assert r.status_code == 404
