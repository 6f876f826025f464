"""Recent documents (GET /api/me/recent-documents): the caller's own saves, newest first, and
only what the caller can still read."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from openkb.content import documents, recent
from openkb.errors import Unauthenticated
from openkb.permissions import Principal
from openkb.permissions.collaborators import add_collaborator


def _ids(world, user, **kw):
    return [d["id"] for d in recent.recent_documents(world.db, world.principal(user), **kw)]


def test_own_saves_newest_first_without_trash_or_other_users(world):
    p = world.p
    a, _ = documents.create_document(world.db, world.actor(), knowledge_base_id=world.kb.id, title="A", markdown="a\n")
    b, _ = documents.create_document(world.db, world.actor(), knowledge_base_id=world.kb.id, title="B", markdown="b\n")
    c, _ = documents.create_document(world.db, world.actor(), knowledge_base_id=world.kb.id, title="C", markdown="c\n")
    world.db.flush()
    world.db.execute(  # distinct save times: the session's now() is one value per transaction
        text("UPDATE document_versions SET created_at = created_at - make_interval(secs => :s) WHERE document_id = :d"),
        [{"s": 30, "d": a.id}, {"s": 20, "d": b.id}, {"s": 10, "d": c.id}],
    )
    documents.trash_document(world.db, world.actor(), c.id)
    world.db.flush()
    got = recent.recent_documents(world.db, world.principal(p.owner))
    assert [d["id"] for d in got] == [b.id, a.id]
    assert got[0]["knowledge_base_title"] == world.kb.title and got[0]["title"] == "B"
    assert _ids(world, p.owner, limit=1) == [b.id]
    assert _ids(world, p.member) == []  # saves by someone else are not the member's recent documents


def test_a_document_the_caller_can_no_longer_read_is_left_out(world):
    p = world.p
    add_collaborator(
        world.db, world.principal(p.owner), world.kb, subject_type="user", subject_id=p.member.id, role="editor"
    )
    doc, _ = documents.create_document(
        world.db, world.actor(p.member), knowledge_base_id=world.kb.id, title="Mine", markdown="x\n"
    )
    world.db.flush()
    assert _ids(world, p.member) == [doc.id]
    # the owner closes the page: custom permission mode, private, no collaborators of its own
    documents.update_document(world.db, world.actor(), doc.id, {"permission_mode": "custom", "visibility": "private"})
    world.db.flush()
    assert _ids(world, p.member) == []
    assert _ids(world, p.owner) == []  # the owner never saved it


def test_anonymous_has_no_recent_documents(world):
    with pytest.raises(Unauthenticated):
        recent.recent_documents(world.db, Principal.anonymous(world.p.tenant.id))


def test_the_first_n_readable_even_when_many_newer_saves_are_hidden(world):
    """The statement itself applies the read rule, so ``limit`` counts readable documents: three
    newer hidden saves (one behind a closed folder: the folder-gate rule) don't crowd out the
    older readable one (a Python check after ``LIMIT 3 * limit`` returned nothing here)."""
    p = world.p
    add_collaborator(
        world.db, world.principal(p.owner), world.kb, subject_type="user", subject_id=p.member.id, role="editor"
    )
    folder, _ = documents.create_document(
        world.db, world.actor(), knowledge_base_id=world.kb.id, title="F", type="folder"
    )
    made = []
    for i, parent in enumerate([None, None, None, folder.id]):
        d, _ = documents.create_document(
            world.db,
            world.actor(p.member),
            knowledge_base_id=world.kb.id,
            title=f"D{i}",
            markdown="x\n",
            parent_id=parent,
        )
        made.append(d)
    world.db.flush()
    world.db.execute(  # d0 oldest ... d3 newest
        text("UPDATE document_versions SET created_at = created_at - make_interval(secs => :s) WHERE document_id = :d"),
        [{"s": 40 - 10 * i, "d": d.id} for i, d in enumerate(made)],
    )
    for d in made[1:3]:
        documents.update_document(world.db, world.actor(), d.id, {"permission_mode": "custom", "visibility": "private"})
    # the folder closes; d3 below it is workspace-visible and inherits, but the gate hides it
    documents.update_document(
        world.db, world.actor(), folder.id, {"permission_mode": "custom", "visibility": "private"}
    )
    world.db.flush()
    assert _ids(world, p.member, limit=1) == [made[0].id]
    assert _ids(world, p.member) == [made[0].id]


def _shared(world, user, **kw):
    return recent.shared_documents(world.db, world.principal(user), **kw)


def _custom_page(world, title, **kw):
    doc, _ = documents.create_document(
        world.db, world.actor(), knowledge_base_id=world.kb.id, title=title, markdown="x\n", **kw
    )
    documents.update_document(world.db, world.actor(), doc.id, {"permission_mode": "custom", "visibility": "private"})
    return doc


def test_documents_shared_with_one_directly_or_through_a_group_newest_first(world):
    """An outsider (no workspace) invited to single pages finds them on their home page: the
    strongest role of their grants, the newest grant's time and author; nothing for the others."""
    from tests.factories import make_group

    p = world.p
    owner = world.principal(p.owner)
    a, b = _custom_page(world, "A"), _custom_page(world, "B")
    group = make_group(world.db, p.tenant, p.owner, members=[p.outsider])
    add_collaborator(world.db, owner, a, subject_type="user", subject_id=p.outsider.id, role="viewer")
    add_collaborator(world.db, owner, b, subject_type="group", subject_id=group.id, role="viewer")
    add_collaborator(world.db, owner, b, subject_type="user", subject_id=p.outsider.id, role="editor")
    add_collaborator(world.db, owner, a, subject_type="user", subject_id=p.owner.id, role="editor")  # to oneself
    world.db.flush()
    world.db.execute(  # distinct grant times: a's older than b's
        text("UPDATE collaborators SET created_at = created_at - interval '1 minute' WHERE object_id = :d"),
        {"d": a.id},
    )
    got = _shared(world, p.outsider)
    assert [d["id"] for d in got] == [b.id, a.id]
    assert (got[0]["role"], got[1]["role"]) == ("editor", "viewer")  # b: the group's viewer and own editor
    assert got[0]["shared_by"]["id"] == p.owner.id
    assert got[0]["knowledge_base_title"] is None  # the outsider cannot open the knowledge base: not named
    assert [d["id"] for d in _shared(world, p.outsider, limit=1)] == [b.id]
    assert _shared(world, p.owner) == []  # they shared them (one with themselves): nothing was shared with them
    assert _shared(world, p.member) == []  # a member of the workspace, not a collaborator of these pages
    assert _shared(world, p.other_tenant_user) == []


