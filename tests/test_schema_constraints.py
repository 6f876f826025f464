"""Every CHECK and UNIQUE of docs/data-model.md rejects a violating row (schema built by migrations)."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from openkb.models import (
    AuthSettings,
    Collaborator,
    DifyApiKey,
    DifyKnowledgeMapping,
    Document,
    DocumentVersion,
    Invitation,
    McpPersonalAccessToken,
    ShareLink,
    TenantMembership,
    User,
    WorkspaceMember,
)
from tests.factories import make_doc, make_kb, make_personas, make_tenant, make_user


def _rejects(db, obj) -> None:
    """The row must be refused by the database; the session stays usable afterwards."""
    with pytest.raises(IntegrityError):
        with db.begin_nested():
            db.add(obj)
            db.flush()
    if obj in db:
        db.expunge(obj)


@pytest.fixture()
def world(db):
    return make_personas(db)


def test_migrations_are_the_schema(engine):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from sqlmodel import SQLModel

    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
    assert diff == []


def test_user_status_check(db):
    _rejects(db, User(email=f"{uuid.uuid4()}@x.io", display_name="x", status="banned"))


def test_user_email_unique(db):
    t = make_tenant(db)
    u = make_user(db, t)
    _rejects(db, User(email=u.email, display_name="dup", status="active"))


def test_tenant_membership_role_and_unique(db):
    t = make_tenant(db)
    u = make_user(db, t)
    _rejects(db, TenantMembership(tenant_id=t.id, user_id=u.id, role="owner"))
    t2 = make_tenant(db)
    u2 = make_user(db, t2)
    _rejects(db, TenantMembership(tenant_id=t2.id, user_id=u2.id, role="member"))


def test_auth_settings_signup_status_and_single_instance_row(db):
    _rejects(db, AuthSettings(tenant_id=None, default_signup_status="pending_email_verification"))
    db.execute(text("DELETE FROM auth_settings WHERE tenant_id IS NULL"))
    db.add(AuthSettings(tenant_id=None))
    db.flush()
    _rejects(db, AuthSettings(tenant_id=None))
    t = make_tenant(db)
    db.add(AuthSettings(tenant_id=t.id))
    db.flush()
    _rejects(db, AuthSettings(tenant_id=t.id))


def test_workspace_member_roles_are_workspace_roles(db, world):
    u = make_user(db, world.tenant)
    for bad in ("manager", "editor", "viewer", "system_admin"):
        _rejects(
            db, WorkspaceMember(tenant_id=world.tenant.id, workspace_id=world.workspace.id, user_id=u.id, role=bad)
        )
    _rejects(
        db,
        WorkspaceMember(
            tenant_id=world.tenant.id, workspace_id=world.workspace.id, user_id=world.member.id, role="member"
        ),
    )


def test_workspace_slug_unique_per_tenant(db, world):
    from openkb.models import Workspace

    _rejects(db, Workspace(tenant_id=world.tenant.id, name="dup", slug=world.workspace.slug, created_by=world.owner.id))


def test_knowledge_base_checks(db, world):
    from openkb.models import KnowledgeBase

    base = dict(tenant_id=world.tenant.id, workspace_id=world.workspace.id, title="k", created_by=world.owner.id)
    _rejects(db, KnowledgeBase(**base, slug="a1", visibility="secret", status="active"))
    _rejects(db, KnowledgeBase(**base, slug="a2", visibility="private", status="gone"))
    kb = make_kb(db, world.workspace, world.owner)
    _rejects(db, KnowledgeBase(**base, slug=kb.slug, visibility="private", status="active"))


def test_document_checks(db, world):
    kb = make_kb(db, world.workspace, world.owner)
    base = dict(
        tenant_id=world.tenant.id,
        workspace_id=world.workspace.id,
        knowledge_base_id=kb.id,
        slug="s",
        created_by=world.owner.id,
        updated_by=world.owner.id,
        title="t",
    )
    _rejects(db, Document(**base, type="board", status="published"))
    _rejects(db, Document(**base, type="page", status="hidden"))
    _rejects(db, Document(**base, type="page", status="draft", permission_mode="override"))
    _rejects(db, Document(**base, type="page", status="draft", visibility="everyone"))
    d = Document(**base, type="page", status="draft", external_key="ext-1")
    db.add(d)
    db.flush()
    _rejects(db, Document(**base, type="page", status="draft", external_key="ext-1"))
    # documents without a key are not constrained against each other
    db.add(Document(**base, type="page", status="draft"))
    db.add(Document(**base, type="page", status="draft"))
    db.flush()


def test_document_version_checks(db, world):
    kb = make_kb(db, world.workspace, world.owner)
    d = make_doc(db, kb, world.owner)
    base = dict(tenant_id=world.tenant.id, document_id=d.id, markdown="x", markdown_hash="h", created_by=world.owner.id)
    _rejects(db, DocumentVersion(**base, version_no=2, source_type="email"))
    _rejects(db, DocumentVersion(**base, version_no=1, source_type="manual"))


def test_collaborators_only_content_objects_and_roles(db, world):
    kb = make_kb(db, world.workspace, world.owner)
    base = dict(tenant_id=world.tenant.id, subject_type="user", subject_id=world.member.id, source="direct")
    _rejects(db, Collaborator(**base, object_type="workspace", object_id=world.workspace.id, role="viewer"))
    _rejects(db, Collaborator(**base, object_type="knowledge_base", object_id=kb.id, role="admin"))
    _rejects(
        db,
        Collaborator(**{**base, "subject_type": "team"}, object_type="knowledge_base", object_id=kb.id, role="viewer"),
    )
    _rejects(
        db, Collaborator(**{**base, "source": "magic"}, object_type="knowledge_base", object_id=kb.id, role="viewer")
    )
    _rejects(
        db,
        Collaborator(
            **{**base, "subject_id": world.owner.id}, object_type="knowledge_base", object_id=kb.id, role="viewer"
        ),
    )  # owner already a collaborator: unique


@pytest.mark.parametrize(
    "object_type,role,ok",
    [
        ("workspace", "admin", True),
        ("workspace", "member", True),
        ("workspace", "guest", True),
        ("workspace", "owner", False),
        ("workspace", "viewer", False),
        ("workspace", "manager", False),
        ("knowledge_base", "manager", True),
        ("knowledge_base", "editor", True),
        ("knowledge_base", "viewer", True),
        ("knowledge_base", "owner", False),
        ("knowledge_base", "member", False),
        ("document", "viewer", True),
        ("document", "owner", False),
        ("document", "admin", False),
        ("folder", "viewer", False),
    ],
)
def test_invitation_role_by_object_type(db, world, object_type, role, ok):
    inv = Invitation(
        tenant_id=world.tenant.id,
        object_type=object_type,
        object_id=uuid.uuid4(),
        role=role,
        token_hash=uuid.uuid4().hex,
        status="pending",
        invited_by=world.owner.id,
    )
    if ok:
        db.add(inv)
        db.flush()
    else:
        _rejects(db, inv)


def test_invitation_status_check(db, world):
    _rejects(
        db,
        Invitation(
            tenant_id=world.tenant.id,
            object_type="workspace",
            object_id=world.workspace.id,
            role="member",
            token_hash="h1",
            status="maybe",
            invited_by=world.owner.id,
        ),
    )


def test_share_links_are_view_only(db, world):
    kb = make_kb(db, world.workspace, world.owner)
    base = dict(tenant_id=world.tenant.id, object_id=kb.id, created_by=world.owner.id)
    for perm in ("edit", "manage", "comment"):
        _rejects(db, ShareLink(**base, object_type="knowledge_base", token_hash=uuid.uuid4().hex, permission=perm))
    _rejects(db, ShareLink(**base, object_type="workspace", token_hash=uuid.uuid4().hex))
    ok = ShareLink(**base, object_type="knowledge_base", token_hash=uuid.uuid4().hex)
    db.add(ok)
    db.flush()
    assert ok.permission == "view"
    with pytest.raises(IntegrityError):
        with db.begin_nested():
            db.execute(text("UPDATE share_links SET permission = 'edit' WHERE id = :i"), {"i": ok.id})


def test_integration_tables_checks(db, world):
    _rejects(
        db,
        McpPersonalAccessToken(
            tenant_id=world.tenant.id, user_id=world.member.id, name="t", token_hash="x1", status="paused"
        ),
    )
    _rejects(db, DifyApiKey(tenant_id=world.tenant.id, name="k", key_hash="k1", status="deleted"))
    kb = make_kb(db, world.workspace, world.owner)
    db.add(
        DifyKnowledgeMapping(
            tenant_id=world.tenant.id, dify_knowledge_id="abc", knowledge_base_id=kb.id, status="active"
        )
    )
    db.flush()
    _rejects(
        db,
        DifyKnowledgeMapping(
            tenant_id=world.tenant.id, dify_knowledge_id="abc", knowledge_base_id=kb.id, status="active"
        ),
    )
    _rejects(
        db,
        DifyKnowledgeMapping(
            tenant_id=world.tenant.id, dify_knowledge_id="abd", knowledge_base_id=kb.id, status="paused"
        ),
    )


def test_audit_actor_type_check(db):
    from openkb.models import AuditLog

    _rejects(db, AuditLog(actor_type="robot", action="x"))


def test_group_member_unique(db, world):
    from openkb.models import GroupMember
    from tests.factories import make_group

    g = make_group(db, world.tenant, world.owner, [world.member])
    _rejects(db, GroupMember(tenant_id=world.tenant.id, group_id=g.id, user_id=world.member.id))


def test_index_profile_statuses_and_alias_switch_kinds(db):
    """Migration 0002: profiles may be ``ready`` and ``dropped``; alias switches have a closed set
    of kinds and keep their order in a sequence."""
    from openkb.models import MilvusAliasSwitch, MilvusIndexProfile

    def profile(status: str) -> MilvusIndexProfile:
        n = uuid.uuid4().hex[:8]
        return MilvusIndexProfile(
            name=f"p-{n}",
            alias="",
            collection_name=f"c_{n}",
            schema_version="chunks-1",
            vector_dim=0,
            embedding_function_name="",
            status=status,
        )

    for ok in ("building", "ready", "active", "deprecated", "failed", "dropped"):
        db.add(profile(ok))
        db.flush()
    _rejects(db, profile("gone"))
    _rejects(db, MilvusAliasSwitch(alias="a", to_collection="c", kind="flip", actor_type="system"))
    first = MilvusAliasSwitch(alias="a", from_collection=None, to_collection="c1", kind="initial", actor_type="system")
    db.add(first)
    db.flush()
    back = MilvusAliasSwitch(
        alias="a", from_collection="c1", to_collection="c2", kind="rollback", reverts_id=first.id, actor_type="system"
    )
    db.add(back)
    db.flush()
    assert back.id > first.id
    _rejects(
        db,
        MilvusAliasSwitch(
            alias="a", to_collection="c", kind="rollback", reverts_id=back.id + 10**9, actor_type="system"
        ),
    )


def test_documents_index_attempts_defaults_to_zero(db, world):
    doc = make_doc(db, make_kb(db, world.workspace, world.owner), world.owner)
    db.refresh(doc)
    assert doc.index_attempts == 0
    got = db.execute(text("SELECT index_attempts FROM documents WHERE id = :i"), {"i": doc.id}).scalar_one()
    assert got == 0
