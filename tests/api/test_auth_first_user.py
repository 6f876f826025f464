"""docs/accounts.md#first-administrator at the service level, isolated inside a rolled-back transaction.

Inside the ``db`` session every system_admin membership is deleted and the default tenant gets
its own settings row, so "no system_admin exists" holds whatever else the shared database
contains; the rollback at the end undoes all of it.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from sqlalchemy import text
from sqlmodel import select

from openkb.accounts import registration
from openkb.bootstrap import default_tenant
from openkb.mail import Mailer
from openkb.models import AuthSettings, EmailToken, TenantMembership
from tests.api.helpers import PASSWORD, unique_email


@pytest.fixture()
def world(db, settings):
    db.execute(text("DELETE FROM tenant_memberships WHERE role = 'system_admin'"))
    t = default_tenant(db)
    db.execute(text("DELETE FROM auth_settings WHERE tenant_id = :t"), {"t": t.id})
    ctx = SimpleNamespace(settings=settings, mailer=Mailer(settings))

    def configure(**changes):
        row = db.exec(select(AuthSettings).where(AuthSettings.tenant_id == t.id)).first()
        if row is None:
            row = AuthSettings(tenant_id=t.id, email_verification_required=False)
        for k, v in changes.items():
            setattr(row, k, v)
        db.add(row)
        db.flush()

    return SimpleNamespace(db=db, tenant=t, ctx=ctx, configure=configure)


def _role(db, user_id):
    return db.exec(select(TenantMembership.role).where(TenantMembership.user_id == user_id)).one()


def _register(world):
    return registration.register(world.db, world.ctx, email=unique_email(), password=PASSWORD, display_name=None)


def test_first_user_becomes_system_admin(world):
    world.configure(first_user_becomes_admin=True, default_signup_status="pending_activation")
    first = _register(world)
    assert first.became_system_admin and _role(world.db, first.user.id) == "system_admin"
    assert first.user.status == "active"
    second = _register(world)
    assert not second.became_system_admin and _role(world.db, second.user.id) == "member"
    assert second.user.status == "pending_activation"


def test_first_user_rule_off(world):
    world.configure(first_user_becomes_admin=False)
    r = _register(world)
    assert not r.became_system_admin and _role(world.db, r.user.id) == "member"


def test_with_verification_admin_is_granted_at_verification(world):
    from openkb.security import new_token

    world.configure(first_user_becomes_admin=True, email_verification_required=True)
    r = _register(world)
    assert r.user.status == "pending_email_verification"
    assert _role(world.db, r.user.id) == "member"
    # The mail only leaves after commit (never here); mint a token the same way the service does.
    plaintext, token_hash = new_token("kbverify")
    row = world.db.exec(select(EmailToken).where(EmailToken.user_id == r.user.id)).one()
    row.token_hash = token_hash
    world.db.add(row)
    world.db.flush()
    v = registration.verify_email(world.db, world.ctx, plaintext)
    assert v.became_system_admin and v.user.status == "active"
    assert _role(world.db, v.user.id) == "system_admin"


def test_existing_system_admin_blocks_rule(world):
    from tests.factories import make_user

    world.configure(first_user_becomes_admin=True)
    make_user(world.db, world.tenant, role="system_admin")
    r = _register(world)
    assert not r.became_system_admin and _role(world.db, r.user.id) == "member"
