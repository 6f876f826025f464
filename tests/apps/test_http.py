"""The app API over HTTP with the typed client (docs/apps.md#api): the live server, real
PostgreSQL, Milvus Lite and the index worker. One module-scoped world keeps it lean."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
from sqlmodel import Session, select

from openkb.apps.client import AppApiError, KnowledgeClient
from openkb.models import Document
from tests.api.helpers import bearer_client, make_user_with_pat
from tests.factories import make_tenant

RW = ("kb:read", "kb:search", "doc:read", "doc:write", "kb:write")


@pytest.fixture(scope="module")
def mcommitted(engine):
    return lambda: Session(engine, expire_on_commit=False)


@pytest.fixture(scope="module")
def world(live_server, mcommitted, worker):  # noqa: ARG001 - the worker indexes what the app writes
    committed = mcommitted
    with committed() as s:
        tenant = make_tenant(s)
        s.commit()
    _, pat = make_user_with_pat(committed, tenant, scopes=RW)
    user = bearer_client(live_server, pat)
    r = user.post(
        "/api/apps/v1/apps",
        json={
            "name": "diary-bot",
            "description": "keeps your diary",
            "permissions": ["collections.read:diary", "collections.write:diary", "collections.create"],
            "reason": "write one entry a day",
        },
    )
    assert r.status_code == 201, r.text
    r = user.post("/api/apps/v1/installations", json={"app": "diary-bot"})
    assert r.status_code == 201, r.text
    inst = r.json()["installation"]
    kb = KnowledgeClient(live_server, r.json()["credential"])
    yield {"user": user, "kb": kb, "inst": inst, "pat": pat, "base": live_server, "committed": committed}
    kb.close()
    user.close()


def _switch(w, permission: str, enabled: bool) -> None:
    r = w["user"].put(
        f"/api/apps/v1/installations/{w['inst']['id']}/grants", json={"permission": permission, "enabled": enabled}
    )
    assert r.status_code == 200, r.text


def _wait_indexed(committed, title: str) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        with committed() as s:
            d = s.exec(select(Document).where(Document.title == title)).first()
            if d is not None and d.index_status == "indexed" and d.indexed_version_id == d.current_version_id:
                return
        time.sleep(0.1)
    pytest.fail(f"{title} not indexed")


def _eventually(cond, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail("the search never saw both documents")
        time.sleep(0.2)


def test_installed_with_every_switch_off_and_sentences(world) -> None:
    grants = world["inst"]["grants"]
    assert [g["enabled"] for g in grants] == [False, False, False]
    assert {g["sentences"]["zh-CN"] for g in grants} == {"读取你的日记", "写入你的日记", "创建自己的知识库"}


def test_nothing_granted_means_nothing_seen_and_named_refusals(world) -> None:
    kb = world["kb"]
    assert kb.collections.list() == []
    assert kb.search("") == []
    with pytest.raises(AppApiError) as e:
        kb.documents.upsert(collection="diary", key="2026-09-01", title="x", body="x")
    assert e.value.status == 403 and e.value.code == "KNOWLEDGE_PERMISSION_MISSING"
    assert "lacks knowledge permission collections.write:diary" in e.value.detail
    with pytest.raises(AppApiError) as e:
        kb.collections.create("菜谱")
    assert "lacks knowledge permission collections.create" in e.value.detail


def test_write_search_and_time_range_through_the_client(world) -> None:
    kb = world["kb"]
    _switch(world, "collections.write:diary", True)
    _switch(world, "collections.read:diary", True)
    a = kb.documents.upsert(collection="diary", key="2026-09-22", title="2026-09-22", body="番茄牛腩 for dinner")
    b = kb.documents.upsert(collection="diary", key="2026-09-23", title="2026-09-23", body="番茄牛腩 again, and rain")
    assert a["status"] == b["status"] == "created"
    again = kb.documents.upsert(collection="diary", key="2026-09-22", title="2026-09-22", body="番茄牛腩 for dinner")
    assert again["status"] == "unchanged" and again["ref"] == a["ref"]
    _wait_indexed(world["committed"], "2026-09-22")
    _wait_indexed(world["committed"], "2026-09-23")
    # the index is eventually consistent (rows become searchable a moment after the job ends)
    _eventually(lambda: len(kb.search("番茄牛腩", collections=["diary"])) == 2)
    day = kb.search("番茄牛腩", collections=["diary"], time_range={"from": "2026-09-22", "to": "2026-09-22"})
    assert [h["document"] for h in day] == [a["ref"]]
    both = kb.search("番茄牛腩", collections=["diary"])
    assert {h["document"] for h in both} == {a["ref"], b["ref"]}
    newest = kb.search("", collections=["diary"])
    assert [h["document"] for h in newest] == [b["ref"], a["ref"]]
    listed = kb.documents.list("diary", time_range={"from": "2026-09-23"})
    assert [d["ref"] for d in listed] == [b["ref"]] and listed[0]["updatedAt"]
    assert kb.documents.get_by_key("diary", "2026-09-23")["body"].startswith("番茄牛腩 again")
    part = kb.documents.get(a["ref"], range=(0, 3))
    assert "body" not in part and [c["index"] for c in part["chunks"]] == [0]
    assert "番茄牛腩" in part["chunks"][0]["text"]
    changes = kb.changes.list()
    assert {c["op"] for c in changes} == {"document.create"} and all(c["own"] for c in changes)
    # switched off: the very next call is refused, and search says nothing
    _switch(world, "collections.read:diary", False)
    assert kb.search("番茄牛腩") == []
    with pytest.raises(AppApiError) as e:
        kb.documents.get(a["ref"])
    assert "lacks knowledge permission collections.read:diary" in e.value.detail
    _switch(world, "collections.read:diary", True)


def test_credentials_do_not_cross_surfaces(world) -> None:
    cred = world["kb"]._headers["Authorization"]
    with httpx.Client(base_url=world["base"], timeout=30) as raw:
        assert raw.get("/api/me", headers={"Authorization": cred}).status_code == 401
        r = raw.post(
            "/api/apps/v1/knowledge/collections.list", json={}, headers={"Authorization": f"Bearer {world['pat']}"}
        )
        assert r.status_code == 401
        r = raw.post("/api/apps/v1/knowledge/collections.list", json={"x": 1}, headers={"Authorization": cred})
        assert r.status_code == 422 and r.json()["error"] == "VALIDATION_ERROR"
        r = raw.post("/api/apps/v1/knowledge/documents.get", json={"ref": "A" * 44}, headers={"Authorization": cred})
        assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND"


def test_uninstall_kills_the_credential_at_once(world, live_server, committed) -> None:
    with committed() as s:
        tenant = make_tenant(s)
        s.commit()
    _, pat = make_user_with_pat(committed, tenant, scopes=RW)
    with bearer_client(live_server, pat) as user:
        assert (
            user.post("/api/apps/v1/apps", json={"name": "tmp", "permissions": ["collections.create"]}).status_code
            == 201
        )
        r = user.post("/api/apps/v1/installations", json={"app": "tmp"}).json()
        with KnowledgeClient(live_server, r["credential"]) as kb:
            assert kb.collections.list() == []
            u = user.post(f"/api/apps/v1/installations/{r['installation']['id']}/uninstall", json={"mode": "delete"})
            assert u.status_code == 200 and u.json()["mode"] == "delete"
            with pytest.raises(AppApiError) as e:
                kb.collections.list()
            assert e.value.status == 401
        listed = user.get("/api/apps/v1/installations").json()["items"]
        assert listed == []
        other = user.get(f"/api/apps/v1/installations/{uuid.uuid4()}")
        assert other.status_code == 404


def test_the_installation_shows_when_the_app_last_called(world) -> None:
    world["kb"].collections.list()
    r = world["user"].get(f"/api/apps/v1/installations/{world['inst']['id']}")
    assert r.status_code == 200 and r.json()["last_used_at"] is not None
    listed = world["user"].get("/api/apps/v1/installations").json()["items"]
    assert [i["last_used_at"] is not None for i in listed if i["id"] == world["inst"]["id"]] == [True]
