"""Assets without a document are kept for the retention, then pruned with their last blob
(openkb/assets.py ``prune_detached``; docs/data-model.md#assets). Real PostgreSQL, real local blob
store.

Every test ages its own rows to the year 2000 and prunes with ``now`` in 2000, so a prune never
touches what other tests in the same database left detached a moment ago; a test that asserts how
many rows a prune took leaves no aged row behind for the next one."""

from __future__ import annotations

import io
import json
import os
import threading
import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from sqlalchemy import text
from sqlmodel import col, select

from openkb.assets import JOB_HANDLERS, access_asset, prune_detached, upload_asset
from openkb.config import Settings
from openkb.content import Actor, documents
from openkb.content.revert import revert
from openkb.db import session_scope
from openkb.errors import NotFound
from openkb.importing.jobs import job_out
from openkb.models import AuditLog, Change, DocumentAsset, ImportJob
from openkb.permissions import Principal
from openkb.storage import LocalBlobStore
from tests.factories import make_doc, make_kb, make_tenant, make_user, make_workspace

LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)
THEN = LONG_AGO + timedelta(days=45)  # "now" for the prunes: 45 days after LONG_AGO
MONTH = timedelta(days=30)


@pytest.fixture()
def world(committed):
    with committed() as s:
        t = make_tenant(s)
        owner = make_user(s, t)
        ws = make_workspace(s, t, owner)
        kb = make_kb(s, ws, owner)
        docs = [make_doc(s, kb, owner) for _ in range(3)]
        s.commit()
        return SimpleNamespace(
            actor=Actor.of(Principal.user(owner.id, t.id)), docs=[d.id for d in docs], tenant=t.id, kb=kb.id
        )


@pytest.fixture()
def blobs(tmp_path):
    return LocalBlobStore(tmp_path / "blobs")


def _units(engine):
    return lambda: session_scope(engine)


def _up(engine, world, blobs, data: bytes, doc: int | None = 0) -> DocumentAsset:
    with session_scope(engine) as s:
        return upload_asset(
            s,
            world.actor,
            blobs,
            io.BytesIO(data),
            size=len(data),
            filename="figure.png",
            content_type="image/png",
            document_id=None if doc is None else world.docs[doc],
        )


def _purge(engine, world, doc: int) -> None:
    with session_scope(engine) as s:
        documents.trash_document(s, world.actor, world.docs[doc])
    with session_scope(engine) as s:
        documents.purge_document(s, world.actor, world.docs[doc])


def _age(engine, *ids: uuid.UUID, when: datetime = LONG_AGO) -> None:
    """As if these rows had been detached at ``when``."""
    with session_scope(engine) as s:
        s.execute(
            text("UPDATE document_assets SET detached_at = :w WHERE id = ANY(:ids)"), {"w": when, "ids": list(ids)}
        )


def _row(engine, asset_id):
    with session_scope(engine) as s:
        return s.get(DocumentAsset, asset_id)


def test_a_purge_detaches_its_assets_and_a_revert_gets_them_back(engine, world, blobs):
    data = b"\x89PNG purge " + os.urandom(64)
    a = _up(engine, world, blobs, data, 0)
    assert _row(engine, a.id).detached_at is None
    _purge(engine, world, 0)
    row = _row(engine, a.id)
    assert row.document_id is None and row.detached_at is not None  # kept: the purge can be reverted
    with session_scope(engine) as s:
        change = s.exec(
            select(Change).where(col(Change.op) == "document.purge", col(Change.object_id) == world.docs[0])
        ).one()
        revert(s, world.actor, change_id=change.id, blobs=blobs)
    row = _row(engine, a.id)
    assert row.document_id == world.docs[0] and row.detached_at is None
    with session_scope(engine) as s:  # back in the trash, as it was purged from there
        documents.restore_from_trash(s, world.actor, world.docs[0])
    with session_scope(engine) as s:  # readable with its page again
        assert b"".join(blobs.open(access_asset(s, world.actor.principal, a.id).object_key)) == data


