"""Only what the caller may read (docs/export.md#what-goes-in): an outsider and a guest get a
partial export or 404 exactly as the permission oracle (``filter_readable_documents``) says; what
is left out is counted and never named; share-link visitors and anonymous callers cannot export;
an export is audited."""

from __future__ import annotations

import io
import json
import uuid

import pytest
from sqlmodel import Session, col, select

from openkb.assets import upload_asset
from openkb.errors import NotFound, PermissionDenied
from openkb.exporting.service import Target, export_tree
from openkb.models import AuditLog, Document, DocumentAsset, DocumentVersion
from openkb.permissions import Principal
from openkb.permissions.service import can_read_knowledge_base, filter_readable_documents
from tests.export.conftest import kb_target, members, png
from tests.factories import grant, make_doc


@pytest.fixture(scope="module")
def place(world):
    """A workspace-visible knowledge base with a private custom folder (a guest is its viewer)
    holding a page only its owner reads, and a draft; a private knowledge base with one workspace-visible page."""
    kb = world.new_kb("workspace")
    closed = world.new_kb("private")
    with Session(world.engine, expire_on_commit=False) as s:
        open_page = make_doc(s, kb, world.owner, title="Open page", markdown="# Open\n")
        secret = make_doc(
            s, kb, world.owner, type="folder", title="Secret 机密", permission_mode="custom", visibility="private"
        )
        hidden = make_doc(
            s,
            kb,
            world.owner,
            parent=secret,
            title="Hidden plan",
            markdown="# plan\n",
            permission_mode="custom",
            visibility="private",
        )
        shared = make_doc(s, kb, world.owner, parent=secret, title="Shared with guest", markdown="# shared\n")
        grant(s, "document", secret.id, world.guest, "viewer", tenant_id=world.tenant.id)
        draft = make_doc(s, kb, world.owner, title="Draft idea", status="draft", markdown="# draft\n")
        folder = make_doc(s, closed, world.owner, type="folder", title="Private folder")
        wide = make_doc(
            s,
            closed,
            world.owner,
            parent=folder,
            title="Workspace page",
            markdown="# wide\n",
            permission_mode="custom",
            visibility="workspace",
        )
        s.commit()
    # a readable page showing an image of the hidden page: the image is left out, counted
    with world.units() as s:
        a = upload_asset(
            s,
            world.actor(),
            world.blobs,
            io.BytesIO(png()),
            size=len(png()),
            filename="x.png",
            content_type="image/png",
        )
        a.document_id = hidden.id
        s.add(a)
        d = s.get(Document, open_page.id)
        v = s.get(DocumentVersion, d.current_version_id)
        v.markdown = f"# Open\n\n![x](asset://{a.id})\n"
        s.add(v)
    return {
        "kb": kb,
        "closed": closed,
        "open": open_page.id,
        "secret": secret.id,
        "hidden": hidden.id,
        "shared": shared.id,
        "draft": draft.id,
        "folder": folder.id,
        "wide": wide.id,
    }


def _oracle(world, who, kb) -> set[str]:
    """Readable and published: what the permission service lets this person read directly."""
    with Session(world.engine) as s:
        ids = s.exec(select(Document.id).where(col(Document.knowledge_base_id) == kb.id)).all()
        readable = filter_readable_documents(s, world.principal(who), ids)
        drafts = set(s.exec(select(Document.id).where(col(Document.status) != "published")).all())
    return {str(d) for d in readable - drafts}


def _manifest(data: bytes) -> dict:
    return json.loads(members(data)["openkb-export.json"])


