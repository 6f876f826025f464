"""docs/accounts.md#first-administrator at the service level, isolated inside a rolled-back transaction.

Inside the ``db`` session every system_admin membership is deleted (tenant_admins become members)
and the default tenant gets its own settings row, so "no administrator exists" holds whatever
else the shared database contains; the rollback at the end undoes all of it.
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
    db.execute(text("UPDATE tenant_memberships SET role = 'member' WHERE role = 'tenant_admin'"))
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


def _granted(db, user_id):
    from openkb.models import AuditLog

    return db.exec(select(AuditLog).where(AuditLog.action == "user.role_granted", AuditLog.object_id == user_id)).all()


def test_grant_is_audited_with_its_reason(world):
    world.configure(first_user_becomes_admin=True)
    r = _register(world)
    (row,) = _granted(world.db, r.user.id)
    assert row.meta["reason"] == "first_user_becomes_admin"
    assert row.meta["before"] == {"role": "member"} and row.meta["after"] == {"role": "system_admin"}


@pytest.mark.parametrize("pending", ["pending_email_verification", "pending_activation"])
def test_activating_the_first_sign_up_completes_it_as_administrator(world, pending):
    """The operator of an appliance whose mail nobody receives activates the first sign-up from
    the shell (``openkb user activate``): it becomes the administrator, as at verification."""
    from openkb.accounts import admin
    from openkb.permissions import Principal

    world.configure(first_user_becomes_admin=True, email_verification_required=True)
    r = _register(world)
    r.user.status = pending
    world.db.add(r.user)
    world.db.flush()
    assert _role(world.db, r.user.id) == "member" and not _granted(world.db, r.user.id)
    user = admin.activate(world.db, Principal.system(), r.user.id)
    assert user.status == "active" and _role(world.db, r.user.id) == "system_admin"
    assert admin.is_system_admin(world.db, r.user.id)
    assert [g.meta["reason"] for g in _granted(world.db, r.user.id)] == ["first_user_becomes_admin"]
    # the next sign-up activated is a member: the instance has its administrator
    second = _register(world)
    admin.activate(world.db, Principal.system(), second.user.id)
    assert _role(world.db, second.user.id) == "member" and not _granted(world.db, second.user.id)


def test_reactivating_a_suspended_member_never_makes_an_administrator(world):
    """Only completing a sign-up is the rule's moment: a suspended member let back in (with no
    system_admin on the instance) stays a member."""
    from openkb.accounts import admin
    from openkb.permissions import Principal

    world.configure(first_user_becomes_admin=False)
    r = _register(world)
    admin.activate(world.db, Principal.system(), r.user.id)
    world.configure(first_user_becomes_admin=True)
    admin.suspend(world.db, Principal.system(), r.user.id)
    admin.activate(world.db, Principal.system(), r.user.id)
    assert _role(world.db, r.user.id) == "member" and not _granted(world.db, r.user.id)


def test_activation_with_the_rule_off_makes_no_administrator(world):
    from openkb.accounts import admin
    from openkb.permissions import Principal

    world.configure(first_user_becomes_admin=False, email_verification_required=True)
    r = _register(world)
    admin.activate(world.db, Principal.system(), r.user.id)
    assert _role(world.db, r.user.id) == "member"


def test_a_tenant_admins_activation_never_makes_an_administrator(world):
    """Only the operator's activation stands in for the mailed link: a tenant_admin activating
    a sign-up on an instance with no system_admin would be handing out a role above their own."""
    from openkb.accounts import admin
    from openkb.permissions import Principal
    from tests.factories import make_user

    world.configure(first_user_becomes_admin=True, email_verification_required=True)
    boss = make_user(world.db, world.tenant, role="tenant_admin")
    r = _register(world)
    admin.activate(world.db, Principal.user(boss, world.tenant.id), r.user.id)
    assert r.user.status == "active" and _role(world.db, r.user.id) == "member"
    assert not _granted(world.db, r.user.id)


def test_the_operators_activation_grants_nothing_where_tenant_admins_run_things(world):
    """With a tenant_admin on the instance (and no system_admin), ``openkb user activate`` is an
    activation and nothing more: the CLI and the REST route write the same audit rows."""
    from openkb.accounts import admin
    from openkb.permissions import Principal
    from tests.factories import make_user

    world.configure(first_user_becomes_admin=True, email_verification_required=True)
    make_user(world.db, world.tenant, role="tenant_admin")
    r = _register(world)
    admin.activate(world.db, Principal.system(), r.user.id)
    assert r.user.status == "active" and _role(world.db, r.user.id) == "member"
    assert not _granted(world.db, r.user.id)