def test_past_the_retention_the_row_and_its_blob_go(engine, world, blobs):
    data = b"\x89PNG gone " + os.urandom(64)
    a = _up(engine, world, blobs, data, 0)
    _purge(engine, world, 0)
    _age(engine, a.id)
    seen: list[tuple[int, int]] = []
    out = prune_detached(_units(engine), blobs, older_than=MONTH, now=THEN, progress=lambda n, t: seen.append((n, t)))
    assert out == {"rows": 1, "row_bytes": len(data), "blobs_removed": 1, "bytes_freed": len(data)}
    assert seen[-1] == (1, 1)
    assert _row(engine, a.id) is None and not blobs.exists(a.object_key)
    with session_scope(engine) as s:  # audited, with what it did
        audit = s.exec(select(AuditLog).where(col(AuditLog.action) == "assets.detached_pruned")).all()
        assert any(e.meta.get("rows") == 1 and e.meta.get("older_than_days") == 30 for e in audit)
    assert prune_detached(_units(engine), blobs, older_than=MONTH, now=THEN)["rows"] == 0  # re-runnable


def test_within_the_retention_nothing_goes(engine, world, blobs):
    a = _up(engine, world, blobs, b"\x89PNG young " + os.urandom(64), 0)
    _purge(engine, world, 0)
    _age(engine, a.id, when=THEN - timedelta(days=29))
    assert prune_detached(_units(engine), blobs, older_than=MONTH, now=THEN)["rows"] == 0
    assert _row(engine, a.id) is not None and blobs.exists(a.object_key)


def test_a_blob_a_live_page_shares_is_kept(engine, world, blobs):
    data = b"\x89PNG shared " + os.urandom(64)
    purged = _up(engine, world, blobs, data, 0)
    live = _up(engine, world, blobs, data, 1)
    assert live.object_key == purged.object_key
    _purge(engine, world, 0)
    _age(engine, purged.id)
    dry = prune_detached(_units(engine), blobs, older_than=MONTH, now=THEN, dry_run=True)
    assert dry == {"rows": 1, "row_bytes": len(data), "blobs_removed": 0, "bytes_freed": 0}
    assert _row(engine, purged.id) is not None  # the dry run changed nothing
    out = prune_detached(_units(engine), blobs, older_than=MONTH, now=THEN)
    assert out == dry
    assert _row(engine, purged.id) is None
    with session_scope(engine) as s:
        assert b"".join(blobs.open(access_asset(s, world.actor.principal, live.id).object_key)) == data


def test_a_dry_run_counts_a_blob_two_due_rows_share_as_freed(engine, world, blobs):
    """Two purged pages showing the same image: the real prune frees the blob with the second row
    whichever batch that row falls in, and the dry run says so (it used to count the blob as kept
    when the rows fell in different batches: each batch saw the other's row still there)."""
    data = b"\x89PNG twice " + os.urandom(64)
    one = _up(engine, world, blobs, data, 0)
    two = _up(engine, world, blobs, data, 1)
    assert one.object_key == two.object_key
    _purge(engine, world, 0)
    _purge(engine, world, 1)
    _age(engine, one.id)
    _age(engine, two.id)
    seen: list[tuple[int, int]] = []
    dry = prune_detached(
        _units(engine),
        blobs,
        older_than=MONTH,
        now=THEN,
        dry_run=True,
        batch=1,
        progress=lambda n, t: seen.append((n, t)),
    )
    assert dry == {"rows": 2, "row_bytes": 2 * len(data), "blobs_removed": 1, "bytes_freed": len(data)}
    assert seen[-1] == (2, 2)
    assert _row(engine, one.id) is not None and _row(engine, two.id) is not None and blobs.exists(one.object_key)
    out = prune_detached(_units(engine), blobs, older_than=MONTH, now=THEN, batch=1)
    assert out == dry
    assert _row(engine, one.id) is None and _row(engine, two.id) is None and not blobs.exists(one.object_key)


