"""A deleted account's apps stop at once (docs/accounts.md#deleting-a-user, docs/apps.md): the
installation's kbapp_ credential is revoked and the installation ends as a "keep" uninstall."""

from __future__ import annotations

import pytest
from sqlmodel import select

from openkb.accounts.deletion import delete_user
from openkb.apps import registry
from openkb.errors import Unauthenticated
from openkb.models import AppInstallation, Tenant
from openkb.permissions import Principal
from tests.apps.conftest import SECRET
from tests.factories import make_user


def test_deleting_the_user_revokes_their_apps(aw):
    aw.grant("collections.read:diary")  # works before
    other = aw.install_another("diary-helper")
    heir = make_user(aw.db, aw.db.get(Tenant, aw.tenant_id))  # the personal space needs an owner
    delete_user(aw.db, Principal.system(), aw.user.user_id, successor_id=heir.id)
    for world in (aw, other):
        with pytest.raises(Unauthenticated):
            registry.resolve_caller(aw.db, world.token, SECRET)
    rows = aw.db.exec(select(AppInstallation).where(AppInstallation.user_id == aw.user.user_id)).all()
    assert {(r.status, r.uninstall_mode) for r in rows} == {("uninstalled", "keep")}
    assert all(r.uninstalled_at is not None for r in rows)
