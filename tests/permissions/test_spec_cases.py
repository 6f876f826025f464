"""The named cases of the spec's permission tests (docs/permissions.md), plus the rules the issue spells out."""

from __future__ import annotations

import pytest

from openkb.content import Actor, changes, documents
from openkb.content import knowledge_bases as kb_service
from openkb.content import workspaces as ws_service
from openkb.errors import NotFound, PermissionDenied
from openkb.permissions import (
    Action,
    Principal,
    WsAction,
    access_change,
    access_workspace,
    can_edit_document,
    can_in_workspace,
    can_manage_document,
    can_read_document,
    can_read_knowledge_base,
    filter_documents,
    filter_readable_documents,
    readable_scope,
    resolve_effective_role,
    resolve_readable_principals_for_milvus,
    resolve_workspace_role,
)
from openkb.permissions.collaborators import remove_collaborator
from tests.factories import add_member, grant, make_doc, make_group, make_kb, make_user, make_workspace

# -- the spec's named cases (docs/permissions.md) -------------------------------------------------------------------


def test_private_kb_only_collaborators_can_read(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner)
    grant(db, "knowledge_base", kb.id, w.guest, "viewer", tenant_id=w.tenant.id)
    assert can_read_document(db, P(w.owner), doc.id)
    assert can_read_document(db, P(w.guest), doc.id)
    for outsider in (w.member, w.admin, w.outsider, w.tenant_admin):
        assert not can_read_document(db, P(outsider), doc.id)
        assert not can_read_knowledge_base(db, P(outsider), kb.id)
    assert not can_read_document(db, Principal.anonymous(w.tenant.id), doc.id)


