"""A person with apps holding facts/entities permissions, on the rolled-back ``db`` session."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlmodel import Session

from openkb.apps import registry
from openkb.apps.registry import AppCaller
from openkb.permissions import Principal
from tests.apps.conftest import SECRET
from tests.factories import make_tenant, make_user


@dataclass
class Person:
    db: Session
    tenant_id: uuid.UUID
    user: Principal
    apps: dict[str, tuple[uuid.UUID, str]] = field(default_factory=dict)

    def install(
        self, name: str, perms: list[str], predicates: list[dict[str, Any]] | None = None, *, on: bool = True
    ) -> AppCaller:
        app = registry.register_app(self.db, self.user, name=name, permissions=perms, predicates=predicates)
        done = registry.install_app(self.db, self.user, app.id)
        self.apps[name] = (done.installation.id, done.credential)
        if on:
            for p in perms:
                registry.set_grant(self.db, self.user, done.installation.id, p, True)
        return self.caller(name)

    def caller(self, name: str) -> AppCaller:
        return registry.resolve_caller(self.db, self.apps[name][1], SECRET)

    def switch(self, name: str, perm: str, on: bool) -> AppCaller:
        registry.set_grant(self.db, self.user, self.apps[name][0], perm, on)
        return self.caller(name)


def make_person(db: Session) -> Person:
    t = make_tenant(db)
    u = make_user(db, t)
    return Person(db, t.id, Principal.user(u.id, t.id))


@pytest.fixture()
def me(db: Session) -> Person:
    return make_person(db)
