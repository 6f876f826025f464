"""Keyed upsert (created | updated | unchanged) and the change log with revert by change and run."""

from __future__ import annotations

import uuid

import pytest
from sqlmodel import select

from openkb.content import changes, documents, revert, upsert, versions
from openkb.content.actor import parse_run_id
from openkb.content.versions import sha256_hex
from openkb.errors import NotFound, PermissionDenied
from openkb.models import Change, Document, DocumentVersion
from tests.factories import grant


def _versions(world, doc_id):
    return world.db.exec(select(DocumentVersion).where(DocumentVersion.document_id == doc_id)).all()


def test_upsert_created_updated_unchanged(world, queue):
    a = world.actor()
    r1 = upsert.upsert_by_key(
        world.db,
        a,
        world.kb.id,
        "day-2026-09-29",
        title="Day",
        markdown="# 今天\n\nhi\n",
        metadata={"date": "2026-09-29"},
    )
    assert r1.status == "created" and r1.version.version_no == 1
    world.commit()
    assert queue.jobs == [("index_document", {"document_id": str(r1.document.id)})]
    queue.jobs.clear()
    n_changes = len(world.db.exec(select(Change)).all())
    updated_at = r1.document.updated_at

    r2 = upsert.upsert_by_key(
        world.db,
        world.actor(),
        world.kb.id,
        "day-2026-09-29",
        title="Day",
        markdown="# 今天\n\nhi\n",
        metadata={"date": "2026-09-29"},
    )
    assert r2.status == "unchanged" and r2.version.id == r1.version.id
    world.commit()
    assert queue.jobs == []
    assert len(world.db.exec(select(Change)).all()) == n_changes
    assert world.db.get(Document, r1.document.id).updated_at == updated_at

    r3 = upsert.upsert_by_key(
        world.db, world.actor(), world.kb.id, "day-2026-09-29", title="Day", markdown="# 今天\n\nhi again\n"
    )
    assert r3.status == "updated" and r3.version.version_no == 2
    assert world.db.get(Document, r1.document.id).meta == {"date": "2026-09-29"}  # omitted = kept
    r4 = upsert.upsert_by_key(
        world.db,
        world.actor(),
        world.kb.id,
        "day-2026-09-29",
        title="Day",
        markdown="# 今天\n\nhi again\n",
        tags=["diary"],
    )
    assert r4.status == "updated" and r4.version.id == r3.version.id  # fields only, no new version
    assert len(_versions(world, r1.document.id)) == 2


def test_upsert_in_trash_and_outsiders(world):
    r = upsert.upsert_by_key(world.db, world.actor(), world.kb.id, "k", title="K", markdown="x\n")
    with pytest.raises(PermissionDenied):
        upsert.upsert_by_key(world.db, world.actor(world.p.member), world.kb.id, "k", title="K", markdown="x\n")
    with pytest.raises(NotFound):
        upsert.upsert_by_key(
            world.db, world.actor(world.p.other_tenant_user), world.kb.id, "k", title="K", markdown="x\n"
        )
    documents.trash_document(world.db, world.actor(), r.document.id)
    with pytest.raises(upsert.DocumentInTrash):
        upsert.upsert_by_key(world.db, world.actor(), world.kb.id, "k", title="K", markdown="y\n")


def test_revert_by_run_id_undoes_a_sync(world, queue):
    keep = upsert.upsert_by_key(
        world.db, world.actor(run_id="setup"), world.kb.id, "keep", title="Keep", markdown="v1\n"
    )
    world.commit()
    run = world.actor(run_id="nightly-2026-09-29")
    upsert.upsert_by_key(world.db, run, world.kb.id, "keep", title="Keep", markdown="v2\n")
    new = upsert.upsert_by_key(world.db, run, world.kb.id, "new", title="New", markdown="fresh\n")
    folder, _ = documents.create_document(world.db, run, knowledge_base_id=world.kb.id, title="F", type="folder")
    documents.update_document(world.db, run, keep.document.id, {"parent_id": folder.id, "title": "Moved"})
    world.commit()
    listed = changes.list_changes(world.db, world.principal(world.p.owner), run_id="nightly-2026-09-29")
    assert len(listed) == 4 and {c.run_id for c in listed} == {parse_run_id(world.p.tenant.id, "nightly-2026-09-29")}

    undo = world.actor()
    report = revert.revert(world.db, undo, run_id="nightly-2026-09-29")
    assert len(report["reverted"]) == 4 and report["skipped"] == []
    world.db.expire_all()
    d = world.db.get(Document, keep.document.id)
    assert d.parent_id is None and d.title == "Keep"
    cur = world.db.get(DocumentVersion, d.current_version_id)
    assert cur.markdown == "v1\n" and cur.version_no == 3  # a new version with the old body
    assert world.db.get(Document, new.document.id) is None  # created -> removed
    assert world.db.get(Document, folder.id) is None
    assert all(
        c.status == "reverted"
        for c in changes.list_changes(world.db, world.principal(world.p.owner), run_id="nightly-2026-09-29")
    )
    # the revert is recorded under its own run, and reverting twice is harmless
    assert changes.list_changes(world.db, world.principal(world.p.owner), run_id=str(undo.run_id))
    again = revert.revert(world.db, world.actor(), run_id="nightly-2026-09-29")
    assert again["reverted"] == [] and len(again["skipped"]) == 4
    # reverting the revert re-creates the removed document with its id and body
    revert.revert(world.db, world.actor(), run_id=str(undo.run_id))
    world.db.expire_all()
    back = world.db.get(Document, new.document.id)
    assert back is not None and world.db.get(DocumentVersion, back.current_version_id).markdown == "fresh\n"


