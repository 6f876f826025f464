"""Documents and the tree: create, move (cycles, depth, renumbering), trash, restore, purge."""

from __future__ import annotations

import uuid

import pytest
from sqlmodel import select

from openkb.config import Settings
from openkb.content import documents, tree
from openkb.content.limits import FolderDepthExceeded, MetadataTooLarge, TitleTooLong
from openkb.content.tree import InvalidMove
from openkb.errors import DocumentInTrash, NotFound, PermissionDenied, ValidationError
from openkb.models import Document
from tests.factories import grant, make_doc, make_kb, make_workspace


def _mk(world, title, parent=None, type="folder", **kw):
    doc, _ = documents.create_document(
        world.db,
        world.actor(),
        knowledge_base_id=world.kb.id,
        title=title,
        type=type,
        parent_id=parent.id if parent else None,
        **kw,
    )
    return doc


def _order(world, parent):
    rows = (
        world.db.exec(
            select(Document)
            .where(Document.knowledge_base_id == world.kb.id, Document.parent_id == (parent.id if parent else None))
            .order_by(Document.sort_order)
        ).all()
        if parent
        else world.db.exec(
            select(Document)
            .where(Document.knowledge_base_id == world.kb.id, Document.parent_id.is_(None))
            .order_by(Document.sort_order)
        ).all()
    )
    return [(d.title, d.sort_order) for d in rows if d.status != "deleted"]


def test_create_read_and_path(world):
    f = _mk(world, "Folder")
    page = _mk(world, "Page", f, type="page", markdown="# 标题\n", metadata={"k": "v"}, tags=["a", "a", "b"])
    out = documents.get_document(world.db, world.principal(world.p.member), page.id)
    assert out["markdown"] == "# 标题\n" and out["version_no"] == 1 and out["type"] == "page"
    assert out["metadata"] == {"k": "v"} and out["tags"] == ["a", "b"]
    assert out["path"] == [{"id": f.id, "title": "Folder", "type": "folder"}]
    assert "edit" not in out["capabilities"] and "read" in out["capabilities"]
    folder = documents.get_document(world.db, world.principal(world.p.owner), f.id)
    assert folder["markdown"] is None and folder["current_version_id"] is None


def test_folder_has_no_body_and_bad_type(world):
    with pytest.raises(ValidationError):
        _mk(world, "F", markdown="# no\n")
    with pytest.raises(ValidationError):
        _mk(world, "X", type="chapter")


def test_create_permission_and_visibility(world):
    with pytest.raises(PermissionDenied):  # member can read a workspace KB but not create in it
        documents.create_document(world.db, world.actor(world.p.member), knowledge_base_id=world.kb.id, title="x")
    for u in (world.p.guest, world.p.other_tenant_user):
        with pytest.raises(NotFound):
            documents.create_document(world.db, world.actor(u), knowledge_base_id=world.kb.id, title="x")
    grant(world.db, "knowledge_base", world.kb.id, world.p.member, "editor", tenant_id=world.p.tenant.id)
    doc, v = documents.create_document(
        world.db, world.actor(world.p.member), knowledge_base_id=world.kb.id, title="by editor"
    )
    assert v is not None and doc.status == "published"


def test_move_reorder_and_renumber(world):
    a, b, c = _mk(world, "A"), _mk(world, "B"), _mk(world, "C")
    assert _order(world, None)[-3:] == [("A", 0), ("B", 1), ("C", 2)]
    documents.update_document(world.db, world.actor(), c.id, {"sort_order": 0})
    assert [t for t, _ in _order(world, None)] == ["C", "A", "B"]
    assert [o for _, o in _order(world, None)] == [0, 1, 2]
    documents.update_document(world.db, world.actor(), b.id, {"parent_id": a.id})
    assert _order(world, a) == [("B", 0)] and [t for t, _ in _order(world, None)] == ["C", "A"]
    documents.update_document(world.db, world.actor(), c.id, {"parent_id": a.id, "sort_order": 0})
    assert _order(world, a) == [("C", 0), ("B", 1)]


