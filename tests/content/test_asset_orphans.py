"""An upload writes its blob before its row: when the transaction does not commit, the blob must
go too (real PostgreSQL, real local blob store)."""

from __future__ import annotations

import io
import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError

from openkb.assets import upload_asset
from openkb.content import Actor
from openkb.db import session_scope
from openkb.models import DocumentAsset, Tenant
from openkb.permissions import Principal
from openkb.storage import LocalBlobStore
from tests.factories import make_doc, make_kb, make_tenant, make_user, make_workspace


@pytest.fixture()
def world(committed):
    with committed() as s:
        t = make_tenant(s)
        owner = make_user(s, t)
        ws = make_workspace(s, t, owner)
        doc = make_doc(s, make_kb(s, ws, owner), owner)
        s.commit()
        return {"actor": Actor.of(Principal.user(owner, t.id)), "doc_id": doc.id, "tenant_id": t.id}


@pytest.fixture()
def blobs(tmp_path):
    return LocalBlobStore(tmp_path / "blobs")


def _files(blobs):
    return sorted(p for p in blobs.root.rglob("*") if p.is_file())


def _upload(s, world, blobs):
    return upload_asset(
        s,
        world["actor"],
        blobs,
        io.BytesIO(b"\x89PNG bytes"),
        size=None,
        filename="a.png",
        content_type="image/png",
        document_id=world["doc_id"],
    )


def test_a_later_failure_in_the_transaction_removes_the_blob(engine, world, blobs):
    with pytest.raises(DBAPIError):
        with session_scope(engine) as s:
            a = _upload(s, world, blobs)
            assert blobs._path(a.object_key).exists()
            s.execute(text("SELECT 1 / 0"))  # the request fails after the upload was recorded
    assert _files(blobs) == []
    with session_scope(engine) as s:
        assert s.get(DocumentAsset, a.id) is None


def test_a_failing_commit_removes_the_blob(engine, world, blobs):
    with pytest.raises(IntegrityError):
        with session_scope(engine) as s:
            a = _upload(s, world, blobs)
            clash = make_tenant(s)
            s.add(Tenant(name="dup", slug=clash.slug))  # flushed by commit(): unique violation there
    assert _files(blobs) == []
    with session_scope(engine) as s:
        assert s.get(DocumentAsset, a.id) is None


def test_a_committed_upload_keeps_its_blob(engine, world, blobs):
    with session_scope(engine) as s:
        a = _upload(s, world, blobs)
        with pytest.raises(IntegrityError):  # a savepoint rolled back inside the same transaction
            with s.begin_nested():
                s.execute(
                    text(
                        "INSERT INTO tenants (id, name, slug, created_at) "
                        "SELECT :id, 'x', slug, now() FROM tenants LIMIT 1"
                    ),
                    {"id": uuid.uuid4()},
                )
    assert [p.name for p in _files(blobs)] == [str(a.id)]
    with pytest.raises(DBAPIError):  # a later transaction of the same kind rolling back leaves it alone
        with session_scope(engine) as s:
            s.execute(text("SELECT 1 / 0"))
    assert [p.name for p in _files(blobs)] == [str(a.id)]
    with session_scope(engine) as s:
        assert s.get(DocumentAsset, a.id) is not None
