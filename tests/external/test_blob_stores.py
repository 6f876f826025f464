"""Assets against both blob stores (the local folder and S3 on a loopback server): written,
read back only through the permission check, deleted when the recording transaction rolls back,
and downloaded proxied (local) or through a presigned redirect (S3) that keeps the safe headers."""

from __future__ import annotations

import dataclasses
import io
import threading
import time
import uuid

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from openkb.assets import access_asset, upload_asset
from openkb.content import Actor
from openkb.db import session_scope
from openkb.errors import NotFound
from openkb.models import DocumentAsset
from openkb.permissions import Principal
from tests.content.http_world import HttpWorld
from tests.factories import make_doc, make_kb, make_tenant, make_user, make_workspace


def _exists(blobs, key: str) -> bool:
    try:
        b"".join(blobs.open(key))
        return True
    except NotFound:
        return False


def test_put_read_delete_and_check(blobs):
    data = bytes(range(256)) * 5000  # > 1 MiB: several chunks each way
    key = f"tenant/{uuid.uuid4()}/{uuid.uuid4()}"
    size, digest = blobs.put(key, io.BytesIO(data), "image/png")
    assert size == len(data)
    assert b"".join(blobs.open(key)) == data
    n = len(data)
    for start, length in ((0, 1), (65_535, 2), (100, 200_000), (n - 10, 10), (n - 10, None), (70_000, None), (0, n)):
        got = b"".join(blobs.open(key, start, length))  # a part: what an HTTP range reads
        assert got == data[start : None if length is None else start + length], (start, length)
    import hashlib

    assert digest == hashlib.sha256(data).hexdigest()
    assert blobs.check()
    assert blobs.exists(key) and not blobs.exists(key + "-other")
    blobs.delete(key)
    assert not _exists(blobs, key) and not blobs.exists(key)
    with pytest.raises(NotFound):
        blobs.open(key)
    blobs.delete(key)  # deleting what is gone is not an error (a retried cleanup)


@pytest.fixture()
def world(committed):
    with committed() as s:
        t = make_tenant(s)
        owner = make_user(s, t)
        outsider = make_user(s, t)
        ws = make_workspace(s, t, owner)
        doc = make_doc(s, make_kb(s, ws, owner, visibility="private"), owner)
        s.commit()
        return {"owner": Principal.user(owner, t.id), "outsider": Principal.user(outsider, t.id), "doc_id": doc.id}


def test_upload_is_read_through_the_permission_check_and_removed_on_rollback(engine, world, blobs):
    with session_scope(engine) as s:
        a = upload_asset(
            s,
            Actor.of(world["owner"]),
            blobs,
            io.BytesIO(b"\x89PNG kept"),
            size=None,
            filename="a.png",
            content_type="image/png",
            document_id=world["doc_id"],
        )
        kept = (a.id, a.object_key)
    with session_scope(engine) as s:
        row = access_asset(s, world["owner"], kept[0])
        assert b"".join(blobs.open(row.object_key)) == b"\x89PNG kept"
        with pytest.raises(NotFound):  # the store is reached only after this check
            access_asset(s, world["outsider"], kept[0])

    with pytest.raises(DBAPIError), session_scope(engine) as s:
        a = upload_asset(
            s,
            Actor.of(world["owner"]),
            blobs,
            io.BytesIO(b"\x89PNG lost"),
            size=None,
            filename="b.png",
            content_type="image/png",
            document_id=world["doc_id"],
        )
        lost = (a.id, a.object_key)
        assert _exists(blobs, lost[1])
        s.execute(text("SELECT 1 / 0"))  # the request fails after the upload was recorded
    assert not _exists(blobs, lost[1])
    assert _exists(blobs, kept[1])
    with session_scope(engine) as s:
        assert s.get(DocumentAsset, lost[0]) is None


def test_the_same_bytes_share_one_object_until_the_last_row_goes(engine, world, blobs):
    """Both stores: a second upload of the same bytes points at the first one's object, which
    stays while any row uses it (openkb/assets.py)."""
    from openkb.assets import delete_asset

    data = b"\x89PNG shared " + uuid.uuid4().bytes
    actor = Actor.of(world["owner"])
    rows = []
    for name in ("a.png", "b.png"):
        with session_scope(engine) as s:
            a = upload_asset(
                s,
                actor,
                blobs,
                io.BytesIO(data),
                size=len(data),
                filename=name,
                content_type="image/png",
                document_id=world["doc_id"],
            )
            rows.append((a.id, a.object_key))
    (first, key), (second, key2) = rows
    assert key2 == key and first != second
    assert not blobs.exists(f"tenant/{world['owner'].tenant_id}/{second}")  # its own copy was not kept
    with session_scope(engine) as s:
        delete_asset(s, actor, blobs, first)
    assert blobs.exists(key)
    with session_scope(engine) as s:
        assert b"".join(blobs.open(access_asset(s, world["owner"], second).object_key)) == data
        delete_asset(s, actor, blobs, second)
    assert not blobs.exists(key)


