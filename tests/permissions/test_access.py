"""The ``access_*`` contract: fetch + authorize, NotFound for missing and unseen alike (same code,
same message), PermissionDenied only for what the caller sees, and no more statements than the
decision and the primary-key fetch."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import event

from openkb.errors import NotFound, PermissionDenied
from openkb.permissions import (
    Action,
    KbAction,
    ObjectRef,
    Principal,
    WsAction,
    access_document,
    access_knowledge_base,
    access_tree,
    access_workspace,
    rules,
)
from openkb.permissions.guards import authorize
from openkb.permissions.loader import load_snapshot
from tests.factories import grant, make_doc, make_kb


def _not_found(fn) -> tuple[str, str]:
    with pytest.raises(NotFound) as ei:
        fn()
    return ei.value.code, str(ei.value)


def test_missing_and_unseen_are_the_same_not_found(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner)
    cases = [
        (access_workspace, w.workspace.id, [w.outsider, w.other_tenant_user]),
        (access_knowledge_base, kb.id, [w.member, w.guest, w.admin, w.outsider]),
        (access_document, doc.id, [w.member, w.guest, w.admin, w.outsider]),
    ]
    for fn, oid, unseen_by in cases:
        missing = _not_found(lambda fn=fn: fn(db, P(w.owner), uuid.uuid4()))
        for person in unseen_by:
            p = Principal.user(person, w.other_tenant.id) if person is w.other_tenant_user else P(person)
            assert _not_found(lambda fn=fn, p=p, oid=oid: fn(db, p, oid)) == missing, (fn.__name__, person)
            # the visibility-only form (action=None) answers the same
            assert _not_found(lambda fn=fn, p=p, oid=oid: fn(db, p, oid, None)) == missing, (fn.__name__, person)
    assert _not_found(lambda: access_document(db, Principal.anonymous(w.tenant.id), doc.id)) == _not_found(
        lambda: access_document(db, Principal.anonymous(w.tenant.id), uuid.uuid4())
    )


def test_permission_denied_only_for_what_the_caller_sees(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    doc = make_doc(db, kb, w.owner)
    with pytest.raises(PermissionDenied):
        access_workspace(db, P(w.guest), w.workspace.id, WsAction.LIST_MEMBERS)
    with pytest.raises(PermissionDenied):
        access_workspace(db, P(w.member), w.workspace.id, WsAction.MANAGE)
    with pytest.raises(PermissionDenied):
        access_knowledge_base(db, P(w.member), kb.id, KbAction.MANAGE)
    with pytest.raises(PermissionDenied):
        access_document(db, P(w.member), doc.id, Action.EDIT)
    read_only = P(w.owner, scopes={"kb:read"})
    with pytest.raises(PermissionDenied):
        access_workspace(db, read_only, w.workspace.id, WsAction.CREATE_KNOWLEDGE_BASE)
    assert access_workspace(db, read_only, w.workspace.id).role == "owner"
    # the guest is not a reader of `visibility = workspace` content: the knowledge base is unseen
    with pytest.raises(NotFound):
        access_knowledge_base(db, P(w.guest), kb.id, KbAction.MANAGE)


def test_access_carries_the_row_the_role_and_every_allowed_action(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    grant(db, "knowledge_base", kb.id, w.member, "editor", tenant_id=w.tenant.id)
    doc = make_doc(db, kb, w.owner)
    ws = access_workspace(db, P(w.admin), w.workspace.id)
    assert ws.workspace.id == w.workspace.id and ws.role == "admin"
    snap = load_snapshot(db, P(w.admin), ws_ids=[w.workspace.id])
    assert ws.actions == rules.ws_capabilities(snap.viewer, str(w.workspace.id))
    kacc = access_knowledge_base(db, P(w.member), kb.id, KbAction.CREATE)
    assert kacc.knowledge_base.id == kb.id and kacc.role == "editor"
    assert KbAction.MANAGE not in kacc.actions
    dacc = access_document(db, P(w.member), doc.id, Action.EDIT)
    assert dacc.document.id == doc.id and dacc.role == "editor"
    dacc.require(Action.READ, Action.EDIT, Action.MOVE)
    with pytest.raises(PermissionDenied, match="manage, share"):
        dacc.require(Action.EDIT, Action.SHARE, Action.MANAGE)


def test_trashed_document_is_seen_only_by_who_may_restore_it(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    gone = make_doc(db, kb, w.owner, status="deleted")
    acc = access_document(db, P(w.owner), gone.id, None)
    assert Action.TRASH in acc.actions and Action.READ not in acc.actions
    with pytest.raises(PermissionDenied):
        access_document(db, P(w.owner), gone.id, Action.READ)
    with pytest.raises(NotFound):
        access_document(db, P(w.member), gone.id, None)


def test_readable_ancestors_leave_out_what_the_caller_cannot_open(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    folder = make_doc(db, kb, w.owner, type="folder")  # private, like its knowledge base
    opened = make_doc(db, kb, w.owner, parent=folder, type="folder", permission_mode="custom", visibility="workspace")
    page = make_doc(db, kb, w.owner, parent=opened)
    assert access_document(db, P(w.member), page.id).readable_ancestors() == [opened.id]
    assert access_document(db, P(w.owner), page.id).readable_ancestors() == [folder.id, opened.id]


def test_access_tree_is_not_found_for_an_unseen_knowledge_base(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner)
    assert access_tree(db, P(w.owner), kb.id, (Action.READ,)).allows(doc.id)
    assert _not_found(lambda: access_tree(db, P(w.member), kb.id)) == _not_found(
        lambda: access_tree(db, P(w.member), uuid.uuid4())
    )


class _Selects:
    def __init__(self, db):
        db.connection()  # begin the test's savepoint before counting
        self.conn = db.connection()
        self.statements: list[str] = []

    def __enter__(self):
        event.listen(self.conn, "before_cursor_execute", self._on)
        return self

    def __exit__(self, *exc):
        event.remove(self.conn, "before_cursor_execute", self._on)

    def _on(self, _conn, _cursor, statement, *_a):
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            self.statements.append(statement)


def _row(acc):
    return getattr(acc, "workspace", None) or getattr(acc, "knowledge_base", None) or acc.document


def test_one_decision_and_one_fetch_per_access(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    doc = make_doc(db, kb, w.owner)
    db.expunge_all()
    for fn, oid in ((access_workspace, w.workspace.id), (access_knowledge_base, kb.id), (access_document, doc.id)):
        with _Selects(db) as q:
            held = fn(db, P(w.owner), oid)  # (the session keeps only rows someone references)
        assert len(q.statements) == 2, (fn.__name__, q.statements)
        with _Selects(db) as q:  # the row is in the session now: the fetch costs nothing
            again = fn(db, P(w.owner), oid)
        assert _row(again) is _row(held)
        assert len(q.statements) == 1, (fn.__name__, q.statements)
    with _Selects(db) as q:  # the ObjectRef form used by the permission-changing services: no fetch
        authorize(db, P(w.owner), ObjectRef("knowledge_base", kb.id), "manage")
    assert len(q.statements) == 1


def test_for_update_fetches_the_row_locked(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    doc = make_doc(db, kb, w.owner)
    with _Selects(db) as q:
        acc = access_document(db, P(w.owner), doc.id, Action.EDIT, for_update=True)
    assert acc.document.id == doc.id
    assert len(q.statements) == 2 and "FOR UPDATE" in q.statements[-1].upper()