def test_move_into_own_descendant_is_invalid_move(world):
    a = _mk(world, "A")
    b = _mk(world, "B", a)
    c = _mk(world, "C", b)
    for target in (b, c, a):
        with pytest.raises(InvalidMove) as ei:
            documents.update_document(world.db, world.actor(), a.id, {"parent_id": target.id})
        assert ei.value.code == "INVALID_MOVE" and ei.value.http_status == 422


def test_move_to_other_kb_is_invalid(world):
    other = make_kb(world.db, world.p.workspace, world.p.owner)
    x = make_doc(world.db, other, world.p.owner, type="folder")
    a = _mk(world, "A")
    with pytest.raises(InvalidMove):
        documents.update_document(world.db, world.actor(), a.id, {"parent_id": x.id})


def test_depth_limit_on_create_and_move(world, monkeypatch):
    s = Settings(max_folder_depth=3)
    a = _mk(world, "1")
    b = _mk(world, "2", a)
    c, _ = documents.create_document(
        world.db, world.actor(), knowledge_base_id=world.kb.id, title="3", type="folder", parent_id=b.id, settings=s
    )
    with pytest.raises(FolderDepthExceeded) as ei:
        documents.create_document(
            world.db, world.actor(), knowledge_base_id=world.kb.id, title="4", parent_id=c.id, settings=s
        )
    assert ei.value.code == "FOLDER_DEPTH_EXCEEDED" and ei.value.extra["max"] == 3
    x = _mk(world, "x")
    _mk(world, "y", x)
    with pytest.raises(FolderDepthExceeded):  # x has height 2: under b it would reach depth 4
        documents.update_document(world.db, world.actor(), x.id, {"parent_id": b.id}, settings=s)
    documents.update_document(world.db, world.actor(), x.id, {"parent_id": a.id}, settings=s)


def test_limits_on_create(world):
    with pytest.raises(TitleTooLong):
        _mk(world, "t" * 1001)
    with pytest.raises(MetadataTooLarge):
        _mk(world, "m", type="page", metadata={"x": "y" * 70_000})
    with pytest.raises(ValidationError):
        _mk(world, "nul\x00")


def test_trash_restore_and_tree(world, queue):
    f = _mk(world, "F")
    p = _mk(world, "P", f, type="page")
    member = world.principal(world.p.member)
    ids = {uuid.UUID(i["id"]) for i in tree.get_tree(world.db, member, world.kb.id)}
    assert {f.id, p.id} <= ids
    documents.trash_document(world.db, world.actor(), f.id)
    ids = {uuid.UUID(i["id"]) for i in tree.get_tree(world.db, member, world.kb.id)}
    assert f.id not in ids and p.id not in ids  # the subtree goes with it
    with pytest.raises(NotFound):
        documents.get_document(world.db, member, p.id)
    trash = tree.list_trash(world.db, world.principal(world.p.owner), world.kb.id)
    assert [t["id"] for t in trash] == [f.id]
    assert tree.list_trash(world.db, member, world.kb.id) == []
    with pytest.raises(documents.NotInTrash):
        documents.restore_from_trash(world.db, world.actor(), p.id)
    documents.restore_from_trash(world.db, world.actor(), f.id)
    assert world.db.get(Document, f.id).status == "published"
    assert {f.id, p.id} <= {uuid.UUID(i["id"]) for i in tree.get_tree(world.db, member, world.kb.id)}
    world.commit()
    assert ("reindex_subtree", {"document_id": str(f.id)}) in queue.jobs


def test_restore_under_trashed_parent_goes_to_root(world):
    f = _mk(world, "F")
    p = _mk(world, "P", f, type="page")
    documents.trash_document(world.db, world.actor(), p.id)
    documents.trash_document(world.db, world.actor(), f.id)
    documents.restore_from_trash(world.db, world.actor(), p.id)
    assert world.db.get(Document, p.id).parent_id is None


