"""The groups service on its own: who counts as an admin of a tenant, and the tenant boundary."""

from __future__ import annotations

import pytest

from openkb.errors import NotFound, PermissionDenied, Unauthenticated, ValidationError
from openkb.permissions import Principal, can_read_document, groups
from tests.factories import grant, make_doc, make_kb, make_user


def test_only_admins_of_the_groups_tenant(db, w, P):
    g = groups.create_group(db, P(w.tenant_admin), name="Ops")
    sysadmin_elsewhere = make_user(db, w.other_tenant, role="system_admin")
    other_admin = make_user(db, w.other_tenant, role="tenant_admin")
    for who in (P(w.owner), P(w.admin), P(w.member)):  # workspace roles are not tenant administration
        with pytest.raises(PermissionDenied):
            groups.list_groups(db, who)
        with pytest.raises(PermissionDenied):
            groups.access_group(db, who, g.id)
    for who in (Principal.user(sysadmin_elsewhere, w.other_tenant.id), Principal.user(other_admin, w.other_tenant.id)):
        with pytest.raises(NotFound):
            groups.access_group(db, who, g.id)
        with pytest.raises(NotFound):
            groups.add_member(db, who, g.id, user_id=w.member.id)
        assert groups.list_groups(db, who) == []
    with pytest.raises(PermissionDenied):  # a PAT needs the admin scope
        groups.rename_group(db, P(w.tenant_admin, scopes={"kb:read", "kb:write"}), g.id, name="x")
    with pytest.raises(Unauthenticated):
        groups.list_groups(db, Principal.anonymous(w.tenant.id))
    suspended = make_user(db, w.tenant, role="tenant_admin", status="suspended")
    with pytest.raises(PermissionDenied):
        groups.list_groups(db, P(suspended))
    with pytest.raises(ValidationError):  # the operator must say which tenant
        groups.create_group(db, Principal.system(), name="x")
    assert [x.id for x in groups.list_groups(db, Principal.system(), tenant_id=w.tenant.id)] == [g.id]


def test_membership_decides_access_at_once(db, w, P):
    kb = make_kb(db, w.workspace, w.owner, visibility="private")
    doc = make_doc(db, kb, w.owner)
    g = groups.create_group(db, P(w.tenant_admin), name="Readers")
    grant(db, "knowledge_base", kb.id, g, "viewer", tenant_id=w.tenant.id)
    assert not can_read_document(db, P(w.outsider), doc.id)
    groups.add_member(db, P(w.tenant_admin), g.id, user_id=w.outsider.id)
    assert can_read_document(db, P(w.outsider), doc.id)
    with pytest.raises(NotFound):  # another tenant's user is never a member
        groups.add_member(db, P(w.tenant_admin), g.id, user_id=w.other_tenant_user.id)
    groups.remove_member(db, P(w.tenant_admin), g.id, user_id=w.outsider.id)
    assert not can_read_document(db, P(w.outsider), doc.id)
