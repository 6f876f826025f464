"""Duplicating a page (openkb.content.documents.duplicate_document; docs/api.md#duplicating-a-page):
the copy sits right after the page with its body, metadata, tags and status; its images get rows
of their own sharing the page's files; a custom page's copy has the page's permissions, so nobody
reads the copy who could not read the page."""

from __future__ import annotations

import io
import uuid

import pytest
from sqlmodel import col, select

from openkb.assets import delete_asset, upload_asset
from openkb.config import Settings
from openkb.content import documents
from openkb.content.versions import current_version, save_version, sha256_hex
from openkb.errors import DuplicateTooLarge, InvalidMove, NotFound, PermissionDenied, ValidationError
from openkb.models import AuditLog, Collaborator, Document, DocumentAsset
from openkb.permissions.collaborators import add_collaborator
from openkb.storage import LocalBlobStore
from tests.factories import make_kb, make_workspace


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

    def upload(data: bytes, filename: str, content_type: str):
        return upload_asset(
            world.db,
            world.actor(),
            blobs,
            io.BytesIO(data),
            size=None,
            filename=filename,
            content_type=content_type,
            document_id=page.id,
        )

    png = upload(b"\x89PNG fake image", "a.png", "image/png")
    unshown = upload(b"%PDF not shown", "b.pdf", "application/pdf")
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


def _folder(world, title, parent=None):
    doc, _ = documents.create_document(
        world.db, world.actor(), knowledge_base_id=world.kb.id, title=title, type="folder", parent_id=parent
    )
    return doc


def _under(world, parent_id, who=None):
    """(title, type) of the documents under ``parent_id`` in their order, recursively: [(t, type, [...])]."""
    kids = world.db.exec(
        select(Document).where(Document.parent_id == parent_id).order_by(col(Document.sort_order))
    ).all()
    return [(k.title, k.type, _under(world, k.id)) for k in kids]


def test_a_folder_copies_with_what_it_holds_in_order_and_its_links_point_within_the_copy(world):
    outside = _page(world, "Outside")
    folder = _folder(world, "Template 模板")
    b_id = uuid.uuid4()
    a = _page(
        world,
        "A",
        f"See [B](openkb://document/{b_id}) and [out](openkb://document/{outside.id}).\n",
        parent_id=folder.id,
    )
    b = _page(world, "B", "# B\n", parent_id=folder.id, document_id=b_id, status="draft")
    sub = _folder(world, "Sub", folder.id)
    _page(world, "C", f"Back to [A](openkb://document/{a.id}#part).\n", parent_id=sub.id)
    after = _page(world, "After")
    with pytest.raises(ValidationError) as e:  # a folder alone is no copy of it
        documents.duplicate_document(world.db, world.actor(), folder.id)
    assert e.value.extra["field"] == "with_children"
    copy, version = documents.duplicate_document(world.db, world.actor(), folder.id, with_children=True)
    world.db.flush()
    assert version is None and (copy.title, copy.type, copy.parent_id) == ("Template 模板 (copy)", "folder", None)
    top = world.db.exec(
        select(Document.id)
        .where(Document.parent_id.is_(None), Document.knowledge_base_id == world.kb.id)
        .order_by(col(Document.sort_order))
    ).all()
    assert top == [outside.id, folder.id, copy.id, after.id]
    assert _under(world, copy.id) == [("A", "page", []), ("B", "page", []), ("Sub", "folder", [("C", "page", [])])]
    assert _under(world, copy.id) == _under(world, folder.id)
    under = {d.title: d for d in world.db.exec(select(Document).where(Document.parent_id == copy.id)).all()}
    a2, b2 = under["A"], under["B"]
    c2 = world.db.exec(select(Document).where(Document.parent_id == under["Sub"].id)).one()
    assert b2.status == "draft"
    # A's copy links to B's copy; the link out of the folder stays; C's copy keeps the fragment
    assert _body(world, a2) == f"See [B](openkb://document/{b2.id}) and [out](openkb://document/{outside.id}).\n"
    assert _body(world, c2) == f"Back to [A](openkb://document/{a2.id}#part).\n"
    assert _body(world, a) == f"See [B](openkb://document/{b.id}) and [out](openkb://document/{outside.id}).\n"
    audit = world.db.exec(
        select(AuditLog).where(AuditLog.action == "document.duplicate", AuditLog.object_id == copy.id)
    ).one()
    assert audit.meta["documents"] == 5 and audit.meta["source_id"] == str(folder.id)