def test_revert_conflict_when_changed_later(world):
    doc, v1 = documents.create_document(
        world.db, world.actor(), knowledge_base_id=world.kb.id, title="P", markdown="a\n"
    )
    first = world.actor()
    r2 = versions.save_version(
        world.db, first, doc.id, base_version_id=v1.id, markdown="b\n", markdown_hash=sha256_hex("b\n")
    )
    versions.save_version(
        world.db, world.actor(), doc.id, base_version_id=r2.version.id, markdown="c\n", markdown_hash=sha256_hex("c\n")
    )
    (c_first,) = changes.list_changes(world.db, world.principal(world.p.owner), run_id=str(first.run_id))
    with pytest.raises(revert.RevertConflict) as ei:
        revert.revert(world.db, world.actor(), change_id=c_first.id)
    assert ei.value.code == "REVERT_CONFLICT" and ei.value.extra["blocking_change_ids"]


def test_trash_purge_revert(world):
    f, _ = documents.create_document(world.db, world.actor(), knowledge_base_id=world.kb.id, title="F", type="folder")
    p, _ = documents.create_document(
        world.db, world.actor(), knowledge_base_id=world.kb.id, title="P", parent_id=f.id, markdown="body\n"
    )
    documents.trash_document(world.db, world.actor(), f.id)
    purge = world.actor()
    documents.purge_document(world.db, purge, f.id)
    revert.revert(world.db, world.actor(), run_id=str(purge.run_id))
    world.db.expire_all()
    f2, p2 = world.db.get(Document, f.id), world.db.get(Document, p.id)
    assert f2.status == "deleted" and p2.parent_id == f.id  # back in the trash, subtree intact
    assert world.db.get(DocumentVersion, p2.current_version_id).markdown == "body\n"


def test_change_visibility_own_vs_manager(world):
    grant(world.db, "knowledge_base", world.kb.id, world.p.member, "editor", tenant_id=world.p.tenant.id)
    mine = world.actor(world.p.member)
    documents.create_document(world.db, mine, knowledge_base_id=world.kb.id, title="by member")
    owner_act = world.actor()
    documents.create_document(world.db, owner_act, knowledge_base_id=world.kb.id, title="by owner")
    member_view = changes.list_changes(world.db, world.principal(world.p.member))
    assert member_view and all(c.actor_id == world.p.member.id for c in member_view)
    owner_view = changes.list_changes(world.db, world.principal(world.p.owner), knowledge_base_id=world.kb.id)
    assert {world.p.member.id, world.p.owner.id} <= {c.actor_id for c in owner_view}
    (oc,) = changes.list_changes(world.db, world.principal(world.p.owner), run_id=str(owner_act.run_id))
    with pytest.raises(NotFound):  # the member cannot see (or revert) the owner's change
        revert.revert(world.db, world.actor(world.p.member), change_id=oc.id)
    assert changes.list_changes(world.db, world.principal(world.p.other_tenant_user)) == []
    with pytest.raises(NotFound):
        revert.revert(world.db, world.actor(world.p.other_tenant_user), run_id=str(owner_act.run_id))
    # the manager may revert the member's change
    (mc,) = changes.list_changes(world.db, world.principal(world.p.member), run_id=str(mine.run_id))
    out = revert.revert(world.db, world.actor(), change_id=mc.id)
    assert out["reverted"][0]["change_id"] == mc.id


def test_run_id_parsing():
    t = uuid.uuid4()
    u = uuid.uuid4()
    assert parse_run_id(t, str(u)) == u
    assert parse_run_id(t, "nightly") == parse_run_id(t, "nightly") != parse_run_id(uuid.uuid4(), "nightly")
    assert parse_run_id(t, None) is None