@pytest.mark.parametrize("who", ["owner", "editor", "viewer", "member", "guest", "outsider"])
def test_exports_follow_the_oracle(world, place, who):
    person = getattr(world, who)
    for kb in (place["kb"], place["closed"]):
        with Session(world.engine) as s:
            opens = can_read_knowledge_base(s, world.principal(person), kb.id)
            total = len(s.exec(select(Document.id).where(col(Document.knowledge_base_id) == kb.id)).all())
        if not opens:
            with pytest.raises(NotFound):
                world.export(kb_target(kb), who=person)
            continue
        data = world.export(kb_target(kb), who=person)
        m = _manifest(data)
        got = {d["id"] for d in m["documents"]}
        assert got == _oracle(world, person, kb)
        assert len(got) + m["left_out"]["unreadable"] + m["left_out"]["drafts"] == total
        blob = b"".join(members(data).values())
        titles = {d["title"] for d in m["documents"]}
        for t in ("Hidden plan", "Secret 机密", "Shared with guest", "Draft idea"):
            assert (t in titles) == (t.encode() in blob), t  # what is left out is never named


def test_member_gets_a_readable_page_of_a_private_knowledge_base_at_the_top(world, place):
    """A custom workspace-visible page in a private knowledge base: the member may read the page,
    not the knowledge base, so the knowledge base is 404 and the page exports on its own."""
    with pytest.raises(NotFound):
        world.export(kb_target(place["closed"]), who=world.member)
    data = world.export(Target("document", place["wide"]), who=world.member)
    assert sorted(p for p in members(data) if p.endswith(".md")) == ["Workspace page.md"]


def test_guest_and_outsider(world, place):
    for who in (world.guest, world.outsider):
        with pytest.raises(NotFound):
            world.export(kb_target(place["kb"]), who=who)
        with pytest.raises(NotFound):
            world.export(Target("document", place["open"]), who=who)
    with pytest.raises(NotFound):
        world.export(Target("document", place["hidden"]), who=world.guest)
    # the guest reads the custom folder and the page shared with them, not the hidden page
    m = _manifest(world.export(Target("document", place["secret"]), who=world.guest))
    assert [d["title"] for d in m["documents"]] == ["Secret 机密", "Shared with guest"]
    assert m["left_out"]["unreadable"] == 1  # the hidden page: counted, not named
    assert {d["id"] for d in m["documents"]} == {str(place["secret"]), str(place["shared"])}


def test_unreadable_asset_is_counted_and_its_reference_kept(world, place):
    data = world.export(kb_target(place["kb"]), who=world.editor)
    m = _manifest(data)
    assert m["left_out"]["assets_unreadable"] == 1 and m["assets"] == []
    assert b"asset://" in members(data)["Open page.md"]
    owner = _manifest(world.export(kb_target(place["kb"])))
    assert owner["left_out"]["assets_unreadable"] == 0 and len(owner["assets"]) == 1


def test_share_link_visitor_and_anonymous_cannot_export(world, place):
    link = Principal(kind="share_link", tenant_id=world.tenant.id, share_link_id=uuid.uuid4())
    for p in (link, Principal.anonymous(world.tenant.id)):
        with world.units() as s, pytest.raises(PermissionDenied):
            export_tree(s, p, kb_target(place["kb"]), io.BytesIO(), world.blobs)


def test_unknown_ids_are_404(world):
    for target in (Target("knowledge_base", uuid.uuid4()), Target("document", uuid.uuid4())):
        with pytest.raises(NotFound):
            world.export(target)


def test_export_is_audited(world, place):
    world.export(kb_target(place["kb"]), who=world.viewer)
    with Session(world.engine) as s:
        row = s.exec(
            select(AuditLog)
            .where(col(AuditLog.action) == "content.exported", col(AuditLog.object_id) == place["kb"].id)
            .where(col(AuditLog.actor_user_id) == world.viewer.id)
        ).first()
    assert row is not None and row.object_type == "knowledge_base"
    assert row.meta["left_out"]["unreadable"] >= 1 and row.meta["pages"] >= 1
    assert "Hidden plan" not in json.dumps(row.meta)
    with Session(world.engine) as s:  # the asset row is untouched by the export
        assert s.exec(select(DocumentAsset).where(col(DocumentAsset.document_id) == place["hidden"])).first()
