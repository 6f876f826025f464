"""Facts, entities and the predicate vocabulary at the service layer (docs/facts.md): the seed's
examples, hint resolution, the write rules, entities (resolve, merge, delete), prefix rules,
quotas. Each test runs on the rolled-back ``db`` session (no HTTP, no Milvus)."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text
from sqlmodel import select

from openkb.accounts import admin
from openkb.apps import changes as C
from openkb.apps import knowledge as K
from openkb.apps import quotas, registry, uninstall
from openkb.errors import (
    AlreadyExists,
    AppQuotaExceeded,
    InvalidPermissionString,
    KnowledgePermissionMissing,
    NotFound,
    Unauthenticated,
    ValidationError,
)
from openkb.facts import entities as E
from openkb.facts import service as F
from openkb.facts import vocabulary as V
from openkb.models import TenantMembership
from openkb.permissions import Principal
from tests.facts.conftest import Person

RECIPES = ["facts.read:self:pref.food.*", "facts.write:self:pref.food.*", "collections.create"]
RATED = {"predicate": "pref.food.rated", "cardinality": "many", "description": "你打过高分的菜,用来推荐相似的菜。例如:红烧肉", "aliases": ["高分菜"]}  # fmt: skip
PEOPLE = ["entities.resolve:person", "entities.read:person", "entities.write:person"]


def lacks(perm: str):
    return pytest.raises(KnowledgePermissionMissing, match=f"lacks knowledge permission {perm.replace('*', '[*]')}$")


# --- vocabulary --------------------------------------------------------------------------------


def test_every_core_predicate_is_preinstalled_with_cardinality_and_names(me: Person) -> None:
    vocab = {p.predicate: p for p in V.all_predicates(me.db, me.tenant_id)}
    assert len(V.CORE) == 30
    for name, card in V.CORE:
        assert vocab[name].cardinality == card and vocab[name].origin == "core"
        assert vocab[name].name_zh and vocab[name].name_en
    assert vocab["location.home.city"].name_zh == "居住城市"
    assert vocab["relation.spouse"].cardinality == "one" and vocab["relation.friend"].cardinality == "many"
    V.seed_core(me.db, me.tenant_id)  # idempotent
    assert (
        me.db.execute(text("SELECT count(*) FROM fact_predicates WHERE tenant_id = :t"), {"t": me.tenant_id}).scalar()
        == 30
    )


# --- the seed's examples -------------------------------------------------------------------------


def test_weather_app_reads_only_the_home_location(me: Person) -> None:
    F.user_put(me.db, me.user, predicate="location.home.city", value="Utrecht")
    F.user_put(me.db, me.user, predicate="pref.food.dislike", value="香菜")
    c = me.install("weather", ["facts.read:self:location.home.*"], on=False)
    assert F.profile_get(me.db, c, "location.home") == []  # nothing switched on: left out, no error
    c = me.switch("weather", "facts.read:self:location.home.*", True)
    [home] = F.profile_get(me.db, c, "location.home")
    assert home == {"predicate": "location.home.city", "value": "Utrecht"}
    assert F.profile_get(me.db, c) == [home]  # the prefix may be left out; food is not readable
    assert F.lookup(me.db, c, "self", "pref.food") == []
    with lacks("facts.write:self:location.home.city"):
        F.put(me.db, c, predicate_hint="location.home.city", value="Amsterdam")


def test_weather_app_without_a_home_gets_nothing(me: Person) -> None:
    c = me.install("weather", ["facts.read:self:location.home.*"])
    assert F.profile_get(me.db, c, "location.home") == []


def test_recipe_app_rates_a_dish_and_keeps_the_recipe(me: Person) -> None:
    c = me.install("recipes", RECIPES, [RATED])

    def run(dish: str, rid: str, recipe: str) -> dict:
        # each ctx.knowledge call is its own request: the caller (grants, created collections) is re-read
        cols = K.collections_list(me.db, me.caller("recipes"))
        col = next((x for x in cols if x["name"] == "菜谱"), None) or K.collections_create(
            me.db, me.caller("recipes"), "菜谱"
        )
        fact = F.put(
            me.db, me.caller("recipes"), predicate_hint="pref.food.rated", value=dish, source_ref=f"record/{rid}"
        )
        doc = K.documents_upsert(me.db, me.caller("recipes"), collection=col["ref"], key=rid, title=dish, body=recipe)
        return {"fact": fact["status"], "doc": doc["status"], "predicate": fact["predicate"]}

    assert run("番茄牛腩", "123", "# 番茄牛腩\n\n先炖牛腩") == {
        "fact": "applied",
        "doc": "created",
        "predicate": "pref.food.rated",
    }
    assert run("番茄牛腩", "123", "# 番茄牛腩\n\n先炖牛腩") == {
        "fact": "duplicate",
        "doc": "unchanged",
        "predicate": "pref.food.rated",
    }
    assert run("红烧肉", "124", "# 红烧肉")["fact"] == "applied"  # cardinality many: both stay
    assert sorted(f["value"] for f in F.lookup(me.db, c, "self", "pref.food.rated")) == ["番茄牛腩", "红烧肉"]
    pred = V.get(me.db, me.tenant_id, "pref.food.rated")
    assert pred is not None and pred.origin == "app" and pred.aliases == ("高分菜",) and pred.cardinality == "many"
    row = me.db.execute(
        text("SELECT origin, source, source_ref, said_by FROM facts WHERE value = '\"番茄牛腩\"'")
    ).one()
    assert tuple(row) == ("app:recipes", "extracted", "record/123", "app")
    # uninstalled (keep): the declared predicate stays in the vocabulary, the facts too
    uninstall.uninstall(me.db, me.user, me.apps["recipes"][0], "keep")
    assert V.get(me.db, me.tenant_id, "pref.food.rated") is not None
    assert len(F.user_facts(me.db, me.user, prefix="pref.food.rated")) == 2


# --- hint resolution ------------------------------------------------------------------------------


def test_hint_resolution_order_full_alias_description_fallback(me: Person) -> None:
    c = me.install(
        "recipes",
        ["facts.read:self:pref.food.*", "facts.write:self:pref.food.*", "facts.read:self:x.shoe_size", "facts.write:self:x.shoe_size"],
        [RATED, {"predicate": "pref.food.spicy", "cardinality": "one", "description": "how hot: mild", "aliases": ["heat"]},
         {"predicate": "pref.food.heat_notes", "cardinality": "many", "description": "notes about heat and spice"}],
    )  # fmt: skip
    put = lambda hint, v="v": F.put(me.db, c, predicate_hint=hint, value=v)["predicate"]  # noqa: E731
    assert put("pref.food.rated") == "pref.food.rated"  # 1. the full predicate
    assert put("高分菜") == "pref.food.rated"  # 2. an alias
    assert put("heat") == "pref.food.spicy"  # 2. the alias wins over the description containing "heat"
    assert put("不喜欢的食物") == "pref.food.dislike"  # 3. a core predicate's name
    assert put("用来推荐相似的菜") == "pref.food.rated"  # 3. words of a description
    assert put("shoe size", 42) == "x.shoe_size"  # 4. the x. fallback, added to the vocabulary
    assert V.get(me.db, me.tenant_id, "x.shoe_size").description == "shoe size"
    assert put("pref.food.new_thing") == "pref.food.new_thing"  # a new predicate under a granted prefix


def test_the_permission_is_checked_on_the_resolved_predicate(me: Person) -> None:
    c = me.install("recipes", RECIPES, [RATED])
    with lacks("facts.write:self:location.home.city"):
        F.put(me.db, c, predicate_hint="居住城市", value="Utrecht")  # a name of location.home.city
    with lacks("facts.write:self:x.shoe_size"):
        F.put(me.db, c, predicate_hint="shoe size", value=42)
    assert V.get(me.db, me.tenant_id, "x.shoe_size") is None  # a refused write adds nothing
    c = me.switch("recipes", "facts.write:self:pref.food.*", False)
    with lacks("facts.write:self:pref.food.*"):  # the string it asked for, switched off
        F.put(me.db, c, predicate_hint="pref.food.like", value="面")


# --- write rules ----------------------------------------------------------------------------------


def test_cardinality_one_user_said_value_is_a_conflict_the_user_sees(me: Person) -> None:
    F.user_put(me.db, me.user, predicate="pref.communication.style", value="简洁")
    c = me.install("style", ["facts.read:self:pref.communication.*", "facts.write:self:pref.communication.*"])
    out = F.put(me.db, c, predicate_hint="pref.communication.style", value="详细")
    assert out["status"] == "conflict"
    assert [f["value"] for f in F.lookup(me.db, c, "self", "pref.communication.style")] == ["简洁"]
    mine = C.installation_changes(me.db, me.user, me.apps["style"][0])
    assert [(x["op"], x["status"]) for x in mine] == [("fact.put", "conflict")]
    assert mine[0]["after"]["proposed"] == "详细"


def test_cardinality_one_app_value_expires_and_history_is_kept(me: Person) -> None:
    c = me.install("loc", ["facts.read:self:location.home.*", "facts.write:self:location.home.*"])
    assert F.put(me.db, c, predicate_hint="location.home.city", value="Utrecht")["status"] == "applied"
    assert F.put(me.db, c, predicate_hint="location.home.city", value="Delft")["status"] == "applied"
    assert [f["value"] for f in F.lookup(me.db, c)] == ["Delft"]
    hist = F.user_facts(me.db, me.user, prefix="location.home.city", history=True)
    assert [(h["value"], h["valid_to"] is None, h["app"]) for h in hist] == [
        ("Utrecht", False, "loc"),
        ("Delft", True, "loc"),
    ]
    # the user says otherwise: it replaces the app's value
    F.user_put(me.db, me.user, predicate="location.home.city", value="Leiden")
    assert [f["value"] for f in F.lookup(me.db, c)] == ["Leiden"]


def test_retract_expires_own_facts_and_needs_changes_manage_for_others(me: Person) -> None:
    c = me.install("food", ["facts.read:self:pref.food.*", "facts.write:self:pref.food.*", "changes.manage"])
    c = me.switch("food", "changes.manage", False)
    mine = F.put(me.db, c, predicate_hint="pref.food.like", value="饺子")
    assert F.retract(me.db, c, mine["ref"]) == {"status": "retracted"}
    assert F.retract(me.db, c, mine["ref"]) == {"status": "already_retracted"}
    assert F.lookup(me.db, c) == []
    F.user_put(me.db, me.user, predicate="pref.food.like", value="面条")
    [users] = F.lookup(me.db, c)
    with lacks("changes.manage"):
        F.retract(me.db, c, users["ref"])
    c = me.switch("food", "changes.manage", True)
    assert F.retract(me.db, c, users["ref"]) == {"status": "retracted"}
    assert me.db.execute(text("SELECT count(*) FROM facts")).scalar() >= 2  # expired, never deleted


def test_lookup_hides_inferred_facts_and_writer_details(me: Person) -> None:
    c = me.install("food", ["facts.read:self:pref.food.*", "facts.write:self:pref.food.*"])
    F.put(me.db, c, predicate_hint="pref.food.like", value="饺子", confidence=0.4)
    sid = E.self_entity(me.db, me.tenant_id, me.user.user_id)
    me.db.execute(
        text(
            "INSERT INTO facts (id, tenant_id, user_id, subject_id, predicate, value, said_by, origin, source, inferred) "
            "VALUES (gen_random_uuid(), :t, :u, :s, 'pref.food.like', '\"猜的\"', 'app', 'system', 'inferred', true)"
        ),
        {"t": me.tenant_id, "u": me.user.user_id, "s": sid},
    )
    [f] = F.lookup(me.db, c, "self", "pref.food")
    assert set(f) == {"ref", "predicate", "value", "object", "validFrom"} and f["value"] == "饺子"


def test_origin_and_source_need_origin_override(me: Person) -> None:
    c = me.install("tidy", ["facts.read:self:pref.food.*", "facts.write:self:pref.food.*", "origin.override"])
    c = me.switch("tidy", "origin.override", False)
    with lacks("origin.override"):
        F.put(me.db, c, predicate_hint="pref.food.like", value="粥", origin="app:other", source="imported")
    c = me.switch("tidy", "origin.override", True)
    F.put(me.db, c, predicate_hint="pref.food.like", value="粥", origin="app:other", source="imported")
    assert tuple(me.db.execute(text("SELECT origin, source FROM facts")).one()) == ("app:other", "imported")


# --- prefix rules --------------------------------------------------------------------------------


def test_prefix_rules(me: Person) -> None:
    for bad in ("facts.read:self:*", "facts.read:self:location.*", "facts.read:self:nowhere.x.*"):
        with pytest.raises(InvalidPermissionString):
            me.install(f"bad-{len(bad)}", [bad])
    for pred, v in [("pref.food.like", "面"), ("pref.foods", "x"), ("pref.communication.style", "短"),
                    ("location.home.city", "Utrecht"), ("location.home.address", "Oudegracht 1")]:  # fmt: skip
        F.user_put(me.db, me.user, predicate=pred, value=v)
    c = me.install("narrow", ["facts.read:self:pref.food.*", "facts.read:self:location.home.city"])
    got = lambda p=None: [f["predicate"] for f in F.lookup(me.db, c, "self", p)]  # noqa: E731
    assert got() == ["location.home.city", "pref.food.like"]  # not pref.foods, not the address
    assert got("pref") == ["pref.food.like"]
    assert got("pref.food.*") == ["pref.food.like"]
    assert got("location.home") == ["location.home.city"]
    assert got("health") == []


# --- entities ------------------------------------------------------------------------------------


def test_resolve_is_a_point_lookup_with_normalized_identifiers(me: Person) -> None:
    c = me.install("crm", PEOPLE, on=False)
    with lacks("entities.resolve:person"):
        E.resolve(me.db, c, {"email": "zhangsan@acme.nl"})
    c = me.switch("crm", "entities.resolve:person", True)
    assert E.resolve(me.db, c, {"email": "zhangsan@acme.nl"}) is None
    with lacks("entities.write:person"):
        E.resolve(me.db, c, {"email": "zhangsan@acme.nl"}, create=True)
    c = me.switch("crm", "entities.write:person", True)
    made = E.resolve(
        me.db, c, {"email": " ZhangSan@Acme.NL", "name": "张三", "phone": "+31 6 1234 5678", "handle": "GitHub:@ZhangSan"},
        create=True,
    )  # fmt: skip
    assert made["created"] and made["displayName"] == "张三" and made["kind"] == "person"
    for by in (
        {"email": "zhangsan@acme.nl"},
        {"phone": "0031612345678"},
        {"handle": "github:zhangsan"},
        {"name": " 张三 "},
    ):
        assert E.resolve(me.db, c, by) == {**made, "created": False}
    with lacks("entities.resolve:org"):  # per kind
        E.resolve(me.db, c, {"email": "zhangsan@acme.nl"}, kind="org")
    assert E.add_identifier(me.db, c, made["ref"], "phone", "+31612345678") == {"status": "exists"}
    assert E.add_identifier(me.db, c, made["ref"], "email", "san@zhang.cn") == {"status": "added"}
    with lacks("entities.read:person"):
        E.get(me.db, c, made["ref"])
    c = me.switch("crm", "entities.read:person", True)
    got = E.get(me.db, c, made["ref"])
    assert {(i["kind"], i["value"]) for i in got["identifiers"]} >= {
        ("email", "san@zhang.cn"),
        ("handle", "GitHub:@ZhangSan"),
    }
    assert [e["ref"] for e in E.list_entities(me.db, c, "person", query="acme")] == [made["ref"]]
    other = E.resolve(me.db, c, {"email": "lisi@acme.nl"}, create=True)
    with pytest.raises(AlreadyExists):
        E.add_identifier(me.db, c, other["ref"], "email", "ZHANGSAN@acme.nl")


def test_resolve_is_one_statement(me: Person, count_queries) -> None:  # noqa: ANN001
    """``entities.resolve`` by one identifier (bench/facts.py): the entity and what the answer
    needs in one statement, no ORM object loaded."""
    c = me.install("crm", PEOPLE)
    made = E.resolve(me.db, c, {"email": "zhangsan@acme.nl", "name": "张三"}, create=True)
    me.db.expunge_all()  # nothing in the identity map to answer from
    with count_queries() as n:
        assert E.resolve(me.db, c, {"email": "ZhangSan@Acme.nl"}) == {**made, "created": False}
    assert n["n"] == 1
    with count_queries() as n:  # identifiers are tried in the order given, one statement each
        assert E.resolve(me.db, c, {"email": "nobody@acme.nl", "name": "张三"}) == {**made, "created": False}
    assert n["n"] == 2


def test_merge_keeps_old_refs_working(me: Person) -> None:
    c = me.install(
        "crm", PEOPLE + [f"facts.{a}:person:work.{p}" for a in ("read", "write") for p in ("company", "title")]
    )
    a = E.resolve(me.db, c, {"email": "zhangsan@acme.nl"}, create=True)
    b = E.resolve(me.db, c, {"phone": "+31 6 1234 5678", "name": "Zhang San"}, create=True)
    F.put(me.db, c, subject=b["ref"], predicate_hint="work.company", value="Acme")
    _, aid = c.read_ref(a["ref"], "e", "x")
    _, bid = c.read_ref(b["ref"], "e", "x")
    E.merge(me.db, me.user, aid, bid)
    assert E.get(me.db, c, b["ref"])["ref"] == a["ref"]  # the old ref means the survivor
    assert E.resolve(me.db, c, {"phone": "+31612345678"})["ref"] == a["ref"]
    assert [f["value"] for f in F.lookup(me.db, c, b["ref"], "work")] == ["Acme"]
    assert [f["value"] for f in F.lookup(me.db, c, a["ref"], "work")] == ["Acme"]
    F.put(me.db, c, subject=b["ref"], predicate_hint="work.title", value="CTO")
    assert [f["predicate"] for f in F.lookup(me.db, c, a["ref"])] == ["work.company", "work.title"]


def test_merge_leaves_one_current_value_per_cardinality_one_predicate_and_no_duplicates(me: Person) -> None:
    c = me.install(
        "crm",
        PEOPLE
        + [f"facts.{a}:person:{p}" for a in ("read", "write") for p in ("work.company", "work.title", "contact.email")],
    )
    a = E.resolve(me.db, c, {"email": "a@acme.nl"}, create=True)
    b = E.resolve(me.db, c, {"email": "b@acme.nl"}, create=True)
    _, aid = c.read_ref(a["ref"], "e", "x")
    _, bid = c.read_ref(b["ref"], "e", "x")
    F.user_put(me.db, me.user, predicate="work.company", value="Acme", subject_id=aid)  # user-said
    F.put(me.db, c, subject=b["ref"], predicate_hint="work.company", value="Globex")  # newer, app-said
    F.put(me.db, c, subject=a["ref"], predicate_hint="work.title", value="CTO")
    F.put(me.db, c, subject=b["ref"], predicate_hint="work.title", value="CEO")  # the newer one
    for ref in (a["ref"], b["ref"]):  # the same value on both: once after the merge
        F.put(me.db, c, subject=ref, predicate_hint="contact.email", value="zs@acme.nl")
    F.put(me.db, c, subject=b["ref"], predicate_hint="contact.email", value="other@acme.nl")
    E.merge(me.db, me.user, aid, bid)
    now = {}
    for f in F.lookup(me.db, c, a["ref"]):
        now.setdefault(f["predicate"], []).append(f["value"])
    assert {k: sorted(v) for k, v in now.items()} == {
        "work.company": ["Acme"],
        "work.title": ["CEO"],
        "contact.email": ["other@acme.nl", "zs@acme.nl"],
    }
    # nothing deleted: the values that gave way are history
    hist = F.user_facts(me.db, me.user, subject_id=aid, prefix="work", history=True)
    assert sorted((h["value"], h["valid_to"] is None) for h in hist) == [
        ("Acme", True), ("CEO", True), ("CTO", False), ("Globex", False)
    ]  # fmt: skip


def test_a_deleted_entity_ref_fails_with_no_entity(me: Person) -> None:
    c = me.install(
        "crm", PEOPLE + [f"facts.{a}:person:work.{p}" for a in ("read", "write") for p in ("company", "title")]
    )
    a = E.resolve(me.db, c, {"email": "zhangsan@acme.nl"}, create=True)
    F.put(me.db, c, subject=a["ref"], predicate_hint="work.company", value="Acme")
    _, aid = c.read_ref(a["ref"], "e", "x")
    E.delete(me.db, me.user, aid)
    for call in (
        lambda: E.get(me.db, c, a["ref"]),
        lambda: F.lookup(me.db, c, a["ref"]),
        lambda: F.put(me.db, c, subject=a["ref"], predicate_hint="work.company", value="X"),
        lambda: E.add_identifier(me.db, c, a["ref"], "name", "x"),
    ):
        with pytest.raises(NotFound, match="no entity"):
            call()
    assert E.resolve(me.db, c, {"email": "zhangsan@acme.nl"}) is None
    assert me.db.execute(text("SELECT count(*) FROM facts WHERE valid_to IS NULL")).scalar() == 0


def test_another_installations_ref_is_not_found(me: Person) -> None:
    c1 = me.install("one", PEOPLE)
    c2 = me.install("two", PEOPLE)
    a = E.resolve(me.db, c1, {"email": "zhangsan@acme.nl"}, create=True)
    assert E.resolve(me.db, c2, {"email": "zhangsan@acme.nl"})["ref"] != a["ref"]
    with pytest.raises(NotFound):
        E.get(me.db, c2, a["ref"])


# --- quotas --------------------------------------------------------------------------------------


def test_quota_counts_fact_writes_and_not_duplicates(me: Person) -> None:
    c = me.install("food", ["facts.read:self:pref.food.*", "facts.write:self:pref.food.*"])
    F.put(me.db, c, predicate_hint="pref.food.like", value="饺子")
    assert quotas.usage(me.db, c.installation_id)["writes"] == 1
    F.put(me.db, c, predicate_hint="pref.food.like", value="饺子")  # duplicate: free
    assert quotas.usage(me.db, c.installation_id)["writes"] == 1
    me.db.execute(
        text("UPDATE app_quota_usage SET writes = :w WHERE installation_id = :i"),
        {"w": quotas.WRITES_PER_DAY, "i": c.installation_id},
    )
    with pytest.raises(AppQuotaExceeded, match="quota"):
        F.put(me.db, c, predicate_hint="pref.food.like", value="面")
    # charged in the write's own statement: over the quota nothing was written, even unrolled-back
    # (scoped to this installation: other modules' committed pages and facts may say 面 too)
    mine = {"i": c.installation_id}
    facts_sql = "SELECT count(*) FROM facts WHERE installation_id = :i AND value = to_jsonb('面'::text)"
    changes_sql = "SELECT count(*) FROM changes WHERE app_installation_id = :i AND summary LIKE '%面%'"
    assert me.db.execute(text(facts_sql), mine).scalar() == 0
    assert me.db.execute(text(changes_sql), mine).scalar() == 0


def test_an_applied_put_is_one_statement(me: Person) -> None:
    """The hot write (bench/facts.py): one statement locks the subject, reads its current values,
    decides, charges the quota, expires, inserts the fact and its change row. A write it cannot
    decide alone (a user-said value: a conflict) takes the two-statement way."""
    from sqlalchemy import event

    c = me.install("loc", ["facts.read:self:location.home.*", "facts.write:self:location.home.*"])
    F.put(me.db, c, predicate_hint="location.home.city", value="Utrecht")  # the self entity exists now
    seen: list[str] = []

    me_thread = threading.get_ident()  # not a trailing Milvus flush's timer (tests/conftest.py count_queries)

    def count(conn, cursor, statement, *a) -> None:  # noqa: ANN001, ANN002
        if threading.get_ident() == me_thread:
            seen.append(statement)

    engine = me.db.get_bind()
    event.listen(engine, "before_cursor_execute", count)
    try:
        out = F.put(me.db, c, predicate_hint="location.home.city", value="Delft")  # cardinality one: expires
        assert out["status"] == "applied" and len(seen) == 1, seen
        assert F.put(me.db, c, predicate_hint="location.home.city", value="Delft")["status"] == "duplicate"
        assert len(seen) == 2, seen
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert [f["value"] for f in F.lookup(me.db, c)] == ["Delft"]
    assert quotas.usage(me.db, c.installation_id)["writes"] == 2
    F.user_put(me.db, me.user, predicate="location.home.city", value="Leiden")
    assert F.put(me.db, c, predicate_hint="location.home.city", value="Delft")["status"] == "conflict"
    assert [f["value"] for f in F.lookup(me.db, c)] == ["Leiden"]
    assert quotas.usage(me.db, c.installation_id)["writes"] == 3  # a conflict is charged


def test_a_many_put_reads_only_the_values_equal_to_it(me: Person) -> None:
    """A ``many`` predicate's other current values are not read by a put (the two-statement way's
    first statement returns the equal one only), so it costs the same with hundreds of them."""
    c = me.install("food", ["facts.read:self:pref.food.*", "facts.write:self:pref.food.*"])
    for dish in ("饺子", "面", "粥", "饼", "汤"):
        F.put(me.db, c, predicate_hint="pref.food.like", value=dish)
    _, kind, pred, current = F._prepare(me.db, c, "self", "pref.food.like", "包子", None)
    assert kind == "self" and pred is not None and pred.cardinality == "many" and current == []
    _, _, _, current = F._prepare(me.db, c, "self", "pref.food.like", "面", None)
    assert [(r.value, r.same) for r in current] == [("面", True)]
    _, _, _, current = F._prepare(me.db, c, "self", "location.home.city", "面", None)  # cardinality one: all
    assert current == []
    assert F.put(me.db, c, predicate_hint="pref.food.like", value="包子")["status"] == "applied"
    assert F.put(me.db, c, predicate_hint="pref.food.like", value="面")["status"] == "duplicate"
    assert len(F.lookup(me.db, c, "self", "pref.food.like")) == 6


def test_values_are_compared_as_json(me: Person) -> None:
    """Same value means equal as JSON: 1 and 1.0 are one number, key order does not matter, and
    true is not 1 (Python's ``True == 1`` must not make it a duplicate)."""
    c = me.install("food", ["facts.read:self:pref.food.*", "facts.write:self:pref.food.*"])
    put = lambda v: F.put(me.db, c, predicate_hint="pref.food.like", value=v)["status"]  # noqa: E731
    assert [put(1), put(1.0), put(True), put(False), put(0)] == [
        "applied",
        "duplicate",
        "applied",
        "applied",
        "applied",
    ]
    assert [put({"a": [1, 2], "b": None}), put({"b": None, "a": [1, 2]})] == ["applied", "duplicate"]
    say = lambda v: F.user_put(me.db, me.user, predicate="location.home.city", value=v)["status"]  # noqa: E731
    assert [say(1), say(True), say(True)] == ["applied", "applied", "duplicate"]
    assert [f["value"] for f in F.user_facts(me.db, me.user, prefix="location.home.city")] == [True]


# --- uninstall and revert --------------------------------------------------------------------------


def test_uninstall_counts_facts_and_delete_expires_them_revertibly(me: Person) -> None:
    from openkb.apps import registry

    c = me.install("food", ["facts.read:self:pref.food.*", "facts.write:self:pref.food.*"], [RATED])
    F.put(me.db, c, predicate_hint="pref.food.like", value="饺子")
    F.put(me.db, c, predicate_hint="pref.food.rated", value="红烧肉")
    inst = me.apps["food"][0]
    assert registry.contributions(me.db, inst)["facts"] == 2
    out = uninstall.uninstall(me.db, me.user, inst, "delete")
    assert out["deleted"]["facts"] == 2 and out["contributions"]["facts"] == 2
    assert F.user_facts(me.db, me.user, prefix="pref.food") == []
    assert V.get(me.db, me.tenant_id, "pref.food.rated") is not None  # the vocabulary keeps it
    uninstall.revert_uninstall(me.db, me.user, inst)
    assert sorted(f["value"] for f in F.user_facts(me.db, me.user, prefix="pref.food")) == ["红烧肉", "饺子"]


def test_an_apps_run_of_fact_writes_reverts_as_a_whole(me: Person) -> None:
    c = me.install("loc", ["facts.read:self:location.home.*", "facts.write:self:location.home.*"])
    F.put(me.db, c, predicate_hint="location.home.city", value="Utrecht", run_id="first")
    F.put(me.db, c, predicate_hint="location.home.city", value="Delft", run_id="nightly")
    F.put(me.db, c, predicate_hint="location.home.address", value="Markt 1", run_id="nightly")
    out = C.changes_revert(me.db, me.caller("loc"), run_id="nightly")
    assert len(out["reverted"]) == 2
    # Delft expires and Utrecht (expired by it) is current again; the address is gone
    assert [(f["predicate"], f["value"]) for f in F.lookup(me.db, c)] == [("location.home.city", "Utrecht")]


def test_reverting_a_fact_write_needs_facts_write_as_it_is_now(me: Person) -> None:
    c = me.install("recipes", RECIPES)
    F.put(me.db, c, predicate_hint="pref.food.like", value="饺子", run_id="nightly")
    c = me.switch("recipes", "facts.write:self:pref.food.*", False)
    with lacks("facts.write:self:pref.food.*"):
        C.changes_revert(me.db, c, run_id="nightly")
    [ch] = C.changes_list(me.db, c)
    with lacks("facts.write:self:pref.food.*"):
        C.changes_revert(me.db, c, ref=ch["ref"])
    assert [f["value"] for f in F.lookup(me.db, c, "self", "pref.food")] == ["饺子"]  # still current
    c = me.switch("recipes", "facts.write:self:pref.food.*", True)
    assert len(C.changes_revert(me.db, c, run_id="nightly")["reverted"]) == 1
    assert F.lookup(me.db, c, "self", "pref.food") == []


def test_the_app_lists_its_conflicts(me: Person) -> None:
    F.user_put(me.db, me.user, predicate="location.home.city", value="Utrecht")
    c = me.install("loc", ["facts.read:self:location.home.*", "facts.write:self:location.home.*"])
    assert F.put(me.db, c, predicate_hint="location.home.city", value="Delft")["status"] == "conflict"
    assert F.put(me.db, c, predicate_hint="location.home.address", value="Markt 1")["status"] == "applied"
    got = C.changes_list(me.db, c, status="conflict")
    assert [(x["op"], x["status"], x["own"]) for x in got] == [("fact.put", "conflict", True)]
    assert got[0]["proposed"] == "Delft"  # the value that was refused
    assert {x["proposed"] for x in C.changes_list(me.db, c, status="applied")} == {None}


def test_the_users_page_lists_what_an_app_covers_with_current_values(me: Person) -> None:
    F.user_put(me.db, me.user, predicate="pref.food.dislike", value="香菜")
    F.user_put(me.db, me.user, predicate="location.home.city", value="Utrecht")
    c = me.install("recipes", RECIPES, [RATED], on=False)
    items = {i["predicate"]: i for i in F.installation_facts(me.db, me.user, c.installation_id)}
    assert "location.home.city" not in items  # not covered by its strings
    assert set(items) == {
        "pref.food.like",
        "pref.food.dislike",
        "pref.food.diet",
        "pref.food.cuisine",
        "pref.food.rated",
    }
    assert items["pref.food.dislike"]["names"]["zh-CN"] == "不喜欢的食物"
    assert [v["value"] for v in items["pref.food.dislike"]["values"]] == ["香菜"]
    rated = items["pref.food.rated"]
    assert rated["added_by_this_app"] and rated["description"].startswith("你打过高分的菜") and rated["writes"]


def test_the_one_statement_change_row_is_the_row_record_change_writes(me: Person) -> None:
    from openkb.apps.knowledge import actor_for
    from openkb.content.changes import record_change
    from openkb.models import Change

    c = me.install("food", ["facts.read:self:pref.food.*", "facts.write:self:pref.food.*"])
    out = F.put(me.db, c, predicate_hint="pref.food.like", value={"dish": "饺子"}, run_id="r1")
    _, fid = c.read_ref(out["ref"], "a", "fact")
    fast = me.db.exec(select(Change).where(Change.object_id == fid)).one()
    sid = E.self_entity(me.db, me.tenant_id, me.user.user_id)
    slow = record_change(
        me.db, actor_for(c, "r1"), op="fact.put", object_type="fact", object_id=fid, summary=fast.summary, scope={},
        after={"predicate": "pref.food.like", "value": {"dish": "饺子"}, "subject_id": sid, "made_current": [fid],
               "expired": []},
    )  # fmt: skip
    cols = [k for k in Change.model_fields if k not in ("id", "created_at")]
    assert {k: getattr(fast, k) for k in cols} == {k: getattr(slow, k) for k in cols}
    assert fast.created_at < slow.created_at  # one strictly increasing clock per session


def test_a_fact_can_point_at_another_entity(me: Person) -> None:
    c = me.install(
        "crm", PEOPLE + [f"facts.{a}:self:relation.{p}" for a in ("read", "write") for p in ("colleague", "friend")]
    )  # relation.* alone is one level: refused
    zs = E.resolve(me.db, c, {"email": "zhangsan@acme.nl", "name": "张三"}, create=True)
    out = F.put(me.db, c, predicate_hint="relation.colleague", object_ref=zs["ref"])
    assert out["status"] == "applied"
    assert F.put(me.db, c, predicate_hint="同事", object_ref=zs["ref"])["status"] == "duplicate"  # by its name
    [f] = F.lookup(me.db, c, "self", "relation")
    assert f["object"] == zs["ref"] and f["value"] is None
    _, zid = c.read_ref(zs["ref"], "e", "x")
    E.delete(me.db, me.user, zid)  # the fact about a deleted person expires with it
    assert F.lookup(me.db, c, "self", "relation") == []
    with pytest.raises(NotFound, match="no entity"):
        F.put(me.db, c, predicate_hint="relation.friend", object_ref=zs["ref"])


def test_deleting_an_entity_reverts_by_change_and_by_run(me: Person) -> None:
    from openkb.content import revert as R
    from openkb.content.actor import Actor
    from openkb.models import Change

    c = me.install(
        "crm",
        PEOPLE + [f"facts.{a}:person:work.company" for a in ("read", "write")]
        + [f"facts.{a}:self:relation.colleague" for a in ("read", "write")],
    )  # fmt: skip
    zs = E.resolve(me.db, c, {"email": "ZhangSan@acme.nl", "name": "张三"}, create=True)
    F.put(me.db, c, subject=zs["ref"], predicate_hint="work.company", value="Acme")
    F.put(me.db, c, predicate_hint="relation.colleague", object_ref=zs["ref"])
    _, zid = c.read_ref(zs["ref"], "e", "x")

    def whole() -> tuple:
        got = E.get(me.db, c, zs["ref"])
        return (
            sorted(i["value"] for i in got["identifiers"]),
            [f["value"] for f in F.lookup(me.db, c, zs["ref"])],
            [f["object"] for f in F.lookup(me.db, c, "self", "relation")],
        )

    assert whole() == (["ZhangSan@acme.nl", "张三"], ["Acme"], [zs["ref"]])
    E.delete(me.db, me.user, zid)
    gone = me.db.exec(select(Change).where(Change.object_id == zid, Change.op == "entity.delete")).one()
    assert len(gone.after_state["expired"]) == 2  # both facts' expiries are in the change
    with pytest.raises(NotFound, match="no entity"):
        whole()
    R.revert(me.db, Actor.of(me.user), change_id=gone.id)  # by change: whole again
    assert whole() == (["ZhangSan@acme.nl", "张三"], ["Acme"], [zs["ref"]])
    assert E.resolve(me.db, c, {"email": "zhangsan@acme.nl"})["ref"] == zs["ref"]
    back = me.db.exec(select(Change).where(Change.object_id == zid, Change.op == "entity.restore")).one()
    R.revert(me.db, Actor.of(me.user), run_id=back.run_id)  # reverting the revert (by run) deletes it again
    with pytest.raises(NotFound, match="no entity"):
        whole()
    assert F.lookup(me.db, c, "self", "relation") == []
    again = me.db.exec(
        select(Change).where(Change.object_id == zid, Change.op == "entity.delete", Change.status == "applied")
    ).one()
    R.revert(me.db, Actor.of(me.user), run_id=again.run_id)
    assert whole() == (["ZhangSan@acme.nl", "张三"], ["Acme"], [zs["ref"]])


def test_a_suspended_or_removed_users_app_credential_reads_and_writes_nothing(me: Person) -> None:
    """An app acts as its user: once the user is suspended, or no longer a member of the tenant,
    its credential is refused (401) for facts and entities as for documents."""
    me.install("recipes", RECIPES + PEOPLE)
    F.put(me.db, me.caller("recipes"), predicate_hint="pref.food.like", value="饺子")
    assert me.user.user_id is not None
    admin.suspend(me.db, Principal.system(), me.user.user_id)
    with pytest.raises(Unauthenticated):
        me.caller("recipes")
    admin.activate(me.db, Principal.system(), me.user.user_id)
    assert [f["value"] for f in F.lookup(me.db, me.caller("recipes"), "self", "pref.food")] == ["饺子"]
    membership = me.db.exec(
        select(TenantMembership).where(
            TenantMembership.tenant_id == me.tenant_id, TenantMembership.user_id == me.user.user_id
        )
    ).one()
    me.db.delete(membership)
    me.db.flush()
    with pytest.raises(Unauthenticated):
        me.caller("recipes")


@pytest.mark.parametrize("name", ["pref.food.like\n", "pref.food\n.like", "pref\n.food.like"])
def test_a_predicate_with_a_line_break_is_no_predicate(me: Person, name: str) -> None:
    assert not V.is_predicate(name)
    with pytest.raises(ValidationError) as err:
        F.user_put(me.db, me.user, predicate=name, value="饺子")
    assert err.value.extra.get("field") == "predicate"


@pytest.mark.parametrize("perm", ["facts.read:self:pref.food\n.*", "facts.read:person\n:pref.food.*"])
def test_a_permission_string_with_a_line_break_inside_is_refused(me: Person, perm: str) -> None:
    with pytest.raises(InvalidPermissionString):
        registry.register_app(me.db, me.user, name="nl", permissions=[perm])


def test_reverting_a_retraction_does_not_make_a_value_current_twice(me: Person) -> None:
    c = me.install("recipes", RECIPES)
    first = F.put(me.db, c, predicate_hint="pref.food.like", value="饺子")
    F.retract(me.db, c, first["ref"], run_id="oops")
    assert F.put(me.db, c, predicate_hint="pref.food.like", value="饺子")["status"] == "applied"
    C.changes_revert(me.db, me.caller("recipes"), run_id="oops")
    assert [f["value"] for f in F.lookup(me.db, c, "self", "pref.food")] == ["饺子"]
