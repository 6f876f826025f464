"""An HTTP persona world for the content/sharing/assets/changes API tests.

Each world has its own tenant and users (the test database is shared), every persona a PAT with
read+write scopes and a Bearer client. The workspace and knowledge base are created through the
API by the owner, members added through the API too.
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Iterator
from typing import Any

import httpx

import openkb.jobs as jobs
from openkb.jobs import RecordingQueue
from tests.api.helpers import bearer_client, make_user_with_pat
from tests.factories import make_tenant

RW = ("kb:read", "kb:search", "doc:read", "doc:write", "kb:write")


def sha(md: str) -> str:
    return hashlib.sha256(md.encode("utf-8")).hexdigest()


@contextlib.contextmanager
def recording_queue() -> Iterator[RecordingQueue]:
    """Swap the process-wide job queue (the live server runs in this process) for a recorder."""
    previous = jobs._queue
    q = RecordingQueue()
    jobs.set_queue(q)
    try:
        yield q
    finally:
        jobs.set_queue(previous)


# who must see nothing of a private knowledge base (names of ``HttpWorld`` clients; "anon" = no login)
OUTSIDERS = ("other_tenant", "guest", "outsider", "anon")


class HttpWorld:
    def __init__(self, base: str, committed: Any) -> None:
        self.base = base
        self.committed = committed
        self._clients: list[httpx.Client] = []
        with committed() as s:
            self.tenant = make_tenant(s)
            self.other_tenant = make_tenant(s)
            s.commit()
        self.users: dict[str, uuid.UUID] = {}
        self.c: dict[str, httpx.Client] = {}
        for name in ("owner", "admin", "member", "guest", "outsider"):
            self.add_user(name)
        self.add_user("other_tenant", tenant=self.other_tenant)
        self.anon = self.client(None)
        r = self.c["owner"].post("/api/workspaces", json={"name": "Team space"})
        assert r.status_code == 201, r.text
        self.ws = r.json()
        for name, role in (("admin", "admin"), ("member", "member"), ("guest", "guest")):
            r = self.c["owner"].post(
                f"/api/workspaces/{self.ws['id']}/members", json={"user_id": str(self.users[name]), "role": role}
            )
            assert r.status_code == 201, r.text
        self.kb = self.new_kb(visibility="workspace")

    def add_user(self, name: str, tenant: Any = None, scopes: tuple[str, ...] = RW) -> httpx.Client:
        user, token = make_user_with_pat(self.committed, tenant or self.tenant, scopes=scopes)
        self.users[name] = user.id
        self.c[name] = self.client(token)
        return self.c[name]

    def client(self, token: str | None) -> httpx.Client:
        c = bearer_client(self.base, token) if token else httpx.Client(base_url=self.base, timeout=30)
        self._clients.append(c)
        return c

    def by_name(self, name: str) -> httpx.Client:
        return self.anon if name == "anon" else self.c[name]

    def close(self) -> None:
        for c in self._clients:
            c.close()

    # -- builders -----------------------------------------------------------------------------

    def new_kb(self, visibility: str = "workspace", **kw: Any) -> dict[str, Any]:
        r = self.c["owner"].post(
            "/api/knowledge-bases",
            json={"workspace_id": self.ws["id"], "title": f"KB {uuid.uuid4().hex[:6]}", "visibility": visibility, **kw},
        )
        assert r.status_code == 201, r.text
        return r.json()

    def grant(self, kb: dict[str, Any], name: str, role: str) -> dict[str, Any]:
        """Make persona ``name`` a collaborator of ``kb`` with ``role`` (by its owner)."""
        r = self.c["owner"].post(
            f"/api/objects/knowledge_base/{kb['id']}/collaborators",
            json={"subject_id": str(self.users[name]), "role": role},
        )
        assert r.status_code == 201, r.text
        return r.json()

    def doc(
        self, title: str = "Page", *, who: str = "owner", kb: dict | None = None, expect: int = 201, **body: Any
    ) -> dict[str, Any]:
        payload = {"knowledge_base_id": (kb or self.kb)["id"], "title": title, **body}
        r = self.c[who].post("/api/documents", json=payload)
        assert r.status_code == expect, r.text
        return r.json()

    def save(
        self, doc: dict[str, Any], md: str, base: str | None = None, who: str = "owner", **extra: Any
    ) -> httpx.Response:
        return self.c[who].post(
            f"/api/documents/{doc['id']}/versions",
            json={
                "base_version_id": base or doc["current_version_id"],
                "markdown": md,
                "markdown_hash": sha(md),
                **extra,
            },
        )
