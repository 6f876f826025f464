"""``openkb backup`` then ``openkb restore`` into an empty home and database (the CLI, as an
operator runs it): content, versions, permissions, share links, tokens, assets and search
results are the same on the restored installation, whose Milvus collection was rebuilt from
PostgreSQL. A damaged archive, a foreign file and a non-empty target are refused in one line."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlmodel import Session

from openkb.models import Document
from tests.content.http_world import HttpWorld

ROOT = Path(__file__).resolve().parents[2]


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=ROOT,
        timeout=600,
        check=False,
    )


def assert_one_line_error(p: subprocess.CompletedProcess[str], code: int, needle: str) -> None:
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and p.stderr.strip().startswith("error:"), p.stderr
    assert needle in " ".join(p.stderr.split()), p.stderr


def _wait_indexed(engine, doc_id: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with Session(engine) as s:
            d = s.get(Document, uuid.UUID(doc_id))
            if d.index_status == "indexed" and d.indexed_version_id == d.current_version_id:
                return
        time.sleep(0.1)
    pytest.fail(f"document {doc_id} was not indexed")


def _serve(ctx) -> tuple[str, object, threading.Thread]:
    import uvicorn

    from openkb.runtime.embedded import free_port
    from server.app import create_app
    from workers.queue import HueyQueue

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
    thread = threading.Thread(target=server.run, name="uvicorn-restored", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not server.started:
        time.sleep(0.05)
    assert server.started
    return f"http://127.0.0.1:{port}", server, thread


def _snapshot(base: str, w: HttpWorld, doc: dict, asset: dict, same: dict, link: dict, word: str) -> dict:
    def c(name: str) -> httpx.Client:
        return httpx.Client(base_url=base, headers=dict(w.c[name].headers), timeout=60)

    owner, member, outsider, anon = c("owner"), c("member"), c("outsider"), httpx.Client(base_url=base, timeout=60)
    try:
        got = owner.get(f"/api/documents/{doc['id']}").json()
        versions = owner.get(f"/api/documents/{doc['id']}/versions").json()
        hits = owner.post("/api/search", json={"query": word, "knowledge_base_ids": [w.kb["id"]]}).json()["results"]
        return {
            "markdown": got["markdown"],
            "title": got["title"],
            "current": got["current_version_id"],
            "versions": [(v["id"], v.get("version_no")) for v in versions.get("items", versions)],
            "asset": owner.get(f"/api/assets/{asset['id']}").content,
            "same": owner.get(f"/api/assets/{same['id']}").content,
            "member_reads": member.get(f"/api/documents/{doc['id']}").status_code,
            "outsider_reads": outsider.get(f"/api/documents/{doc['id']}").status_code,
            "share": anon.get(f"/api/share/{link['token']}").status_code,
            "search": sorted((h["document_id"], h["chunk_id"], h["content"]) for h in hits),
        }
    finally:
        for x in (owner, member, outsider, anon):
            x.close()


def test_backup_then_restore_into_an_empty_home(
    live_server, worker, committed, engine, app_ctx, pg_server, milvus_services, tmp_path
):
    from openkb.config import Settings
    from openkb.context import AppContext
    from openkb.db import session_scope
    from openkb.indexing import service
    from openkb.indexing.profiles import forget_active_profile
    from openkb.runtime.embedded import EmbeddedServices, Endpoints

    with session_scope(app_ctx.engine) as s:
        service.ensure_default_profile(app_ctx, s)
    forget_active_profile()
    word = f"zephyrine{uuid.uuid4().hex[:6]}"
    w = HttpWorld(live_server, committed)
    try:
        doc = w.doc("Backed up", markdown=f"# Backed up\n\nfirst {word}\n")
        r = w.save(doc, f"# Backed up\n\nsecond {word} version with 中文内容\n")
        assert r.status_code in (200, 201), r.text
        png = b"\x89PNG" + os.urandom(2048)
        asset, same = (
            w.c["owner"]
            .post("/api/uploads", data={"document_id": doc["id"]}, files={"file": (name, io.BytesIO(png), "image/png")})
            .json()
            for name in ("a.png", "again.png")
        )  # the same bytes twice: two rows, one blob (openkb/assets.py)
        link = w.c["owner"].post(f"/api/objects/document/{doc['id']}/share-links", json={}).json()
        _wait_indexed(engine, doc["id"])
        before = _snapshot(live_server, w, doc, asset, same, link, word)
        assert before["search"] and before["member_reads"] == 200 and before["outsider_reads"] == 404
        assert before["share"] == 200 and len(before["versions"]) >= 2

        src_env = {"OPENKB_HOME": str(app_ctx.settings.openkb_home), "DATABASE_URL": app_ctx.endpoints.database_url}
        archive = tmp_path / "openkb.tar"
        p = cli(["backup", str(archive), "--json"], src_env)
        assert p.returncode == 0, p.stderr
        manifest = json.loads(p.stdout)
        assert manifest["format"] == "openkb-backup/1" and manifest["assets"] >= 1
        assert manifest["postgresql"]["dump_tool"].startswith("pg_dump")
        with tarfile.open(archive) as tar:
            names = set(tar.getnames())
        assert {"manifest.json", "postgresql.dump", f"blobs/tenant/{w.tenant.id}/{asset['id']}"} <= names
        assert f"blobs/tenant/{w.tenant.id}/{same['id']}" not in names  # the shared blob is archived once
        assert before["same"] == before["asset"] == png
        assert_one_line_error(cli(["backup", str(archive)], src_env), 65, "already exists")

        # the target: a new home (its own Milvus Lite and blob folder) and an empty database
        home = tmp_path / "restored-home"
        home.mkdir()
        dbname = f"openkb_restore_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{dbname}"')
        head, _, query = pg_server.partition("?")
        target_db = f"{head.rsplit('/', 1)[0]}/{dbname}" + (f"?{query}" if query else "")
        milvus = EmbeddedServices(Settings(openkb_home=home, milvus_uri=None), components=("milvus",))
        mep = milvus.start()
        try:
            dst_env = {
                "OPENKB_HOME": str(home),
                "DATABASE_URL": target_db,
                "MILVUS_URI": mep.milvus_uri,
                "OPENKB_EMBEDDER_URL": milvus_services["embedder_url"] or "off",
            }
            # refused before anything is written: a damaged archive, a foreign file
            damaged = tmp_path / "damaged.tar"
            with tarfile.open(archive) as src, tarfile.open(damaged, "w") as out:
                for m in src.getmembers():
                    data = src.extractfile(m).read() if m.isfile() else b""
                    if m.name.startswith("blobs/"):
                        data = data[:-1] + bytes([data[-1] ^ 1])
                    out.addfile(m, io.BytesIO(data))
            assert_one_line_error(cli(["restore", str(damaged)], dst_env), 65, "does not match its manifest checksum")
            junk = tmp_path / "junk.tar"
            junk.write_bytes(b"not a tar at all" * 100)
            assert_one_line_error(cli(["restore", str(junk)], dst_env), 65, "not an OpenKB backup archive")

            p = cli(["restore", str(archive), "--json"], dst_env)
            assert p.returncode == 0, p.stderr
            restored = json.loads(p.stdout)
            assert restored["counts"] == manifest["counts"]
            assert restored["rebuilt"]["status"] == "succeeded" and restored["rebuilt"]["chunks"] >= 1
            assert_one_line_error(cli(["restore", str(archive)], dst_env), 73, "already has")

            settings = Settings(
                openkb_home=home,
                database_url=target_db,
                milvus_uri=mep.milvus_uri,
                openkb_embedder_url=milvus_services["embedder_url"],
            )
            ctx = AppContext.build(
                settings,
                Endpoints(
                    database_url=target_db,
                    milvus_uri=mep.milvus_uri,
                    milvus_token=None,
                    embedder_url=milvus_services["embedder_url"],
                    queue=str(home / "queue.db"),
                    home=home,
                ),
            )
            base, server, thread = _serve(ctx)
            try:
                after = _snapshot(base, w, doc, asset, same, link, word)
            finally:
                server.should_exit = True
                thread.join(10)
                ctx.close()
            assert after == before
        finally:
            milvus.stop()
            forget_active_profile()
    finally:
        w.close()
        shutil.rmtree(tmp_path / "restored-home", ignore_errors=True)
