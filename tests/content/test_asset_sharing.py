"""Uploads of the same bytes in one tenant share one blob, and a blob goes with its last row
(openkb/assets.py; docs/data-model.md#assets). Real PostgreSQL, real local blob store."""

from __future__ import annotations

import io
import json
import os
import threading
import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlmodel import col, select

from openkb.assets import access_asset, delete_asset, upload_asset
from openkb.content import Actor
from openkb.db import session_scope
from openkb.errors import NotFound
from openkb.models import AuditLog, DocumentAsset
from openkb.permissions import Principal
from openkb.storage import LocalBlobStore
from tests.factories import make_doc, make_kb, make_tenant, make_user, make_workspace


def _tenant(s):
    t = make_tenant(s)
    owner = make_user(s, t)
    ws = make_workspace(s, t, owner)
    kb = make_kb(s, ws, owner)
    docs = [make_doc(s, kb, owner) for _ in range(2)]
    return {"actor": Actor.of(Principal.user(owner, t.id)), "docs": [d.id for d in docs], "tenant": t.id}


@pytest.fixture()
def world(committed):
    with committed() as s:
        w = {"a": _tenant(s), "b": _tenant(s)}
        s.commit()
        return w


@pytest.fixture()
def blobs(tmp_path):
    return LocalBlobStore(tmp_path / "blobs")


def _files(blobs):
    return sorted(p.relative_to(blobs.root).as_posix() for p in blobs.root.rglob("*") if p.is_file())


def _up(s, who, blobs, data, doc=0, *, flush=True):
    return upload_asset(
        s,
        who["actor"],
        blobs,
        io.BytesIO(data),
        size=len(data),
        filename="logo.png",
        content_type="image/png",
        document_id=who["docs"][doc],
        flush=flush,
    )


def _bytes(blobs, a):
    return b"".join(blobs.open(a.object_key))


def test_the_same_bytes_share_one_blob_and_each_row_stays_its_own(engine, world, blobs):
    data = b"\x89PNG same " + os.urandom(64)
    with session_scope(engine) as s:
        first = _up(s, world["a"], blobs, data, 0)
    with session_scope(engine) as s:
        second = _up(s, world["a"], blobs, data, 1)  # another page shows the same logo
        other = _up(s, world["a"], blobs, data + b"!", 1)
    assert first.id != second.id and second.document_id == world["a"]["docs"][1]
    assert second.object_key == first.object_key and other.object_key != first.object_key
    assert _files(blobs) == sorted([first.object_key, other.object_key])
    assert second.sha256 == first.sha256 and second.size_bytes == len(data)
    with session_scope(engine) as s:
        for a in (first, second):
            assert _bytes(blobs, access_asset(s, world["a"]["actor"].principal, a.id)) == data


def _two_rows(engine, world, blobs, data: bytes):
    """Two committed rows of two pages sharing one blob."""
    with session_scope(engine) as s:
        first = _up(s, world["a"], blobs, data, 0)
        s.commit()
        return first, _up(s, world["a"], blobs, data, 1)


def test_a_blob_outlives_all_but_its_last_row(engine, world, blobs):
    data = b"\x89PNG kept " + os.urandom(64)
    first, second = _two_rows(engine, world, blobs, data)
    with session_scope(engine) as s:
        delete_asset(s, world["a"]["actor"], blobs, first.id)
    assert _files(blobs) == [second.object_key]
    with session_scope(engine) as s:
        assert _bytes(blobs, access_asset(s, world["a"]["actor"].principal, second.id)) == data
        with pytest.raises(NotFound):
            access_asset(s, world["a"]["actor"].principal, first.id)
    with session_scope(engine) as s:
        delete_asset(s, world["a"]["actor"], blobs, second.id)
    assert _files(blobs) == []


def test_tenants_share_nothing(engine, world, blobs):
    data = b"\x89PNG tenant " + os.urandom(64)
    with session_scope(engine) as s:
        mine = _up(s, world["a"], blobs, data)
        theirs = _up(s, world["b"], blobs, data)
    assert mine.object_key != theirs.object_key
    assert mine.object_key.startswith(f"tenant/{world['a']['tenant']}/")
    assert theirs.object_key.startswith(f"tenant/{world['b']['tenant']}/")
    assert len(_files(blobs)) == 2


def test_uploads_in_one_transaction_share_before_any_flush_and_a_rollback_takes_its_blob(engine, world, blobs):
    """An import writes a batch of rows with one flush, after its uploads: the second upload of the
    same bytes finds the first in the transaction; a rollback removes the one blob they wrote."""
    data = b"\x89PNG batch " + os.urandom(64)
    with pytest.raises(DBAPIError):
        with session_scope(engine) as s:
            a = _up(s, world["a"], blobs, data, 0, flush=False)
            b = _up(s, world["a"], blobs, data, 1, flush=False)
            assert a.object_key == b.object_key and _files(blobs) == [a.object_key]
            s.execute(text("SELECT 1 / 0"))
    assert _files(blobs) == []
    with session_scope(engine) as s:
        a = _up(s, world["a"], blobs, data, 0, flush=False)
        b = _up(s, world["a"], blobs, data, 1, flush=False)
    assert a.object_key == b.object_key and _files(blobs) == [a.object_key]