def test_a_page_copies_its_sub_pages_only_when_asked(world):
    page = _page(world, "Parent")
    _page(world, "Child", parent_id=page.id)
    alone, _ = documents.duplicate_document(world.db, world.actor(), page.id)
    world.db.flush()
    assert _under(world, alone.id) == []
    whole, _ = documents.duplicate_document(world.db, world.actor(), page.id, with_children=True)
    world.db.flush()
    assert whole.title == "Parent (copy)" and _under(world, whole.id) == [("Child", "page", [])]


def test_what_the_caller_cannot_read_under_it_is_not_copied(world):
    p = world.p
    add_collaborator(
        world.db, world.principal(p.owner), world.kb, subject_type="user", subject_id=p.member.id, role="editor"
    )
    folder = _folder(world, "Team")
    _page(world, "Open", parent_id=folder.id)
    hidden = _page(world, "Salaries", parent_id=folder.id)
    documents.update_document(
        world.db, world.actor(), hidden.id, {"permission_mode": "custom", "visibility": "private"}
    )
    _page(world, "Under the hidden one", parent_id=hidden.id)
    trashed = _page(world, "Trashed", parent_id=folder.id)
    documents.trash_document(world.db, world.actor(), trashed.id)
    world.db.flush()
    copy, _ = documents.duplicate_document(world.db, world.actor(p.member), folder.id, with_children=True)
    world.db.flush()
    assert _under(world, copy.id) == [
        ("Open", "page", [])
    ]  # the hidden page, what is under it and the trash: not copied
    mine, _ = documents.duplicate_document(world.db, world.actor(), folder.id, with_children=True)
    world.db.flush()
    assert _under(world, mine.id) == [
        ("Open", "page", []),
        ("Salaries", "page", [("Under the hidden one", "page", [])]),
    ]
    salaries = world.db.exec(select(Document).where(Document.parent_id == mine.id, Document.title == "Salaries")).one()
    assert (salaries.permission_mode, salaries.visibility) == ("custom", "private")
    with pytest.raises(NotFound):  # still hidden from the member in its copy
        documents.get_document(world.db, world.principal(p.member), salaries.id)


def test_a_duplicate_past_the_limit_is_refused_before_anything_is_copied(world):
    folder = _folder(world, "Big")
    for k in range(3):
        _page(world, f"P{k}", parent_id=folder.id)
    world.db.flush()
    before = len(world.db.exec(select(Document.id)).all())
    with pytest.raises(DuplicateTooLarge) as e:
        documents.duplicate_document(
            world.db, world.actor(), folder.id, with_children=True, settings=Settings(max_duplicate_documents=3)
        )
    assert "limit of 3" in str(e.value) and e.value.code == "DUPLICATE_TOO_LARGE"
    assert len(world.db.exec(select(Document.id)).all()) == before


