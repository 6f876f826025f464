"""A person with an installed app, on the rolled-back ``db`` session (no HTTP, no Milvus)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from sqlmodel import Session

from openkb.apps import registry
from openkb.apps.registry import AppCaller
from openkb.permissions import Principal
from tests.factories import make_tenant, make_user

SECRET = "test-secret-for-app-refs"
ALL = [
    "collections.read:diary",
    "collections.write:diary",
    "collections.read:keep",
    "collections.write:keep",
    "collections.read:user-selected",
    "collections.write:user-selected",
    "collections.create",
    "collections.bulk",
    "changes.manage",
    "origin.override",
    "facts.read:self:pref.food.*",
    "facts.write:self:pref.food.*",
    "entities.resolve:person",
]


@dataclass
class AppWorld:
    db: Session
    tenant_id: uuid.UUID
    user: Principal
    installation_id: uuid.UUID
    token: str

    def caller(self) -> AppCaller:
        """What the next call of the app sees (re-read from PostgreSQL, like every request)."""
        return registry.resolve_caller(self.db, self.token, SECRET)

    def grant(self, *perms: str, on: bool = True) -> AppCaller:
        for p in perms:
            registry.set_grant(self.db, self.user, self.installation_id, p, on)
        return self.caller()

    def install_another(self, name: str | None = None, perms: list[str] | None = None) -> AppWorld:
        app = registry.register_app(
            self.db,
            self.user,
            name=name or f"app-{uuid.uuid4().hex[:6]}",
            permissions=perms or ALL,
            hosts=["example.org"],
        )
        done = registry.install_app(self.db, self.user, app.id)
        return AppWorld(self.db, self.tenant_id, self.user, done.installation.id, done.credential)


def make_world(db: Session) -> AppWorld:
    t = make_tenant(db)
    u = make_user(db, t)
    p = Principal.user(u.id, t.id)
    w = AppWorld(db, t.id, p, uuid.uuid4(), "")
    return w.install_another("recipes")


@pytest.fixture()
def aw(db: Session) -> AppWorld:
    return make_world(db)
