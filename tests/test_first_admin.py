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
