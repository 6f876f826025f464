from __future__ import annotations

import pytest

from openkb.permissions import Principal
from tests.factories import make_personas


@pytest.fixture()
def w(db):
    """Personas: owner, admin, member, guest, outsider, tenant_admin, other_tenant_user."""
    return make_personas(db)


@pytest.fixture()
def P(w):
    """``P(user)``: the user principal of a persona in the personas' tenant."""

    def make(user, scopes=None):
        return Principal.user(user, w.tenant.id, scopes=scopes)

    return make