def test_an_upload_never_attached_counts_from_its_upload(engine, world, blobs):
    a = _up(engine, world, blobs, b"loose " + os.urandom(32), None)
    row = _row(engine, a.id)
    assert row.document_id is None and row.detached_at is not None
    _age(engine, a.id)
    assert prune_detached(_units(engine), blobs, older_than=MONTH, now=THEN)["rows"] == 1
    assert _row(engine, a.id) is None and not blobs.exists(a.object_key)


def _job(engine, world, source: uuid.UUID, status: str) -> uuid.UUID:
    with session_scope(engine) as s:
        job = ImportJob(
            tenant_id=world.tenant,
            workspace_id=s.exec(
                text("SELECT workspace_id FROM knowledge_bases WHERE id = :k").bindparams(k=world.kb)
            ).one()[0],
            knowledge_base_id=world.kb,
            source_asset_id=source,
            status=status,
            converter="auto",
            created_by=world.actor.user_id,
            results={},
        )
        s.add(job)
        s.flush()
        return job.id


def test_an_import_source_stays_until_its_job_has_finished(engine, world, blobs):
    running = _up(engine, world, blobs, b"PK running " + os.urandom(32), None)
    done = _up(engine, world, blobs, b"PK done " + os.urandom(32), None)
    running_job, done_job = _job(engine, world, running.id, "running"), _job(engine, world, done.id, "succeeded")
    _age(engine, running.id, done.id)
    assert prune_detached(_units(engine), blobs, older_than=MONTH, now=THEN)["rows"] == 1
    assert _row(engine, running.id) is not None and _row(engine, done.id) is None
    with session_scope(engine) as s:
        kept = s.get(ImportJob, done_job)  # the job's record stays, without its upload
        assert kept is not None and kept.source_asset_id is None and job_out(kept)["status"] == "succeeded"
        assert s.get(ImportJob, running_job).source_asset_id == running.id


def test_a_row_re_attached_while_the_prune_waits_stays(engine, world, blobs):
    """A revert re-attaching a row the prune picked holds the row; the prune waits for it, reads
    the row again under its locks and leaves it."""
    data = b"\x89PNG race " + os.urandom(64)
    a = _up(engine, world, blobs, data, 0)
    _purge(engine, world, 0)
    _age(engine, a.id)
    with session_scope(engine) as s:
        s.execute(
            text("UPDATE document_assets SET document_id = :d, detached_at = NULL WHERE id = :a"),
            {"d": world.docs[1], "a": a.id},
        )
        result: list = []
        t = threading.Thread(
            target=lambda: result.append(prune_detached(_units(engine), blobs, older_than=MONTH, now=THEN))
        )
        t.start()
        t.join(1.0)
        assert t.is_alive(), "the prune must wait for the row's lock"
    t.join(10)
    assert result and result[0]["rows"] == 0
    assert _row(engine, a.id).document_id == world.docs[1] and blobs.exists(a.object_key)


def test_the_worker_pass_uses_the_retention_setting(engine, world, blobs):
    handler = JOB_HANDLERS["assets_prune"]
    ctx = SimpleNamespace(engine=engine, blobs=blobs, settings=Settings(asset_retention_days=0))
    assert handler(ctx, None) == {"skipped": "ASSET_RETENTION_DAYS is 0"}
    # ~27 years: only this test's row, detached in 2000, is that old
    a = _up(engine, world, blobs, b"loose " + os.urandom(32), None)
    _age(engine, a.id)
    ctx.settings = Settings(asset_retention_days=(datetime.now(UTC) - LONG_AGO).days - 10)
    assert handler(ctx, None)["rows"] == 1 and _row(engine, a.id) is None


