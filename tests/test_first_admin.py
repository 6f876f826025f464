"""``openkb init --email`` creates the first system_admin through a service that audits it."""

from __future__ import annotations

import uuid

from sqlmodel import select

from openkb.audit import set_origin
from openkb.bootstrap import create_first_admin, ensure_instance
from openkb.models import AuditLog, TenantMembership


def _no_system_admin(db) -> None:
    """Inside the test's rolled-back transaction, the instance has no system_admin yet."""
    for m in db.exec(select(TenantMembership).where(TenantMembership.role == "system_admin")).all():
        m.role = "member"
        db.add(m)
    db.flush()


def test_first_admin_is_created_once_and_audited(db):
    _no_system_admin(db)
    set_origin(db, via="cli")
    tenant = ensure_instance(db).tenant
    email = f"First-{uuid.uuid4().hex[:6]}@Example.com"
    asked: list[int] = []

    def password() -> str:
        asked.append(1)
        return "correct horse battery"

    first = create_first_admin(db, tenant=tenant, email=email, password=password)
    assert first.user is not None and first.user.email == email.lower()
    row = db.exec(select(AuditLog).where(AuditLog.action == "user.create", AuditLog.object_id == first.user.id)).one()
    assert row.meta["role"] == "system_admin" and row.meta["via"] == "cli" and row.actor_type == "system"

    again = create_first_admin(db, tenant=tenant, email=email, password=password)
    assert again.user is None and email.lower() in again.note
    other = create_first_admin(db, tenant=tenant, email="someone-else@example.com", password=password)
    assert other.user is None and other.note == "a system_admin already exists; nothing created"
    assert asked == [1]  # nobody is asked for a password that would not be used


def test_init_names_an_existing_sign_up_the_first_admin(db):
    """The first sign-up on an appliance whose verification mail nobody received: ``openkb init
    --email`` with that address makes them system_admin and active, keeps their password and asks
    for none; once an administrator exists it changes nothing."""
    from openkb.security import hash_password, verify_password
    from tests.factories import make_user

    _no_system_admin(db)
    set_origin(db, via="cli")
    tenant = ensure_instance(db).tenant
    waiting = make_user(db, tenant, status="pending_email_verification")
    waiting.password_hash = hash_before = hash_password("correct horse battery")
    db.add(waiting)
    db.flush()

    def password() -> str:
        raise AssertionError("no password is read for an existing account")

    first = create_first_admin(db, tenant=tenant, email=waiting.email.upper(), password=password)
    assert first.user is not None and first.user.id == waiting.id and not first.created
    assert "password unchanged" in first.note
    db.refresh(waiting)
    assert waiting.status == "active" and waiting.password_hash == hash_before
    assert verify_password(waiting.password_hash, "correct horse battery")
    role = db.exec(select(TenantMembership.role).where(TenantMembership.user_id == waiting.id)).one()
    assert role == "system_admin"
    row = db.exec(
        select(AuditLog).where(AuditLog.action == "user.role_granted", AuditLog.object_id == waiting.id)
    ).one()
    assert row.meta["reason"] == "openkb_init" and row.actor_type == "system" and row.meta["via"] == "cli"

    other = make_user(db, tenant, status="pending_email_verification")
    again = create_first_admin(db, tenant=tenant, email=other.email, password=password)
    assert again.user is None and again.note == "a system_admin already exists; nothing created"


def test_first_admin_state_says_what_up_tells_the_operator(db):
    from openkb.bootstrap import default_tenant, first_admin_state
    from openkb.models import AuthSettings
    from tests.factories import make_user

    _no_system_admin(db)
    tenant = default_tenant(db)
    row = db.exec(select(AuthSettings).where(AuthSettings.tenant_id == tenant.id)).first() or AuthSettings(
        tenant_id=tenant.id
    )
    row.first_user_becomes_admin = True
    db.add(row)
    db.flush()
    assert first_admin_state(db) == "first_sign_up"
    row.first_user_becomes_admin = False
    db.add(row)
    db.flush()
    assert first_admin_state(db) == "init"
    make_user(db, tenant, role="system_admin")
    assert first_admin_state(db) == "present"
