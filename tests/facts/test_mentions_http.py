"""``search(query, entities=[ref])`` end to end (docs/facts.md#mentions): the app writes keep
pages, the index worker chunks them (recording mentions of the user's entities, Chinese names
included) and indexes them in Milvus; the search keeps only passages mentioning the entity."""

from __future__ import annotations

import time

import pytest
from sqlmodel import Session, select

from openkb.apps.client import KnowledgeClient
from openkb.models import Document
from tests.api.helpers import bearer_client, make_user_with_pat
from tests.factories import make_tenant

PERMS = ["collections.read:keep", "collections.write:keep", "entities.write:person"]


@pytest.fixture(scope="module")
def world(live_server, engine, worker):  # noqa: ARG001 - the worker indexes what the app writes
    committed = lambda: Session(engine, expire_on_commit=False)  # noqa: E731
    with committed() as s:
        t = make_tenant(s)
        s.commit()
    _, pat = make_user_with_pat(committed, t, scopes=("kb:read", "kb:write", "doc:write"))
    user = bearer_client(live_server, pat)
    assert user.post("/api/apps/v1/apps", json={"name": "diary", "permissions": PERMS}).status_code == 201
    r = user.post("/api/apps/v1/installations", json={"app": "diary"})
    inst = r.json()["installation"]
    for p in PERMS:
        user.put(f"/api/apps/v1/installations/{inst['id']}/grants", json={"permission": p, "enabled": True})
    kb = KnowledgeClient(live_server, r.json()["credential"])
    yield {"kb": kb, "committed": committed}
    kb.close()
    user.close()


def _wait_indexed(committed, titles: list[str]) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        with committed() as s:
            docs = s.exec(select(Document).where(Document.title.in_(titles))).all()  # type: ignore[attr-defined]
            if len(docs) == len(titles) and all(
                d.index_status == "indexed" and d.indexed_version_id == d.current_version_id for d in docs
            ):
                return
        time.sleep(0.1)
    pytest.fail(f"{titles} not indexed")


def test_search_keeps_passages_mentioning_the_entity(world) -> None:
    kb = world["kb"]
    zs = kb.entities.resolve({"name": "张三"}, create=True)
    assert zs is not None
    days = {"facts-mention-a": "今天和张三吃了番茄牛腩。", "facts-mention-b": "一个人做了番茄牛腩。"}
    for key, body in days.items():
        kb.documents.upsert(collection="keep", key=key, title=key, body=body)
    _wait_indexed(world["committed"], list(days))
    deadline = time.monotonic() + 120
    while len(kb.search("番茄牛腩", collections=["keep"])) < 2:  # the index is eventually consistent
        assert time.monotonic() < deadline, "the search never saw both pages"
        time.sleep(0.2)
    hits = kb.search("番茄牛腩", entities=[zs["ref"]])
    assert [h["title"] for h in hits] == ["facts-mention-a"] and "张三" in hits[0]["text"]
    assert [h["title"] for h in kb.search("", entities=[zs["ref"]])] == ["facts-mention-a"]
    assert kb.search("完全无关的词", entities=[zs["ref"]]) == []
