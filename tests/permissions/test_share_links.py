"""Share links (docs/permissions.md#share-links): read-only, hashed, password + rate limit + audit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from openkb.errors import NotFound, PermissionDenied, RateLimited, Unauthenticated, ValidationError
from openkb.models import AuditLog, ShareLink
from openkb.permissions import (
    Action,
    Principal,
    can_create_share_link,
    can_edit_document,
    can_read_document,
    document_capabilities,
    filter_readable_documents,
)
from openkb.permissions.share_links import (
    SharePasswordIncorrect,
    SharePasswordRequired,
    create_share_link,
    list_share_links,
    open_share_link,
    revoke_share_link,
)
from openkb.security import hash_token
from tests.factories import grant, make_doc, make_kb


def test_share_links_are_read_only(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner)
    for permission in ("edit", "manage", "comment"):
        with pytest.raises(ValidationError):
            create_share_link(db, P(w.owner), doc, permission=permission)
    created = create_share_link(db, P(w.owner), doc)
    assert created.link.permission == "view"
    visitor = open_share_link(db, created.token).raise_for_status()
    caps = document_capabilities(db, visitor, [doc.id])[doc.id]
    assert caps == {Action.READ, Action.SEARCH}
    # even a logged-in owner visiting through the link gets a read-only principal
    as_owner = open_share_link(db, created.token, viewer=P(w.owner)).raise_for_status()
    assert not can_edit_document(db, as_owner, doc.id)
    with pytest.raises(IntegrityError), db.begin_nested():
        db.add(
            ShareLink(
                tenant_id=w.tenant.id,
                object_type="document",
                object_id=doc.id,
                token_hash="edit-link",
                permission="edit",
                created_by=w.owner.id,
            )
        )
        db.flush()


def test_tokens_stored_as_hashes_and_creation_is_audited(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    created = create_share_link(db, P(w.owner), kb, password="s3cret")
    assert created.token.startswith("kbshare_") and created.link.token_hash == hash_token(created.token)
    assert created.link.password_hash.startswith("$argon2id$")
    log = db.execute(
        select(AuditLog).where(AuditLog.action == "share_link.create").where(AuditLog.object_id == kb.id)
    ).scalar_one()
    assert log.meta["after"]["has_password"] is True
    assert created.token not in str(log.meta) and "s3cret" not in str(log.meta)
    assert [x.id for x in list_share_links(db, P(w.owner), kb)] == [created.link.id]


def test_who_may_create_links(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    grant(db, "knowledge_base", kb.id, w.member, "editor", tenant_id=w.tenant.id)
    doc = make_doc(db, kb, w.owner)
    with pytest.raises(PermissionDenied):
        create_share_link(db, P(w.member), doc)
    with pytest.raises(NotFound):
        create_share_link(db, P(w.outsider), doc)
    kb.settings = {"editor_can_create_share_links": True}
    db.add(kb)
    db.flush()
    assert can_create_share_link(db, P(w.member), doc)
    assert create_share_link(db, P(w.member), doc).link.created_by == w.member.id


def test_knowledge_base_link_opens_its_tree_published_only(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    folder = make_doc(db, kb, w.owner, type="folder")
    page = make_doc(db, kb, w.owner, parent=folder)
    draft = make_doc(db, kb, w.owner, status="draft")
    custom = make_doc(db, kb, w.owner, permission_mode="custom")
    other = make_doc(db, make_kb(db, w.workspace, w.owner, visibility="private"), w.owner)
    visitor = open_share_link(db, create_share_link(db, P(w.owner), kb).token).raise_for_status()
    ids = [folder.id, page.id, draft.id, custom.id, other.id]
    assert filter_readable_documents(db, visitor, ids) == {folder.id, page.id}


def test_document_link_opens_its_subtree(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    folder = make_doc(db, kb, w.owner, type="folder")
    page = make_doc(db, kb, w.owner, parent=folder)
    sibling = make_doc(db, kb, w.owner)
    visitor = open_share_link(db, create_share_link(db, P(w.owner), folder).token).raise_for_status()
    assert filter_readable_documents(db, visitor, [folder.id, page.id, sibling.id]) == {folder.id, page.id}
    page.parent_id = None  # moved out of the shared folder: no longer shared
    db.add(page)
    db.flush()
    assert not can_read_document(db, visitor, page.id)


def test_password_failures_are_counted_audited_and_rate_limited(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    created = create_share_link(db, P(w.owner), kb, password="correct horse")
    with pytest.raises(SharePasswordRequired):
        open_share_link(db, created.token, ip="10.0.0.1").raise_for_status()
    for _ in range(5):  # recorded (openkb.db.record_then_refuse), then refused
        with pytest.raises(SharePasswordIncorrect):
            open_share_link(db, created.token, password="wrong", ip="10.0.0.1")
    with pytest.raises(RateLimited):
        open_share_link(db, created.token, password="correct horse", ip="10.0.0.1")
    # another visitor is not blocked by the first one's failures
    assert open_share_link(db, created.token, password="correct horse", ip="10.0.0.2").status == "ok"
    failures = (
        db.execute(
            select(AuditLog).where(AuditLog.action == "share_link.password_failed").where(AuditLog.object_id == kb.id)
        )
        .scalars()
        .all()
    )
    assert len(failures) == 5 and failures[0].ip == "10.0.0.1"


def test_expired_revoked_login_and_membership(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner)
    created = create_share_link(db, P(w.owner), kb, expires_at=datetime.now(UTC) + timedelta(hours=1))
    visitor = open_share_link(db, created.token).raise_for_status()
    created.link.expires_at = datetime.now(UTC) - timedelta(seconds=1)
    db.add(created.link)
    db.flush()
    with pytest.raises(NotFound):
        open_share_link(db, created.token)
    assert not can_read_document(db, visitor, doc.id)  # an open visit dies with the link

    login = create_share_link(db, P(w.owner), kb, require_login=True)
    with pytest.raises(Unauthenticated):
        open_share_link(db, login.token)
    assert open_share_link(db, login.token, viewer=P(w.outsider)).status == "ok"

    members = create_share_link(db, P(w.owner), kb, restrict_to_workspace_members=True)
    with pytest.raises(PermissionDenied):
        open_share_link(db, members.token, viewer=P(w.outsider))
    guest_visit = open_share_link(db, members.token, viewer=P(w.guest)).raise_for_status()
    assert can_read_document(db, guest_visit, doc.id)

    revoke_share_link(db, P(w.owner), members.link.id)
    assert not can_read_document(db, guest_visit, doc.id)
    with pytest.raises(NotFound):
        open_share_link(db, members.token, viewer=P(w.guest))
    actions = {a for (a,) in db.execute(select(AuditLog.action).where(AuditLog.object_id == kb.id))}
    assert {"share_link.create", "share_link.open", "share_link.revoke"} <= actions


def test_revoke_needs_share_rights_or_being_the_creator(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace", settings={"editor_can_create_share_links": True})
    grant(db, "knowledge_base", kb.id, w.member, "editor", tenant_id=w.tenant.id)
    mine = create_share_link(db, P(w.member), kb)
    theirs = create_share_link(db, P(w.owner), kb)
    kb.settings = {}
    db.add(kb)
    db.flush()
    revoke_share_link(db, P(w.member), mine.link.id)  # creator may close their own link
    with pytest.raises(PermissionDenied):
        revoke_share_link(db, P(w.member), theirs.link.id)
    with pytest.raises(NotFound):
        revoke_share_link(db, Principal.user(w.other_tenant_user, w.other_tenant.id), theirs.link.id)
