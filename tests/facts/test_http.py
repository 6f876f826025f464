"""Facts and entities over HTTP with the typed client (docs/facts.md): the live server and real
PostgreSQL; the user's side needs the ``facts:read`` token scope. One module-scoped world."""

from __future__ import annotations

import pytest
from sqlmodel import Session

from openkb.apps.client import AppApiError, KnowledgeClient
from tests.api.helpers import bearer_client, make_user_with_pat
from tests.factories import make_tenant

RW = ("kb:read", "kb:search", "doc:read", "doc:write", "kb:write")
PERMS = [
    "facts.read:self:location.home.*",
    "facts.read:self:pref.food.*",
    "facts.write:self:pref.food.*",
    "entities.write:person",
    "entities.read:person",
]


@pytest.fixture(scope="module")
def world(live_server, engine):
    committed = lambda: Session(engine, expire_on_commit=False)  # noqa: E731
    with committed() as s:
        tenant = make_tenant(s)
        s.commit()
    user_row, pat = make_user_with_pat(committed, tenant, scopes=(*RW, "facts:read"))
    _, plain = make_user_with_pat(committed, tenant, scopes=RW, user=user_row)
    user = bearer_client(live_server, pat)
    r = user.post(
        "/api/apps/v1/apps",
        json={"name": "recipes", "permissions": PERMS, "predicates": [
            {"predicate": "pref.food.rated", "cardinality": "many", "description": "你打过高分的菜", "aliases": ["高分菜"]}
        ]},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    r = user.post("/api/apps/v1/installations", json={"app": "recipes"})
    assert r.status_code == 201, r.text
    inst = r.json()["installation"]
    for p in PERMS:
        g = user.put(f"/api/apps/v1/installations/{inst['id']}/grants", json={"permission": p, "enabled": True})
        assert g.status_code == 200, g.text
    kb = KnowledgeClient(live_server, r.json()["credential"])
    plain_client = bearer_client(live_server, plain)
    yield {"user": user, "kb": kb, "plain": plain_client}
    kb.close()
    user.close()
    plain_client.close()


def test_the_user_says_the_app_reads_and_writes(world) -> None:
    user, kb = world["user"], world["kb"]
    r = user.post("/api/apps/v1/facts", json={"predicate": "location.home.city", "value": "Utrecht"})
    assert r.status_code == 200 and r.json()["status"] == "applied", r.text
    assert kb.profile.get("location.home") == [{"predicate": "location.home.city", "value": "Utrecht"}]
    out = kb.facts.put(predicate_hint="高分菜", value="番茄牛腩", source_ref="record/123")
    assert out["status"] == "applied" and out["predicate"] == "pref.food.rated"
    assert kb.facts.put(predicate_hint="pref.food.rated", value="番茄牛腩")["status"] == "duplicate"
    [f] = kb.facts.lookup("self", "pref.food")
    assert (
        f["value"] == "番茄牛腩"
        and f["ref"] == out["ref"]
        and set(f) == {"ref", "predicate", "value", "object", "validFrom"}
    )
    with pytest.raises(AppApiError) as e:
        kb.facts.put(predicate_hint="location.home.city", value="Delft")
    assert e.value.status == 403 and e.value.code == "KNOWLEDGE_PERMISSION_MISSING"
    assert e.value.detail == "lacks knowledge permission facts.write:self:location.home.city"
    assert kb.facts.retract(out["ref"]) == {"status": "retracted"}
    mine = user.get("/api/apps/v1/facts", params={"prefix": "pref.food", "history": "true"}).json()["items"]
    assert [(x["value"], x["said_by"], x["app"], x["valid_to"] is not None) for x in mine] == [
        ("番茄牛腩", "app", "recipes", True)
    ]
    preds = {p["predicate"]: p for p in user.get("/api/apps/v1/predicates").json()["items"]}
    assert preds["pref.food.rated"]["origin"] == "app" and preds["location.home.city"]["names"]["zh-CN"] == "居住城市"


def test_entities_resolve_merge_and_delete(world) -> None:
    user, kb = world["user"], world["kb"]
    assert kb.entities.resolve({"email": "zhangsan@acme.nl"}) is None
    a = kb.entities.resolve({"email": "ZhangSan@acme.nl", "name": "张三"}, create=True)
    assert a is not None and a["created"] and a["displayName"] == "张三"
    b = kb.entities.resolve({"phone": "+31 6 1234 5678"}, create=True, display_name="Zhang San")
    assert kb.entities.add_identifier(b["ref"], "handle", "GitHub:zhangsan") == {"status": "added"}
    ents = {e["display_name"]: e for e in user.get("/api/apps/v1/entities", params={"kind": "person"}).json()["items"]}
    r = user.post(f"/api/apps/v1/entities/{ents['张三']['id']}/merge", json={"merged_id": ents["Zhang San"]["id"]})
    assert r.status_code == 200, r.text
    assert {i["kind"] for i in r.json()["identifiers"]} == {"email", "name", "phone", "handle"}
    assert kb.entities.get(b["ref"])["ref"] == a["ref"]  # the old ref leads to the survivor
    assert user.delete(f"/api/apps/v1/entities/{ents['张三']['id']}").status_code == 204
    for ref in (a["ref"], b["ref"]):
        with pytest.raises(AppApiError) as e:
            kb.entities.get(ref)
        assert e.value.status == 404 and "no entity" in e.value.detail


def test_facts_need_the_facts_read_scope(world) -> None:
    r = world["plain"].get("/api/apps/v1/facts")
    assert r.status_code == 403 and r.json()["error"] == "INSUFFICIENT_SCOPE", r.text
    assert world["plain"].get("/api/apps/v1/entities").status_code == 403


def test_an_unknown_credential_is_401(live_server) -> None:
    with KnowledgeClient(live_server, "kbapp_nope") as kb, pytest.raises(AppApiError) as e:
        kb.facts.lookup()
    assert e.value.status == 401