def test_a_shared_document_one_can_no_longer_read_is_left_out(world):
    """Trashed, closed by a folder above it (the folder-gate rule), or switched back to inherit
    (its rows are dormant): gone from the list; the grant itself is not what is checked."""
    p = world.p
    owner = world.principal(p.owner)
    folder, _ = documents.create_document(
        world.db, world.actor(), knowledge_base_id=world.kb.id, title="F", type="folder"
    )
    trashed, gated, dormant = (
        _custom_page(world, "T"),
        _custom_page(world, "G", parent_id=folder.id),
        _custom_page(world, "D"),
    )
    for d in (trashed, gated, dormant):
        add_collaborator(world.db, owner, d, subject_type="user", subject_id=p.outsider.id, role="viewer")
    add_collaborator(world.db, owner, dormant, subject_type="user", subject_id=p.member.id, role="editor")
    world.db.flush()
    assert {d["id"] for d in _shared(world, p.outsider)} == {trashed.id, gated.id, dormant.id}
    assert [d["id"] for d in _shared(world, p.member)] == [dormant.id]
    documents.trash_document(world.db, world.actor(), trashed.id)
    documents.update_document(
        world.db, world.actor(), folder.id, {"permission_mode": "custom", "visibility": "private"}
    )
    documents.update_document(world.db, world.actor(), dormant.id, {"permission_mode": "inherit"})
    world.db.flush()
    assert _shared(world, p.outsider) == []
    # the member still reads the inherit page (the workspace may), but nobody shares it with them now
    assert documents.get_document(world.db, world.principal(p.member), dormant.id)["id"] == dormant.id
    assert _shared(world, p.member) == []


def test_anonymous_has_no_shared_documents(world):
    with pytest.raises(Unauthenticated):
        recent.shared_documents(world.db, Principal.anonymous(world.p.tenant.id))
