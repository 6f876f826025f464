"""Duplicating a page (openkb.content.documents.duplicate_document; docs/api.md#duplicating-a-page):
the copy sits right after the page with its body, metadata, tags and status; its images get rows
of their own sharing the page's files; a custom page's copy has the page's permissions, so nobody
reads the copy who could not read the page."""

from __future__ import annotations

import io

import pytest
from sqlmodel import col, select

from openkb.assets import delete_asset, upload_asset
from openkb.content import documents
from openkb.content.versions import current_version, save_version, sha256_hex
from openkb.errors import NotFound, PermissionDenied, ValidationError
from openkb.models import Collaborator, Document, DocumentAsset
from openkb.permissions.collaborators import add_collaborator
from openkb.storage import LocalBlobStore


def _page(world, title="Plan", markdown="# Plan\n", **kw):
    doc, _ = documents.create_document(
        world.db, world.actor(), knowledge_base_id=world.kb.id, title=title, markdown=markdown, **kw
    )
    return doc


def _body(world, doc):
    return current_version(world.db, world.db.get(Document, doc.id)).markdown


def test_a_copy_right_after_the_page_with_its_body_fields_and_images(world, tmp_path):
    blobs = LocalBlobStore(tmp_path / "blobs")
    first = _page(world, "First")
    page = _page(world, "计划 Plan", metadata={"team": "ops", "n": 3}, tags=["q3"], status="draft")
    last = _page(world, "Last")
    png = upload_asset(
        world.db,
        world.actor(),
        blobs,
        io.BytesIO(b"\x89PNG fake image"),
        size=None,
        filename="a.png",
        content_type="image/png",
        document_id=page.id,
    )
    unshown = upload_asset(
        world.db,
        world.actor(),
        blobs,
        io.BytesIO(b"%PDF not shown"),
        size=None,
        filename="b.pdf",
        content_type="application/pdf",
        document_id=page.id,
    )
    body = f"# Plan\n\n![chart](asset://{png.id})\n\nSee [first](openkb://document/{first.id}).\n"
    v = current_version(world.db, page)
    save_version(world.db, world.actor(), page.id, base_version_id=v.id, markdown=body, markdown_hash=sha256_hex(body))
    copy, version = documents.duplicate_document(world.db, world.actor(), page.id)
    world.db.flush()
    assert (copy.title, copy.status, copy.meta, copy.tags) == (
        "计划 Plan (copy)",
        "draft",
        {"team": "ops", "n": 3},
        ["q3"],
    )
    assert (copy.parent_id, copy.type, copy.permission_mode) == (page.parent_id, "page", "inherit")
    order = world.db.exec(
        select(Document.id).where(Document.knowledge_base_id == world.kb.id).order_by(col(Document.sort_order))
    ).all()
    assert order == [first.id, page.id, copy.id, last.id]
    twin = world.db.exec(
        select(DocumentAsset).where(DocumentAsset.document_id == copy.id)
    ).one()  # the shown image only
    assert twin.id != png.id and (twin.object_key, twin.sha256, twin.filename) == (png.object_key, png.sha256, "a.png")
    assert version.markdown == body.replace(str(png.id), str(twin.id))  # the internal link is unchanged
    assert _body(world, page) == body  # the page itself is untouched
    # the copy's image is its own row on the shared file: deleting the page's leaves it readable
    delete_asset(world.db, world.actor(), blobs, png.id)
    world.db.flush()
    assert blobs.exists(twin.object_key)
    # the attachment the body does not show stayed with the page alone (read back, not the object)
    on_page = world.db.exec(select(DocumentAsset.id).where(DocumentAsset.document_id == page.id)).all()
    assert on_page == [unshown.id]


def test_a_custom_page_copy_has_its_permissions(world):
    p = world.p
    for who in (p.member, p.admin):  # both may write in the knowledge base
        add_collaborator(
            world.db, world.principal(p.owner), world.kb, subject_type="user", subject_id=who.id, role="editor"
        )
    page = _page(world, "Private")
    documents.update_document(world.db, world.actor(), page.id, {"permission_mode": "custom", "visibility": "private"})
    add_collaborator(
        world.db, world.principal(p.owner), page, subject_type="user", subject_id=p.member.id, role="editor"
    )
    world.db.flush()
    copy, _ = documents.duplicate_document(world.db, world.actor(p.member), page.id)  # an editor of the page copies it
    world.db.flush()
    assert (copy.permission_mode, copy.visibility) == ("custom", "private")
    grants = world.db.exec(
        select(Collaborator.subject_id, Collaborator.role).where(Collaborator.object_id == copy.id)
    ).all()
    assert sorted(grants) == sorted(
        world.db.exec(select(Collaborator.subject_id, Collaborator.role).where(Collaborator.object_id == page.id)).all()
    )
    assert documents.get_document(world.db, world.principal(p.member), copy.id)["title"] == "Private (copy)"
    with pytest.raises(NotFound):
        documents.get_document(world.db, world.principal(p.admin), page.id)
    for who in (p.admin, p.outsider, p.guest):  # a knowledge base editor outside the page's rows reads neither
        with pytest.raises(NotFound):
            documents.get_document(world.db, world.principal(who), copy.id)


def test_who_may_not_duplicate_and_what_cannot_be(world):
    p = world.p
    page = _page(world, "Readable")
    for who in (p.outsider, p.guest, p.other_tenant_user):  # cannot read it: no such page
        with pytest.raises(NotFound):
            documents.duplicate_document(world.db, world.actor(who), page.id)
    with pytest.raises(PermissionDenied):  # reads it (workspace member) but has no role to create beside it
        documents.duplicate_document(world.db, world.actor(p.member), page.id)
    folder, _ = documents.create_document(
        world.db, world.actor(), knowledge_base_id=world.kb.id, title="F", type="folder"
    )
    with pytest.raises(ValidationError):
        documents.duplicate_document(world.db, world.actor(), folder.id)


def test_an_archived_page_copies_as_a_draft_and_a_long_title_is_cut(world):
    long = _page(world, "x" * 1000)
    documents.update_document(world.db, world.actor(), long.id, {"status": "archived"})
    copy, _ = documents.duplicate_document(world.db, world.actor(), long.id)
    assert copy.status == "draft" and len(copy.title) == 1000 and copy.title.endswith("x (copy)")
    named, _ = documents.duplicate_document(world.db, world.actor(), long.id, title="  Template  ")
    assert named.title == "Template"
