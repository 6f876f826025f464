"""A tenant with a knowledge base to import into, and a helper that runs the pipeline with one
committed unit of work per file — as the CLI does."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from openkb import jobs
from openkb.content.actor import Actor
from openkb.db import session_scope
from openkb.importing.pipeline import ImportReport, run_import
from openkb.importing.sources import open_source
from openkb.jobs import RecordingQueue
from openkb.permissions import Principal
from openkb.storage import LocalBlobStore
from tests.factories import add_member, make_kb, make_tenant, make_user, make_workspace


class World:
    def __init__(self, engine: Any, blob_root: Path) -> None:
        self.engine = engine
        self.blobs = LocalBlobStore(blob_root)
        with Session(engine, expire_on_commit=False) as s:
            self.tenant = make_tenant(s)
            self.owner = make_user(s, self.tenant)
            self.outsider = make_user(s, self.tenant)
            self.guest = make_user(s, self.tenant)
            self.ws = make_workspace(s, self.tenant, self.owner)
            add_member(s, self.ws, self.guest, "guest")
            self.kb = make_kb(s, self.ws, self.owner, visibility="private")
            s.commit()

    def units(self):
        return session_scope(self.engine)

    def actor(self, who: Any = None, run_id: str | None = None) -> Actor:
        u = who or self.owner
        return Actor.of(Principal.user(u.id, self.tenant.id), run_id, source="import")

    def new_kb(self) -> Any:
        with Session(self.engine, expire_on_commit=False) as s:
            kb = make_kb(s, self.ws, self.owner, visibility="private")
            s.commit()
        return kb

    def run(self, path: Path, kb: Any = None, who: Any = None, **kw: Any) -> ImportReport:
        src = open_source(path, 50 * 1024 * 1024)
        try:
            return run_import(
                self.units, self.blobs, kw.pop("actor", None) or self.actor(who), (kb or self.kb).id, src, **kw
            )
        finally:
            src.close()


@pytest.fixture(scope="module")
def queue() -> Any:
    previous = jobs._queue
    q = RecordingQueue()
    jobs.set_queue(q)
    yield q
    jobs.set_queue(previous)


@pytest.fixture(scope="module")
def world(engine, queue, tmp_path_factory) -> World:
    return World(engine, tmp_path_factory.mktemp("blobs"))


def by_path(report: ImportReport) -> dict[str, Any]:
    return {f.path: f for f in report.files}


def uid() -> str:
    return uuid.uuid4().hex[:6]


@pytest.fixture(scope="module")
def w(live_server, engine):
    """The HTTP persona world (tests/content/http_world.py), once per module."""
    from tests.content.http_world import HttpWorld

    world = HttpWorld(live_server, lambda: Session(engine, expire_on_commit=False))
    yield world
    world.close()