_FULL_DISK = """
import io, resource, signal, sys, tempfile
from pathlib import Path
from openkb.storage import LocalBlobStore
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails (EFBIG), as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
root = Path(sys.argv[1])
try:
    LocalBlobStore(root).put("tenant/t/a", io.BytesIO(b"x" * (1 << 20)), "image/png")
except Exception as exc:
    print(type(exc).__name__, exc.code, exc.detail)
print(sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()))
"""


def test_a_local_write_that_fails_says_why_and_leaves_no_file(tmp_path):
    """A full disk mid-upload: ServiceUnavailable (503 over HTTP) naming the cause, like an
    unreachable S3, not an OSError answered 500; and no half-written temporary file stays."""
    import subprocess
    import sys

    got = subprocess.run([sys.executable, "-c", _FULL_DISK, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    first, files = got.stdout.splitlines()
    assert first == "ServiceUnavailable SERVICE_UNAVAILABLE the blob store cannot write: File too large"
    assert files == "[]"


def test_an_upload_the_store_cannot_write_records_nothing(engine, world, tmp_path):
    from openkb.errors import ServiceUnavailable
    from openkb.storage import LocalBlobStore

    (tmp_path / "not-a-folder").write_text("a file where the store's folder should be")
    with pytest.raises(ServiceUnavailable, match="the blob store cannot write"), session_scope(engine) as s:
        upload_asset(
            s,
            Actor.of(world["owner"]),
            LocalBlobStore(tmp_path / "not-a-folder"),
            io.BytesIO(b"\x89PNG"),
            size=None,
            filename="c.png",
            content_type="image/png",
            document_id=world["doc_id"],
        )
    with session_scope(engine) as s:
        assert not s.execute(
            text("SELECT count(*) FROM document_assets WHERE document_id = :d AND filename = 'c.png'"),
            {"d": world["doc_id"]},
        ).scalar_one()


@pytest.fixture(scope="module")
def s3_server_base(app_ctx, s3_settings):
    """A second live API in this process whose context stores assets in S3 (same database)."""
    import uvicorn

    from openkb.runtime.embedded import free_port
    from openkb.storage import S3BlobStore
    from server.app import create_app
    from workers.queue import HueyQueue

    ctx = dataclasses.replace(app_ctx, blobs=S3BlobStore(s3_settings), _milvus=None, _lock=threading.Lock())
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(ctx, queue=HueyQueue(), warm=False),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="on",
        )
    )
    thread = threading.Thread(target=server.run, name="uvicorn-s3", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not server.started:
        time.sleep(0.05)
    assert server.started, "the S3-backed test server did not start"
    yield base
    server.should_exit = True
    thread.join(10)


@pytest.mark.parametrize("store", ["local", "s3"])
def test_download_over_http(store, request, committed):
    base = request.getfixturevalue("live_server" if store == "local" else "s3_server_base")
    w = HttpWorld(base, committed)
    try:
        o = w.c["owner"]
        page = w.doc("P", markdown="p\n")
        data = bytes(range(256)) * 64
        a = o.post(
            "/api/uploads",
            data={"document_id": page["id"]},
            files={"file": ("图 1.png", io.BytesIO(data), "image/png")},
        ).json()
        evil = o.post("/api/uploads", files={"file": ("e.html", io.BytesIO(b"<script>1</script>"), "text/html")}).json()
        r = w.c["member"].get(f"/api/assets/{a['id']}")
        if store == "local":  # proxied through the API
            assert r.status_code == 200
        else:  # a short-lived presigned URL on the object store, issued after the check
            assert r.status_code == 307 and r.headers["location"].startswith(w.c["member"].base_url.scheme)
            assert "X-Amz-Signature" in r.headers["location"]
            r = httpx.get(r.headers["location"])
            assert r.status_code == 200
        assert r.content == data and r.headers["content-type"] == "image/png"
        assert r.headers["content-disposition"].startswith("inline")
        # an unattached HTML upload is never served as HTML, not even by the object store
        r = o.get(f"/api/assets/{evil['id']}", follow_redirects=True)
        assert r.status_code == 200 and r.content == b"<script>1</script>"
        assert r.headers["content-type"].startswith("application/octet-stream")
        assert r.headers["content-disposition"].startswith("attachment")
        for c in (w.c["outsider"], w.c["other_tenant"], w.anon):
            assert c.get(f"/api/assets/{a['id']}").status_code in (401, 404)
        assert o.delete(f"/api/assets/{evil['id']}").status_code == 204
        assert o.get(f"/api/assets/{evil['id']}").status_code == 404
    finally:
        w.close()
