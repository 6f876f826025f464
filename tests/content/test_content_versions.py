"""Saves with optimistic locking, identical saves, hash checks and index jobs after commit."""

from __future__ import annotations

import pytest
from sqlmodel import select

from openkb.content import documents, versions
from openkb.content.versions import sha256_hex
from openkb.errors import HashMismatch, MarkdownDialectError, NotFound, PermissionDenied, VersionConflict
from openkb.models import Change, Document, DocumentVersion


def _page(world, md="# Hello\n\nworld\n"):
    doc, v = documents.create_document(
        world.db, world.actor(), knowledge_base_id=world.kb.id, title="Page", markdown=md
    )
    return doc, v


def test_save_creates_version_and_enqueues_after_commit(world, queue):
    doc, v1 = _page(world)
    world.commit()
    queue.jobs.clear()
    md = "# Hello\n\nworld, again 你好\n"
    res = versions.save_version(
        world.db,
        world.actor(),
        doc.id,
        base_version_id=v1.id,
        title="Page 2",
        markdown=md,
        markdown_hash=sha256_hex(md),
    )
    assert res.status == "created" and res.version.version_no == 2
    assert res.document.current_version_id == res.version.id
    assert res.document.index_status == "pending"
    assert queue.jobs == []  # nothing before commit
    world.commit()
    assert queue.jobs == [("index_document", {"document_id": str(doc.id)})]


def test_rolled_back_save_enqueues_nothing(world, queue):
    doc, v1 = _page(world)
    world.commit()
    queue.jobs.clear()
    md = "changed\n"
    versions.save_version(
        world.db, world.actor(), doc.id, base_version_id=v1.id, markdown=md, markdown_hash=sha256_hex(md)
    )
    world.db.rollback()
    assert queue.jobs == []


def test_stale_base_is_409_with_current_version(world):
    doc, v1 = _page(world)
    a = "first edit\n"
    r2 = versions.save_version(
        world.db, world.actor(), doc.id, base_version_id=v1.id, markdown=a, markdown_hash=sha256_hex(a)
    )
    b = "concurrent edit\n"
    with pytest.raises(VersionConflict) as ei:
        versions.save_version(
            world.db, world.actor(), doc.id, base_version_id=v1.id, markdown=b, markdown_hash=sha256_hex(b)
        )
    assert ei.value.extra["current_version_id"] == str(r2.version.id)
    assert ei.value.to_dict()["error"] == "VERSION_CONFLICT"


def test_identical_save_creates_nothing_even_with_stale_base(world, queue):
    doc, v1 = _page(world)
    md = "same\n"
    r2 = versions.save_version(
        world.db, world.actor(), doc.id, base_version_id=v1.id, markdown=md, markdown_hash=sha256_hex(md)
    )
    world.commit()
    queue.jobs.clear()
    n_changes = len(world.db.exec(select(Change).where(Change.object_id == doc.id)).all())
    for base in (r2.version.id, v1.id):  # the retry of a save whose answer was lost is not a conflict
        res = versions.save_version(
            world.db, world.actor(), doc.id, base_version_id=base, markdown=md, markdown_hash=sha256_hex(md)
        )
        assert res.status == "unchanged" and res.version.id == r2.version.id
    world.commit()
    assert queue.jobs == []
    assert len(world.db.exec(select(DocumentVersion).where(DocumentVersion.document_id == doc.id)).all()) == 2
    assert len(world.db.exec(select(Change).where(Change.object_id == doc.id)).all()) == n_changes


def test_wrong_hash_and_dialect_errors(world):
    doc, v1 = _page(world)
    with pytest.raises(HashMismatch) as ei:
        versions.save_version(
            world.db, world.actor(), doc.id, base_version_id=v1.id, markdown="x\n", markdown_hash=sha256_hex("y\n")
        )
    assert ei.value.http_status == 422 and ei.value.code == "MARKDOWN_HASH_MISMATCH"
    bad = "<div>raw html</div>\n"
    with pytest.raises(MarkdownDialectError) as ei2:
        versions.save_version(
            world.db, world.actor(), doc.id, base_version_id=v1.id, markdown=bad, markdown_hash=sha256_hex(bad)
        )
    assert ei2.value.extra["line"] == 1