def test_nothing_goes_under_a_parent_in_the_trash(world):
    """Create, move and copy under a trashed folder: DOCUMENT_IN_TRASH (with the folder's name)
    for those who see it in the trash, as for any missing parent (404) for those who do not."""
    f = _mk(world, "Old stuff")
    page = _mk(world, "Loose", type="page")
    documents.trash_document(world.db, world.actor(), f.id)
    tries = {
        "create": lambda who: documents.create_document(
            world.db, world.actor(who), knowledge_base_id=world.kb.id, title="X", parent_id=f.id
        ),
        "move": lambda who: documents.update_document(world.db, world.actor(who), page.id, {"parent_id": f.id}),
        "copy": lambda who: documents.duplicate_document(world.db, world.actor(who), page.id, parent_id=f.id),
    }
    for name, attempt in tries.items():
        with pytest.raises(DocumentInTrash) as e:
            attempt(world.p.owner)
        assert "'Old stuff' is in the trash" in str(e.value) and e.value.extra["field"] == "parent_id", name
        with pytest.raises(NotFound):  # a reader of the knowledge base, who cannot see the trash, learns nothing
            attempt(world.p.member)


def test_purge_only_from_trash(world):
    f = _mk(world, "F")
    p = _mk(world, "P", f, type="page")
    with pytest.raises(documents.NotInTrash):
        documents.purge_document(world.db, world.actor(), f.id)
    documents.trash_document(world.db, world.actor(), f.id)
    with pytest.raises(NotFound):  # a member cannot even see trashed documents
        documents.purge_document(world.db, world.actor(world.p.member), f.id)
    removed = documents.purge_document(world.db, world.actor(), f.id)
    assert set(removed) == {f.id, p.id}
    world.db.expire_all()
    assert world.db.get(Document, f.id) is None and world.db.get(Document, p.id) is None


def test_tree_hides_custom_private_and_reparents_open_child(world):
    f = _mk(world, "F")
    secret = _mk(world, "secret", f)
    documents.update_document(
        world.db, world.actor(), secret.id, {"permission_mode": "custom", "visibility": "private"}
    )
    member = world.principal(world.p.member)
    ids = {uuid.UUID(i["id"]) for i in tree.get_tree(world.db, member, world.kb.id)}
    assert f.id in ids and secret.id not in ids
    # a public custom page inside a private KB: an anonymous reader sees it at the root
    priv = make_kb(world.db, world.p.workspace, world.p.owner, visibility="private")
    folder = make_doc(world.db, priv, world.p.owner, type="folder")
    pub = make_doc(world.db, priv, world.p.owner, parent=folder, permission_mode="custom", visibility="public")
    from openkb.permissions import Principal

    anon = Principal.anonymous(world.p.tenant.id)
    with pytest.raises(NotFound):  # the private KB itself is not readable
        tree.get_tree(world.db, anon, priv.id)
    owner_tree = {uuid.UUID(i["id"]): i for i in tree.get_tree(world.db, world.principal(world.p.owner), priv.id)}
    assert owner_tree[pub.id]["parent_id"] == str(folder.id)  # tree ids are canonical strings


def test_tree_is_constant_queries(world, count_queries):
    f = _mk(world, "F")
    for i in range(5):
        _mk(world, f"p{i}", f, type="page")
    member = world.principal(world.p.member)
    with count_queries() as small:
        tree.get_tree(world.db, member, world.kb.id)
    for i in range(40):
        _mk(world, f"q{i}", f, type="page")
    with count_queries() as big:
        items = tree.get_tree(world.db, member, world.kb.id)
    assert len(items) >= 46 and big["n"] == small["n"] <= 3


