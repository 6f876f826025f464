"""Service-level fixtures: a rolled-back session, a recording job queue and a persona world."""

from __future__ import annotations

import pytest

import openkb.jobs as jobs
from openkb.content import Actor
from openkb.jobs import RecordingQueue
from openkb.permissions import Principal
from tests.factories import make_kb, make_personas


@pytest.fixture()
def queue():
    previous = jobs._queue
    q = RecordingQueue()
    jobs.set_queue(q)
    try:
        yield q
    finally:
        jobs.set_queue(previous)


class World:
    def __init__(self, db):
        self.db = db
        self.p = make_personas(db)
        self.kb = make_kb(db, self.p.workspace, self.p.owner, visibility="workspace")

    def principal(self, user, **kw):
        tenant = self.p.other_tenant if user is self.p.other_tenant_user else self.p.tenant
        return Principal.user(user, tenant.id, **kw)

    def actor(self, user=None, run_id=None, **kw):
        return Actor.of(self.principal(user or self.p.owner, **kw), run_id)

    def commit(self):
        """Commit the savepoint so after-commit hooks (job enqueue) run."""
        self.db.commit()


@pytest.fixture()
def world(db, queue):
    return World(db)