def test_a_rolled_back_upload_leaves_the_blob_it_shared(engine, world, blobs):
    data = b"\x89PNG shared " + os.urandom(64)
    with session_scope(engine) as s:
        first = _up(s, world["a"], blobs, data, 0)
    with pytest.raises(DBAPIError):
        with session_scope(engine) as s:
            again = _up(s, world["a"], blobs, data, 1)
            assert again.object_key == first.object_key
            s.execute(text("SELECT 1 / 0"))
    assert _files(blobs) == [first.object_key]
    with session_scope(engine) as s:
        assert s.get(DocumentAsset, again.id) is None
        assert _bytes(blobs, access_asset(s, world["a"]["actor"].principal, first.id)) == data


def test_a_row_whose_blob_is_gone_is_not_shared(engine, world, blobs):
    """A restore without the blob store leaves rows pointing nowhere: a new upload of those bytes
    gets a blob of its own instead of a reference to a missing one."""
    data = b"\x89PNG lost " + os.urandom(64)
    with session_scope(engine) as s:
        lost = _up(s, world["a"], blobs, data, 0)
    blobs.delete(lost.object_key)
    with session_scope(engine) as s:
        fresh = _up(s, world["a"], blobs, data, 1)
    assert fresh.object_key != lost.object_key and _files(blobs) == [fresh.object_key]
    assert _bytes(blobs, fresh) == data