def test_workspace_member_can_access_workspace_visible_kb(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    doc = make_doc(db, kb, w.owner)
    for person in (w.member, w.admin):
        assert can_read_knowledge_base(db, P(person), kb.id)
        assert can_read_document(db, P(person), doc.id)
        assert not can_edit_document(db, P(person), doc.id)  # visibility only gives reading
    assert not can_read_document(db, P(w.outsider), doc.id)


def test_workspace_guest_cannot_access_workspace_visible_kb_unless_directly_invited(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    doc = make_doc(db, kb, w.owner)
    assert not can_read_knowledge_base(db, P(w.guest), kb.id)
    assert not can_read_document(db, P(w.guest), doc.id)
    grant(db, "knowledge_base", kb.id, w.guest, "viewer", tenant_id=w.tenant.id)
    assert can_read_document(db, P(w.guest), doc.id)


def test_workspace_admin_does_not_automatically_read_private_kb(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner)
    assert resolve_workspace_role(db, P(w.admin), w.workspace.id) == "admin"
    assert not can_read_document(db, P(w.admin), doc.id)
    assert not can_read_knowledge_base(db, P(w.admin), kb.id)
    # nor does a tenant admin / system admin, nor the workspace owner who is not a collaborator
    sysadmin = make_user(db, w.tenant, role="system_admin")
    add_member(db, w.workspace, sysadmin, "admin")
    kb2 = make_kb(db, w.workspace, w.member, visibility="private")
    doc2 = make_doc(db, kb2, w.member)
    for person in (w.tenant_admin, sysadmin, w.owner):
        assert not can_read_document(db, P(person), doc2.id)
        assert doc2.id not in filter_readable_documents(db, P(person), [doc2.id], for_search=True)


def test_document_custom_permission_overrides_inheritance(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    grant(db, "knowledge_base", kb.id, w.guest, "editor", tenant_id=w.tenant.id)
    stricter = make_doc(db, kb, w.owner, permission_mode="custom", visibility="private")
    grant(db, "document", stricter.id, w.outsider, "viewer", tenant_id=w.tenant.id)
    opener = make_doc(db, kb, w.owner, permission_mode="custom", visibility="public")
    inherited = make_doc(db, kb, w.owner)
    # more restricted: workspace members and the KB editor lose it, its own collaborator gains it
    assert not can_read_document(db, P(w.member), stricter.id)
    assert not can_read_document(db, P(w.guest), stricter.id)
    assert can_read_document(db, P(w.outsider), stricter.id)
    assert not can_edit_document(db, P(w.outsider), stricter.id)
    # the KB owner keeps managing it (decision: KB owner/manager retain manage on custom docs)
    assert resolve_effective_role(db, P(w.owner), ("document", stricter.id)) == "manager"
    # more open: anonymous reads the public custom document, not its siblings
    anon = Principal.anonymous(w.tenant.id)
    assert can_read_document(db, anon, opener.id)
    assert not can_read_document(db, anon, inherited.id)
    # inherit mode ignores a document's own visibility
    ignored = make_doc(db, kb, w.owner, visibility="public")
    assert not can_read_document(db, anon, ignored.id)


def test_removed_collaborator_loses_access(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner)
    c = grant(db, "knowledge_base", kb.id, w.member, "editor", tenant_id=w.tenant.id)
    assert can_edit_document(db, P(w.member), doc.id)
    assert f"kb:{kb.id}:editor" in resolve_readable_principals_for_milvus(db, P(w.member))
    remove_collaborator(db, P(w.owner), c.id)
    assert not can_read_document(db, P(w.member), doc.id)
    assert not readable_scope(db, P(w.member)).kb_read
    assert f"kb:{kb.id}:viewer" not in resolve_readable_principals_for_milvus(db, P(w.member))


def test_mcp_search_principals_only_include_current_users_allowed_scopes(db, w, P):
    mine = make_kb(db, w.workspace, w.owner, visibility="private")
    theirs = make_kb(db, w.workspace, w.owner, visibility="private")
    grant(db, "knowledge_base", mine.id, w.guest, "viewer", tenant_id=w.tenant.id)
    custom_doc = make_doc(db, theirs, w.owner, permission_mode="custom")
    g = make_group(db, w.tenant, w.owner, members=[w.guest])
    grant(db, "document", custom_doc.id, g, "viewer", tenant_id=w.tenant.id)
    other_ws = make_workspace(db, w.tenant, w.owner)
    tokens = set(resolve_readable_principals_for_milvus(db, P(w.guest)))
    assert tokens == {
        "public",
        f"user:{w.guest.id}",
        f"tenant:{w.tenant.id}:member",
        f"group:{g.id}",
        f"kb:{mine.id}:viewer",
        f"doc:{custom_doc.id}:viewer",
    }  # a guest is no workspace member: no workspace token
    assert f"workspace:{w.workspace.id}:member" in resolve_readable_principals_for_milvus(db, P(w.member))
    assert f"workspace:{other_ws.id}:member" not in resolve_readable_principals_for_milvus(db, P(w.member))
    assert not any(t.startswith("kb:") for t in resolve_readable_principals_for_milvus(db, P(w.admin)))
    other = Principal.user(w.other_tenant_user, w.other_tenant.id)
    assert not any(str(w.tenant.id) in t for t in resolve_readable_principals_for_milvus(db, other))
    scope = readable_scope(db, P(w.guest))
    assert scope.kb_read == {str(mine.id)} and scope.doc_read == {str(custom_doc.id)}
    assert "ARRAY" not in scope.to_milvus_filter() and f'tenant_id == "{w.tenant.id}"' in scope.to_milvus_filter()


# -- the rest of the rules -----------------------------------------------------------------


def test_nothing_crosses_a_tenant_except_public_reading(db, w, P):
    kb_ws = make_kb(db, w.workspace, w.owner, visibility="workspace")
    kb_pub = make_kb(db, w.workspace, w.owner, visibility="public")
    d_ws, d_pub = make_doc(db, kb_ws, w.owner), make_doc(db, kb_pub, w.owner)
    # a grant row pointing across tenants (never created by the services) still gives nothing
    grant(db, "knowledge_base", kb_ws.id, w.other_tenant_user, "manager", tenant_id=w.tenant.id)
    other = Principal.user(w.other_tenant_user, w.other_tenant.id)
    assert not can_read_document(db, other, d_ws.id)
    assert can_read_document(db, other, d_pub.id)  # public = the internet
    assert not filter_readable_documents(db, other, [d_pub.id], for_search=True)  # but never in its search
    # acting in a tenant you are not a member of gives nothing at all
    assert not can_read_document(db, Principal.user(w.other_tenant_user, w.tenant.id), d_pub.id)


def test_suspended_user_reads_nothing(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="public")
    doc = make_doc(db, kb, w.owner)
    w.owner.status = "suspended"
    db.add(w.owner)
    db.flush()
    assert not can_read_document(db, P(w.owner), doc.id)
    assert resolve_readable_principals_for_milvus(db, P(w.owner)) == []


def test_status_rules(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    grant(db, "knowledge_base", kb.id, w.guest, "editor", tenant_id=w.tenant.id)
    draft = make_doc(db, kb, w.owner, status="draft")
    archived = make_doc(db, kb, w.owner, status="archived")
    deleted = make_doc(db, kb, w.owner, status="deleted")
    ids = [draft.id, archived.id, deleted.id]
    assert filter_readable_documents(db, P(w.member), ids) == set()  # reader: published only
    assert filter_readable_documents(db, P(w.guest), ids) == {draft.id, archived.id}  # editor
    assert filter_readable_documents(db, P(w.guest), ids, for_search=True) == {draft.id}
    assert filter_documents(db, P(w.guest), ids, Action.TRASH) == set()  # trash is manager+
    assert filter_documents(db, P(w.owner), ids, Action.TRASH) == {deleted.id}
    assert filter_readable_documents(db, P(w.owner), ids, for_search=True) == {draft.id}
    anon = Principal.anonymous(w.tenant.id)
    pub = make_kb(db, w.workspace, w.owner, visibility="public")
    assert not can_read_document(db, anon, make_doc(db, pub, w.owner, status="draft").id)


def test_folder_gates_its_descendants(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    closed = make_doc(db, kb, w.owner, type="folder", permission_mode="custom", visibility="private")
    inside_open = make_doc(db, kb, w.owner, parent=closed, permission_mode="custom", visibility="workspace")
    inside = make_doc(db, kb, w.owner, parent=closed)
    assert not can_read_document(db, P(w.member), inside_open.id)  # cannot pass the closed folder
    assert not can_read_document(db, P(w.member), inside.id)
    draft_folder = make_doc(db, kb, w.owner, type="folder", status="draft")
    under_draft = make_doc(db, kb, w.owner, parent=draft_folder)
    assert not can_read_document(db, P(w.member), under_draft.id)  # a draft folder hides its subtree
    assert can_read_document(db, P(w.owner), under_draft.id)


def test_moved_document_follows_its_new_place(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    closed = make_doc(db, kb, w.owner, type="folder", permission_mode="custom", visibility="private")
    doc = make_doc(db, kb, w.owner)
    assert can_read_document(db, P(w.member), doc.id)
    doc.parent_id = closed.id
    db.add(doc)
    db.flush()
    assert not can_read_document(db, P(w.member), doc.id)
    other_kb = make_kb(db, w.workspace, w.owner, visibility="private")
    grant(db, "knowledge_base", other_kb.id, w.member, "viewer", tenant_id=w.tenant.id)
    doc.parent_id, doc.knowledge_base_id = None, other_kb.id
    db.add(doc)
    db.flush()
    assert can_read_document(db, P(w.member), doc.id)


def test_configurable_editor_cells_default_no(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    grant(db, "knowledge_base", kb.id, w.member, "editor", tenant_id=w.tenant.id)
    doc = make_doc(db, kb, w.owner)
    assert filter_documents(db, P(w.member), [doc.id], Action.DELETE) == set()
    assert filter_documents(db, P(w.member), [doc.id], Action.SHARE) == set()
    kb.settings = {"editor_can_delete": True, "editor_can_create_share_links": True}
    db.add(kb)
    db.flush()
    assert filter_documents(db, P(w.member), [doc.id], Action.DELETE) == {doc.id}
    assert filter_documents(db, P(w.member), [doc.id], Action.SHARE) == {doc.id}
    assert not can_manage_document(db, P(w.member), doc.id)


def test_group_collaborators(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner)
    g = make_group(db, w.tenant, w.owner, members=[w.outsider])
    grant(db, "knowledge_base", kb.id, g, "editor", tenant_id=w.tenant.id)
    assert can_edit_document(db, P(w.outsider), doc.id)
    assert not can_read_document(db, P(w.member), doc.id)


def test_read_only_token_cannot_write(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner)
    pat = P(w.owner, scopes={"kb:read", "kb:search"})
    assert can_read_document(db, pat, doc.id)
    assert not can_edit_document(db, pat, doc.id)
    assert not can_read_document(db, P(w.owner, scopes={"kb:write"}), doc.id)


def test_dify_key_reads_its_knowledge_bases_only(db, w):
    from openkb.models import DifyApiKey

    allowed = make_kb(db, w.workspace, w.owner, visibility="private")
    other = make_kb(db, w.workspace, w.owner, visibility="public")
    inherited = make_doc(db, allowed, w.owner)
    custom = make_doc(db, allowed, w.owner, permission_mode="custom", visibility="private")
    elsewhere = make_doc(db, other, w.owner)
    key = DifyApiKey(
        tenant_id=w.tenant.id, name="app", key_hash="h-dify-1", status="active", allowed_knowledge_base_ids=[allowed.id]
    )
    db.add(key)
    db.flush()
    p = Principal.dify(key)
    ids = [inherited.id, custom.id, elsewhere.id]
    assert filter_readable_documents(db, p, ids, for_search=True) == {inherited.id}
    key.status = "disabled"
    db.add(key)
    db.flush()
    assert filter_readable_documents(db, p, ids) == set()  # re-checked on every call


def test_system_principal_reads_everything_but_writes_nothing(db, w):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner, status="draft")
    assert can_read_document(db, Principal.system(), doc.id)
    assert not can_edit_document(db, Principal.system(), doc.id)


# -- workspace rules and the change log (rules.ws_allows, rules.change_visible) ---------------------


def test_guest_sees_the_workspace_but_not_who_else_is_in_it(db, w, P):
    assert access_workspace(db, P(w.guest), w.workspace.id).role == "guest"
    assert not can_in_workspace(db, P(w.guest), WsAction.LIST_MEMBERS, w.workspace.id)
    with pytest.raises(PermissionDenied):
        ws_service.list_members(db, P(w.guest), w.workspace.id)
    for person in (w.owner, w.admin, w.member):
        assert {m["user_id"] for m in ws_service.list_members(db, P(person), w.workspace.id)} >= {w.guest.id}
    with pytest.raises(NotFound):  # not a member at all: the workspace does not exist for them
        ws_service.list_members(db, P(w.outsider), w.workspace.id)


def test_only_owners_admins_and_members_create_knowledge_bases(db, w, P):
    for person in (w.owner, w.admin, w.member):
        assert can_in_workspace(db, P(person), WsAction.CREATE_KNOWLEDGE_BASE, w.workspace.id)
        kb_service.create_knowledge_base(db, Actor.of(P(person)), workspace_id=w.workspace.id, title="Mine")
    assert not can_in_workspace(db, P(w.member, scopes={"kb:read"}), WsAction.CREATE_KNOWLEDGE_BASE, w.workspace.id)
    with pytest.raises(PermissionDenied):
        kb_service.create_knowledge_base(db, Actor.of(P(w.guest)), workspace_id=w.workspace.id, title="No")
    with pytest.raises(NotFound):
        kb_service.create_knowledge_base(db, Actor.of(P(w.outsider)), workspace_id=w.workspace.id, title="No")


def test_change_log_shows_own_changes_and_those_of_managed_knowledge_bases(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="workspace")
    grant(db, "knowledge_base", kb.id, w.member, "editor", tenant_id=w.tenant.id)
    grant(db, "knowledge_base", kb.id, w.admin, "manager", tenant_id=w.tenant.id)
    documents.create_document(db, Actor.of(P(w.owner)), knowledge_base_id=kb.id, title="By owner")
    documents.create_document(db, Actor.of(P(w.member)), knowledge_base_id=kb.id, title="By member")
    by = {c.summary: c for c in changes.list_changes(db, P(w.owner))}
    owners, members = by["created page 'By owner'"], by["created page 'By member'"]
    assert {c.id for c in changes.list_changes(db, P(w.member))} == {members.id}  # an editor: its own only
    assert {c.id for c in changes.list_changes(db, P(w.admin))} >= {owners.id, members.id}  # a manager: all
    assert access_change(db, P(w.admin), owners.id).id == owners.id
    with pytest.raises(NotFound):
        access_change(db, P(w.member), owners.id)
    # a read-only token sees its own changes, not the others' (managing needs a write scope)
    assert {c.id for c in changes.list_changes(db, P(w.admin, scopes={"kb:read"}))}.isdisjoint({owners.id, members.id})
    w.member.status = "suspended"  # a suspended user sees nothing, not even its own
    db.add(w.member)
    db.flush()
    assert changes.list_changes(db, P(w.member)) == []
    with pytest.raises(NotFound):
        access_change(db, P(w.member), members.id)