def test_openkb_assets_prune_on_the_command_line(engine, world, test_home, database_url):
    from tests.test_cli import run

    store = LocalBlobStore(test_home / "blobs")
    data = b"\x89PNG cli " + os.urandom(64)
    a = _up(engine, world, store, data, 0)
    _purge(engine, world, 0)
    _age(engine, a.id)
    days = (datetime.now(UTC) - LONG_AGO).days - 10  # only rows detached around 2000 are older
    env = {"DATABASE_URL": database_url, "OPENKB_HOME": str(test_home), "ASSET_RETENTION_DAYS": str(days)}
    p = run(["assets", "status"], env)
    assert p.returncode == 0 and "due for pruning now" in " ".join(p.stdout.split()), p.stderr
    p = run(["assets", "prune", "--dry-run", "--json"], env)
    assert p.returncode == 0, p.stderr
    dry = json.loads(p.stdout)
    assert dry["dry_run"] is True and dry["rows"] == 1 and dry["older_than_days"] == days
    assert _row(engine, a.id) is not None
    p = run(["assets", "prune"], env)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "deleted 1 asset without a document" in " ".join(p.stdout.split()), p.stdout
    assert _row(engine, a.id) is None and not store.exists(a.object_key)
    p = run(["assets", "status", "--json"], env)
    assert p.returncode == 0 and json.loads(p.stdout)["due_for_pruning"] == 0, p.stderr
    p = run(["assets", "prune"], env)
    assert p.returncode == 0 and "nothing to prune" in p.stdout
    p = run(["assets", "prune"], env | {"ASSET_RETENTION_DAYS": "0"})
    assert p.returncode != 0 and "--older-than" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_a_pruned_asset_is_gone_for_its_reverted_page(engine, world, blobs):
    """After the retention a revert of the purge re-creates the page; its image is gone (404)."""
    a = _up(engine, world, blobs, b"\x89PNG late " + os.urandom(64), 0)
    _purge(engine, world, 0)
    _age(engine, a.id)
    prune_detached(_units(engine), blobs, older_than=MONTH, now=THEN)
    with session_scope(engine) as s:
        change = s.exec(
            select(Change).where(col(Change.op) == "document.purge", col(Change.object_id) == world.docs[0])
        ).one()
        revert(s, world.actor, change_id=change.id, blobs=blobs)
    with session_scope(engine) as s:
        with pytest.raises(NotFound):
            access_asset(s, world.actor.principal, a.id)


def test_a_row_detached_by_a_cascade_counts_from_its_upload(engine, world, blobs):
    """A row whose document went by another way than a purge (the foreign key's SET NULL) has no
    ``detached_at``: it is pruned by its upload's age, not kept for ever."""
    a = _up(engine, world, blobs, b"\x89PNG cascade " + os.urandom(64), 2)
    with session_scope(engine) as s:
        s.execute(
            text("UPDATE document_assets SET document_id = NULL, detached_at = NULL, created_at = :w WHERE id = :a"),
            {"w": LONG_AGO, "a": a.id},
        )
    assert prune_detached(_units(engine), blobs, older_than=MONTH, now=THEN)["rows"] == 1
    assert _row(engine, a.id) is None and not blobs.exists(a.object_key)


def test_the_storage_summary_counts_blobs_once_and_what_is_due(engine, world, blobs):
    from openkb.assets import storage_summary

    with session_scope(engine) as s:
        before = storage_summary(s, retention_days=30)
    shared = b"\x89PNG summary " + os.urandom(64)
    loose = b"loose summary " + os.urandom(40)
    _up(engine, world, blobs, shared, 1)
    _up(engine, world, blobs, shared, 2)  # the same bytes: one more row, no more blob
    gone = _up(engine, world, blobs, loose, None)
    _age(engine, gone.id)
    with session_scope(engine) as s:
        after = storage_summary(s, retention_days=30)
        off = storage_summary(s, retention_days=0)
    delta = {k: after[k] - before[k] for k in ("assets", "blobs", "stored_bytes", "detached", "detached_bytes")}
    assert delta == {
        "assets": 3,
        "blobs": 2,
        "stored_bytes": len(shared) + len(loose),
        "detached": 1,
        "detached_bytes": len(loose),
    }
    assert after["due_for_pruning"] == before["due_for_pruning"] + 1 and off["due_for_pruning"] == 0
    assert datetime.fromisoformat(after["oldest_detached_at"]) <= LONG_AGO
    prune_detached(_units(engine), blobs, older_than=MONTH, now=THEN)  # leave nothing aged behind