def test_stored_body_is_normalized(world):
    doc, v1 = _page(world)
    md = "Title\n=====\n\n* a\n* b\n"
    res = versions.save_version(
        world.db, world.actor(), doc.id, base_version_id=v1.id, markdown=md, markdown_hash=sha256_hex(md)
    )
    from openkb.markdown import normalize

    assert res.version.markdown == normalize(md)
    assert res.version.markdown_hash == sha256_hex(normalize(md))


def test_viewer_cannot_save_outsider_gets_404(world):
    doc, v1 = _page(world)
    md = "x\n"
    with pytest.raises(PermissionDenied):  # workspace member reads a workspace KB, cannot edit
        versions.save_version(
            world.db,
            world.actor(world.p.member),
            doc.id,
            base_version_id=v1.id,
            markdown=md,
            markdown_hash=sha256_hex(md),
        )
    for u in (world.p.guest, world.p.outsider, world.p.other_tenant_user):
        with pytest.raises(NotFound):
            versions.save_version(
                world.db, world.actor(u), doc.id, base_version_id=v1.id, markdown=md, markdown_hash=sha256_hex(md)
            )
        with pytest.raises(NotFound):
            versions.list_versions(world.db, world.principal(u), doc.id)


def test_restore_version(world):
    doc, v1 = _page(world, "# one\n")
    md = "# two\n"
    versions.save_version(
        world.db, world.actor(), doc.id, base_version_id=v1.id, markdown=md, markdown_hash=sha256_hex(md)
    )
    res = versions.restore_version(world.db, world.actor(), doc.id, v1.id)
    assert res.status == "created" and res.version.version_no == 3 and res.version.markdown == "# one\n"
    again = versions.restore_version(world.db, world.actor(), doc.id, v1.id)
    assert again.status == "unchanged"
    listed = versions.list_versions(world.db, world.principal(world.p.member), doc.id)
    assert [v["version_no"] for v in listed] == [3, 2, 1]


def test_a_save_does_not_wait_for_an_index_job_of_the_page(committed, queue):
    """An index job inserts the page's chunks early and commits after Milvus has them (seconds
    for a long page): the chunks' foreign key holds FOR KEY SHARE on the document row all that
    time. Saves, restores and renames lock the row FOR NO KEY UPDATE, which does not wait for it
    (FOR UPDATE did: a save of a 320,000-character page waited 12 s for the previous save's job)."""
    from sqlalchemy import text

    from openkb.content import Actor
    from openkb.models import DocumentChunk
    from openkb.permissions import Principal
    from tests.factories import make_kb, make_personas

    with committed() as s:
        p = make_personas(s)
        kb = make_kb(s, p.workspace, p.owner, visibility="workspace")
        s.commit()
        actor = Actor.of(Principal.user(p.owner, p.tenant.id), None)
        doc, v1 = documents.create_document(s, actor, knowledge_base_id=kb.id, title="Long page", markdown="one\n")
        s.commit()
    job = committed()  # the index job, between its chunk insert and its commit
    job.add(
        DocumentChunk(
            tenant_id=doc.tenant_id,
            workspace_id=doc.workspace_id,
            knowledge_base_id=doc.knowledge_base_id,
            document_id=doc.id,
            version_id=v1.id,
            ordinal=0,
            heading_path=[],
            content_text="one",
            content_markdown="one\n",
            token_count=1,
            meta={},
        )
    )
    job.flush()
    try:
        with committed() as s:
            s.execute(text("SET LOCAL lock_timeout = '3s'"))  # waiting for the job fails here, not hangs
            md = "two\n"
            res = versions.save_version(
                s, actor, doc.id, base_version_id=v1.id, markdown=md, markdown_hash=sha256_hex(md)
            )
            assert res.status == "created"
            restored = versions.restore_version(s, actor, doc.id, v1.id)
            assert restored.status == "created"
            documents.update_document(s, actor, doc.id, {"title": "Long page, renamed"})
            s.commit()
    finally:
        job.rollback()
        job.close()
    with committed() as s:
        assert s.get(Document, doc.id).title == "Long page, renamed"