def test_tree_listing_is_exact_for_any_title_and_key(world):
    """The tree travels as compact text records; titles and keys holding the separators (or
    anything else) still come back byte for byte, in tree order, through the JSON fallback."""
    from sqlalchemy import text

    owner = world.principal(world.p.owner)
    plain = make_doc(world.db, world.kb, world.p.owner, title="普通 plain, title; with separators")
    odd = make_doc(world.db, world.kb, world.p.owner, title="rs\x1eus\x1fgs\x1d end")
    world.db.execute(
        text("UPDATE documents SET external_key = :k WHERE id = :id"), {"k": "key\x1fwith us", "id": odd.id}
    )
    keyed = make_doc(world.db, world.kb, world.p.owner, title="keyed")
    world.db.execute(
        text("UPDATE documents SET external_key = 'plain-key', sort_order = -1 WHERE id = :id"), {"id": keyed.id}
    )
    expected = [
        (str(r[0]), r[1], r[2], r[3])
        for r in world.db.execute(
            text(
                "SELECT id, title, external_key, sort_order FROM documents WHERE knowledge_base_id = :kb "
                "AND status <> 'deleted' ORDER BY sort_order, created_at, id"
            ),
            {"kb": world.kb.id},
        )
    ]
    got = [
        (i["id"], i["title"], i["external_key"], i["sort_order"]) for i in tree.get_tree(world.db, owner, world.kb.id)
    ]
    assert got == expected and got[0][0] == str(keyed.id)
    assert {str(plain.id), str(odd.id)} <= {g[0] for g in got}
    # without the odd document the compact form is used, with the same answer
    world.db.execute(
        text("UPDATE documents SET title = :t, external_key = :k WHERE id = :id"),
        {"t": "tame\x1e\x1d", "k": "k\x1d,;", "id": odd.id},
    )
    got = {i["id"]: (i["title"], i["external_key"]) for i in tree.get_tree(world.db, owner, world.kb.id)}
    assert got[str(odd.id)] == ("tame\x1e\x1d", "k\x1d,;") and got[str(keyed.id)] == ("keyed", "plain-key")
    assert got[str(plain.id)] == ("普通 plain, title; with separators", None)


def test_tree_refuses_a_document_of_another_tenant_like_the_batch_path(world):
    """A row whose tenant differs from its knowledge base's (never written by OpenKB, but the rules
    must still refuse it) is hidden from the tree exactly as the generic check hides it; one whose
    workspace differs keeps its own workspace in the facts."""
    from sqlalchemy import text

    from openkb.permissions import filter_readable_documents
    from openkb.permissions.loader import load_kb_snapshot

    owner = world.principal(world.p.owner)
    stray = make_doc(world.db, world.kb, world.p.owner, title="stray")
    moved_ws = make_doc(world.db, world.kb, world.p.owner, title="other workspace row")
    other_ws = make_workspace(world.db, world.p.tenant, world.p.owner)
    world.db.execute(
        text("UPDATE documents SET tenant_id = :t WHERE id = :id"), {"t": world.p.other_tenant.id, "id": stray.id}
    )
    ids = {i["id"] for i in tree.get_tree(world.db, owner, world.kb.id)}
    assert str(stray.id) not in ids and str(moved_ws.id) in ids
    assert filter_readable_documents(world.db, owner, [stray.id, moved_ws.id]) == {moved_ws.id}
    snap = load_kb_snapshot(world.db, owner, world.kb.id)
    assert snap.docs[str(stray.id)].tenant_id == str(world.p.other_tenant.id)
    assert snap.docs[str(moved_ws.id)].workspace_id == str(world.kb.workspace_id)
    world.db.execute(
        text("UPDATE documents SET workspace_id = :w WHERE id = :id"), {"w": other_ws.id, "id": moved_ws.id}
    )
    assert load_kb_snapshot(world.db, owner, world.kb.id).docs[str(moved_ws.id)].workspace_id == str(other_ws.id)
