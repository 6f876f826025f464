"""The public functions themselves: query counts, errors, batch forms and the Milvus forms."""

from __future__ import annotations

import pytest

from openkb.errors import NotFound, PermissionDenied, ValidationError
from openkb.permissions import (
    Action,
    KbAction,
    ObjectRef,
    Principal,
    access_document,
    can_create_document,
    can_create_share_link,
    can_invite_collaborator,
    can_manage_knowledge_base,
    can_move_document,
    can_read_document,
    chunk_access,
    chunk_access_many,
    document_capabilities,
    filter_readable_documents,
    knowledge_base_capabilities,
    readable_scope,
    resolve_effective_role,
    resolve_readable_principals_for_milvus,
)
from openkb.permissions import filters as F
from tests.factories import grant, make_doc, make_group, make_kb, make_user


def test_batch_check_of_100_documents_is_one_query(db, w, P, count_queries):
    kbs = [make_kb(db, w.workspace, w.owner, visibility=v) for v in ("private", "workspace", "public")]
    docs, parent = [], None
    for i in range(100):
        kb = kbs[i % 3]
        parent = make_doc(
            db,
            kb,
            w.owner,
            parent=parent if parent and parent.knowledge_base_id == kb.id and i % 4 else None,
            permission_mode="custom" if i % 7 == 0 else "inherit",
            type="folder" if i % 2 else "page",
        )
        docs.append(parent)
    g = make_group(db, w.tenant, w.owner, members=[w.member])
    grant(db, "knowledge_base", kbs[0].id, g, "viewer", tenant_id=w.tenant.id)
    ids = [d.id for d in docs]
    for principal in (P(w.member), P(w.guest), Principal.anonymous(w.tenant.id), Principal.system()):
        with count_queries() as n:
            filter_readable_documents(db, principal, ids)
        assert n["n"] == 1
    with count_queries() as n:
        can_read_document(db, P(w.member), ids[0])
        document_capabilities(db, P(w.member), ids)
        knowledge_base_capabilities(db, P(w.member), [k.id for k in kbs])
        chunk_access_many(db, ids)
    assert n["n"] == 4


def test_readable_scope_is_constant_queries(db, w, P, count_queries):
    for _i in range(30):
        kb = make_kb(db, w.workspace, w.owner, visibility="private")
        grant(db, "knowledge_base", kb.id, w.member, "viewer", tenant_id=w.tenant.id)
        d = make_doc(db, kb, w.owner, permission_mode="custom")
        grant(db, "document", d.id, w.member, "manager", tenant_id=w.tenant.id)
        make_doc(db, kb, w.owner, parent=d, permission_mode="custom")
    with count_queries() as n:
        scope = readable_scope(db, P(w.member))
        resolve_readable_principals_for_milvus(db, P(w.member))
    assert n["n"] == 2
    assert len(scope.kb_read) == 30 and len(scope.doc_manage) == 60  # managed custom descendants included