def _waiting_delete(engine, world, blobs, asset_id, why: str):
    """Start ``delete_asset(asset_id)`` in its own transaction on another thread and check it is
    still waiting a second later (on a lock the caller's open transaction holds); returns what
    joins it once the caller has committed, raising what it raised."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            with session_scope(engine) as s:
                delete_asset(s, world["a"]["actor"], blobs, asset_id)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failed.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join(1.0)
    assert t.is_alive(), why

    def finish() -> None:
        t.join(10)
        assert not t.is_alive() and not failed, failed

    return finish


def test_two_deletes_of_the_last_two_rows_at_once_remove_the_blob(engine, world, blobs):
    """Each delete alone would see the other row still there and keep the blob for it; the rows
    sharing a blob are locked first, so the second delete waits for the first and sees it was
    the last."""
    data = b"\x89PNG race " + os.urandom(64)
    first, second = _two_rows(engine, world, blobs, data)
    with session_scope(engine) as s:
        delete_asset(s, world["a"]["actor"], blobs, first.id)
        finish = _waiting_delete(engine, world, blobs, second.id, "the second delete must wait for the first")
    finish()
    assert _files(blobs) == []


def test_an_upload_sharing_a_blob_holds_its_row_against_a_delete(engine, world, blobs):
    """The row whose blob an upload shares is locked until the upload commits: a delete of that
    row waits, then sees the new row and keeps the blob."""
    data = b"\x89PNG hold " + os.urandom(64)
    with session_scope(engine) as s:
        first = _up(s, world["a"], blobs, data, 0)
    with session_scope(engine) as s:
        again = _up(s, world["a"], blobs, data, 1)
        finish = _waiting_delete(engine, world, blobs, first.id, "the delete must wait for the upload sharing the blob")
    finish()
    assert _files(blobs) == [again.object_key]
    with session_scope(engine) as s:
        assert s.get(DocumentAsset, first.id) is None
        assert _bytes(blobs, access_asset(s, world["a"]["actor"].principal, again.id)) == data


def test_an_outsider_reads_no_shared_asset(engine, world, blobs):
    """Sharing the bytes shares no permission: each row is read through its own page."""
    data = b"\x89PNG private " + os.urandom(64)
    with session_scope(engine) as s:
        a = _up(s, world["a"], blobs, data)
        b = _up(s, world["b"], blobs, data)
    with session_scope(engine) as s:
        with pytest.raises(NotFound):
            access_asset(s, world["b"]["actor"].principal, a.id)
        with pytest.raises(NotFound):
            access_asset(s, world["a"]["actor"].principal, b.id)
        with pytest.raises(NotFound):
            access_asset(s, world["a"]["actor"].principal, uuid.uuid4())


# -- openkb assets dedupe: the copies written before blobs were shared ---------------------------


def _old_copies(engine, who, blobs, data: bytes, n: int) -> list[DocumentAsset]:
    """``n`` rows with the same bytes, each with a blob of its own, as uploads wrote them before
    migration 0015."""
    rows = []
    with session_scope(engine) as s:
        for i in range(n):
            aid = uuid.uuid4()
            key = f"tenant/{who['tenant']}/{aid}"
            size, digest = blobs.put(key, io.BytesIO(data), "image/png")
            a = DocumentAsset(
                id=aid,
                tenant_id=who["tenant"],
                document_id=who["docs"][i % 2],
                object_key=key,
                filename=f"copy{i}.png",
                mime_type="image/png",
                size_bytes=size,
                sha256=digest,
                created_by=who["actor"].principal.user_id,
            )
            s.add(a)
            s.flush()
            rows.append(a)
    return rows


def _units(engine):
    return lambda: session_scope(engine)


def _mine(out_keys, world):
    return [k for k in out_keys if k.startswith(f"tenant/{world['a']['tenant']}/")]


def test_dedupe_points_every_row_at_one_copy_and_deletes_the_others(engine, world, blobs):
    from openkb.assets import merge_copies

    data = b"\x89PNG old " + os.urandom(64)
    rows = _old_copies(engine, world["a"], blobs, data, 3)
    other = _old_copies(engine, world["b"], blobs, data, 1)  # another tenant's: never merged with these
    assert len(_files(blobs)) == 4
    dry = merge_copies(_units(engine), blobs, dry_run=True)
    assert dry["groups"] >= 1 and len(_files(blobs)) == 4
    with session_scope(engine) as s:
        assert len({s.get(DocumentAsset, a.id).object_key for a in rows}) == 3  # the dry run changed nothing
    seen: list[tuple[int, int]] = []
    out = merge_copies(_units(engine), blobs, progress=lambda n, t: seen.append((n, t)))
    assert out["blobs_removed"] >= 2 and out["bytes_freed"] >= 2 * len(data) and seen and seen[-1][0] == seen[-1][1]
    with session_scope(engine) as s:
        keys = {s.get(DocumentAsset, a.id).object_key for a in rows}
        assert keys == {rows[0].object_key}  # the oldest row's copy is kept
        for a in rows:
            assert _bytes(blobs, access_asset(s, world["a"]["actor"].principal, a.id)) == data
    assert sorted(_files(blobs)) == sorted([rows[0].object_key, other[0].object_key])
    again = merge_copies(_units(engine), blobs)
    assert again["blobs_removed"] == 0 and len(_files(blobs)) == 2  # nothing left to merge


def test_dedupe_keeps_a_copy_whose_bytes_check_out(engine, world, blobs):
    """The oldest row's blob is gone and the next one's was changed outside OpenKB: the third,
    intact one is kept; a set with no intact copy is left alone and counted."""
    from openkb.assets import merge_copies

    data = b"\x89PNG damaged " + os.urandom(64)
    rows = _old_copies(engine, world["a"], blobs, data, 3)
    blobs.delete(rows[0].object_key)
    # changed: its last byte flipped (a "!" written over it left it intact when the random last
    # byte was already "!", 1 run in 256, and then the second copy was kept)
    blobs.put(rows[1].object_key, io.BytesIO(data[:-1] + bytes([data[-1] ^ 0xFF])), "image/png")
    lost = _old_copies(engine, world["a"], blobs, b"\x89PNG lost " + os.urandom(64), 2)
    for a in lost:
        blobs.put(a.object_key, io.BytesIO(b"changed"), "image/png")
    out = merge_copies(_units(engine), blobs)
    assert out["groups_without_intact_copy"] >= 1
    with session_scope(engine) as s:
        assert {s.get(DocumentAsset, a.id).object_key for a in rows} == {rows[2].object_key}
        assert _bytes(blobs, access_asset(s, world["a"]["actor"].principal, rows[0].id)) == data
        assert {s.get(DocumentAsset, a.id).object_key for a in lost} == {a.object_key for a in lost}
    assert sorted(_mine(_files(blobs), world)) == sorted([rows[2].object_key] + [a.object_key for a in lost])


def test_openkb_assets_dedupe_on_the_command_line(engine, world, test_home, database_url):
    """As an operator runs it: a dry run, the run, a re-run; one line each, --json for scripts."""
    from tests.test_cli import run

    env = {"DATABASE_URL": database_url, "OPENKB_HOME": str(test_home)}
    store = LocalBlobStore(test_home / "blobs")
    data = b"\x89PNG cli " + os.urandom(64)
    rows = _old_copies(engine, world["a"], store, data, 2)
    p = run(["assets", "dedupe", "--dry-run", "--json"], env)
    assert p.returncode == 0, p.stderr
    dry = json.loads(p.stdout)
    assert dry["dry_run"] is True and dry["blobs_removed"] >= 1
    p = run(["assets", "dedupe"], env)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "now point at the copy kept" in " ".join(p.stdout.split()), p.stdout
    with session_scope(engine) as s:
        assert {s.get(DocumentAsset, a.id).object_key for a in rows} == {rows[0].object_key}
    assert not store.exists(rows[1].object_key) and store.exists(rows[0].object_key)
    p = run(["assets", "dedupe", "--json"], env)
    assert p.returncode == 0 and json.loads(p.stdout)["blobs_removed"] == 0
    with session_scope(engine) as s:  # the run is audited
        assert s.exec(select(AuditLog).where(col(AuditLog.action) == "assets.copies_merged")).first() is not None