def test_a_copy_sent_to_another_knowledge_base_or_folder(world):
    p = world.p
    other = make_kb(world.db, p.workspace, p.owner, visibility="workspace")
    hidden = make_kb(world.db, p.workspace, p.owner, visibility="private")
    foreign = make_kb(world.db, make_workspace(world.db, p.other_tenant, p.other_tenant_user), p.other_tenant_user)
    there, _ = documents.create_document(world.db, world.actor(), knowledge_base_id=other.id, title="Already there")
    shelf, _ = documents.create_document(
        world.db, world.actor(), knowledge_base_id=other.id, title="Shelf", type="folder"
    )
    folder = _folder(world, "Kit")
    a = _page(world, "A", "# A\n", parent_id=folder.id)
    _page(world, "B", f"[A](openkb://document/{a.id})\n", parent_id=folder.id)
    # into another knowledge base's top: last there, its own title, links within the copy
    copy, _ = documents.duplicate_document(
        world.db, world.actor(), folder.id, with_children=True, knowledge_base_id=other.id
    )
    world.db.flush()
    assert (copy.knowledge_base_id, copy.parent_id, copy.title) == (other.id, None, "Kit")
    top = world.db.exec(
        select(Document.id)
        .where(Document.knowledge_base_id == other.id, Document.parent_id.is_(None))
        .order_by(col(Document.sort_order))
    ).all()
    assert top == [there.id, shelf.id, copy.id]
    kids = {d.title: d for d in world.db.exec(select(Document).where(Document.parent_id == copy.id)).all()}
    assert {d.knowledge_base_id for d in kids.values()} == {other.id}
    assert _body(world, kids["B"]) == f"[A](openkb://document/{kids['A'].id})\n"
    # under a folder, given by itself: its knowledge base is the folder's
    sent, _ = documents.duplicate_document(world.db, world.actor(), a.id, parent_id=shelf.id)
    world.db.flush()
    assert (sent.knowledge_base_id, sent.parent_id, sent.title) == (other.id, shelf.id, "A")
    # beside the original, asked for explicitly: renamed, as a copy among the same pages is
    again, _ = documents.duplicate_document(
        world.db, world.actor(), a.id, knowledge_base_id=world.kb.id, parent_id=folder.id
    )
    assert again.title == "A (copy)"
    # where the caller cannot see: as if nothing were there; where they only read: refused
    add_collaborator(
        world.db, world.principal(p.owner), world.kb, subject_type="user", subject_id=p.member.id, role="editor"
    )
    for kb_id in (hidden.id, foreign.id):
        with pytest.raises(NotFound):
            documents.duplicate_document(world.db, world.actor(p.member), a.id, knowledge_base_id=kb_id)
    with pytest.raises(NotFound):
        documents.duplicate_document(world.db, world.actor(p.member), a.id, parent_id=uuid.uuid4())
    with pytest.raises(PermissionDenied):  # a workspace member reads the other knowledge base only
        documents.duplicate_document(world.db, world.actor(p.member), a.id, knowledge_base_id=other.id)
    with pytest.raises(InvalidMove):  # a parent from another knowledge base than the one named
        documents.duplicate_document(world.db, world.actor(), a.id, knowledge_base_id=world.kb.id, parent_id=shelf.id)


def test_a_stored_body_is_copied_as_stored_without_a_second_parse(world):
    """The copy's body is the stored version's, byte for byte: a page saved before a stricter
    dialect rule (here raw HTML, refused by today's editor) still copies, unchanged."""
    page = _page(world, "Old page", "# Old\n")
    v = current_version(world.db, page)
    v.markdown = "<div>kept from an older release</div>\n\n* a\n"  # as an older release stored it
    world.db.add(v)
    world.db.flush()
    copy, version = documents.duplicate_document(world.db, world.actor(), page.id)
    assert version.markdown == "<div>kept from an older release</div>\n\n* a\n"
    assert version.markdown_hash == sha256_hex(version.markdown)


def test_a_page_linking_to_itself_links_to_itself_in_its_copy(world):
    page = _page(world, "Self", "# Self\n")
    body = f"# Self\n\nBack to [the top](openkb://document/{page.id}#self).\n"
    v = current_version(world.db, page)
    save_version(world.db, world.actor(), page.id, base_version_id=v.id, markdown=body, markdown_hash=sha256_hex(body))
    copy, version = documents.duplicate_document(world.db, world.actor(), page.id)
    assert version.markdown == body.replace(str(page.id), str(copy.id))