def test_access_document_errors_do_not_leak_existence(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    doc = make_doc(db, kb, w.owner)
    assert access_document(db, P(w.member), doc.id).document.id == doc.id
    with pytest.raises(PermissionDenied):
        access_document(db, P(w.member), doc.id, Action.EDIT)
    with pytest.raises(NotFound):
        access_document(db, P(w.outsider), doc.id)
    import uuid

    with pytest.raises(NotFound):
        access_document(db, P(w.owner), uuid.uuid4())


def test_move_needs_rights_on_both_places(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    grant(db, "knowledge_base", kb.id, w.member, "editor", tenant_id=w.tenant.id)
    doc = make_doc(db, kb, w.owner)
    folder = make_doc(db, kb, w.owner, type="folder")
    locked = make_doc(db, kb, w.owner, type="folder", permission_mode="custom")
    assert can_move_document(db, P(w.member), doc.id, new_parent_id=folder.id)
    assert not can_move_document(db, P(w.member), doc.id, new_parent_id=locked.id)
    assert can_move_document(db, P(w.owner), doc.id, new_parent_id=locked.id)  # KB owner manages custom docs
    assert not can_move_document(db, P(w.owner), folder.id, new_parent_id=folder.id)
    child = make_doc(db, kb, w.owner, parent=folder)
    assert not can_move_document(db, P(w.owner), folder.id, new_parent_id=child.id)  # not under itself
    assert can_move_document(db, P(w.member), child.id, new_parent_id=None)
    assert can_create_document(db, P(w.member), kb.id)
    assert not can_create_document(db, P(w.member), kb.id, parent_id=locked.id)


def test_object_level_questions(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    grant(db, "knowledge_base", kb.id, w.member, "editor", tenant_id=w.tenant.id)
    assert can_manage_knowledge_base(db, P(w.owner), kb.id)
    assert not can_manage_knowledge_base(db, P(w.member), kb.id)
    assert can_invite_collaborator(db, P(w.admin), ("workspace", w.workspace.id))
    assert not can_invite_collaborator(db, P(w.member), ObjectRef("workspace", w.workspace.id))
    assert can_invite_collaborator(db, P(w.owner), kb)
    assert not can_invite_collaborator(db, P(w.member), kb)
    assert not can_create_share_link(db, P(w.member), kb)
    assert can_create_share_link(db, P(w.owner), ("knowledge_base", kb.id))
    assert resolve_effective_role(db, P(w.member), kb) == "editor"
    assert resolve_effective_role(db, P(w.admin), kb) is None
    caps = knowledge_base_capabilities(db, P(w.member), [kb.id])[kb.id]
    assert caps == {KbAction.READ, KbAction.CREATE}
    with pytest.raises(ValidationError):
        resolve_effective_role(db, P(w.owner), ("workspace", w.workspace.id))
    with pytest.raises(ValidationError):
        can_invite_collaborator(db, P(w.owner), ("folder", kb.id))


def test_chunk_access_fields(db, w):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    folder = make_doc(db, kb, w.owner, type="folder", permission_mode="custom", visibility="private")
    inner = make_doc(db, kb, w.owner, parent=folder, permission_mode="custom")
    page = make_doc(db, kb, w.owner, parent=inner, status="draft")
    plain = make_doc(db, kb, w.owner)
    gone = make_doc(db, kb, w.owner, status="archived")
    ca = chunk_access(db, plain)
    assert ca.access_principals == [f"kb:{kb.id}:viewer", f"workspace:{w.workspace.id}:member"]
    assert (ca.scope_doc, ca.visibility_eff, ca.doc_status) == ("", "workspace", "published")
    ca = chunk_access(db, page.id)
    assert ca.scope_doc == str(inner.id) and ca.visibility_eff == "private" and ca.doc_status == "draft"
    assert set(ca.access_principals) == {f"doc:{inner.id}:editor", f"kb:{kb.id}:manager", f"doc:{folder.id}:manager"}
    assert chunk_access(db, gone).access_principals == []  # never searchable


def test_milvus_filter_uses_only_scalar_fields(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    grant(db, "knowledge_base", kb.id, w.member, "editor", tenant_id=w.tenant.id)
    expr = readable_scope(db, P(w.member)).to_milvus_filter()
    assert "ARRAY_CONTAINS" not in expr and "access_principals" not in expr
    for field in ("tenant_id", "scope_kb", "scope_doc", "visibility_eff", "doc_status", "workspace_id"):
        assert field in expr
    renamed = readable_scope(db, P(w.member)).to_milvus_filter({"scope_kb": "knowledge_base_id"})
    assert "knowledge_base_id in" in renamed or "knowledge_base_id ==" in renamed
    assert readable_scope(db, Principal.system()).to_milvus_filter() == ""
    suspended = make_user(db, w.tenant, status="suspended")
    assert readable_scope(db, P(suspended)).filter is F.FALSE
    assert readable_scope(db, P(suspended)).to_milvus_filter() == 'document_id == ""'
    with pytest.raises(ValidationError):
        resolve_readable_principals_for_milvus(db, Principal.system())


def test_share_link_scope(db, w, P):
    from openkb.permissions.share_links import create_share_link, open_share_link

    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    folder = make_doc(db, kb, w.owner, type="folder")
    page = make_doc(db, kb, w.owner, parent=folder)
    custom = make_doc(db, kb, w.owner, parent=folder, permission_mode="custom")
    outside = make_doc(db, kb, w.owner)
    link = create_share_link(db, P(w.owner), ("document", folder.id))
    visitor = open_share_link(db, link.token).raise_for_status()
    scope = readable_scope(db, visitor)
    assert scope.link_doc_ids == {str(folder.id), str(page.id)}
    access = chunk_access_many(db, [folder.id, page.id, custom.id, outside.id])
    assert scope.matches(access[page.id].row(page.id))
    assert not scope.matches(access[outside.id].row(outside.id))
    assert f"kb:{kb.id}:viewer" in resolve_readable_principals_for_milvus(db, visitor)
