"""The permission-string parser against every example and refusal of docs/apps.md#permission-strings."""

from __future__ import annotations

import pytest

from openkb.apps.strings import parse, parse_set, sentence, sentences
from openkb.errors import InvalidPermissionString

ACCEPTED = [
    "facts.read:self:pref.food.*",
    "facts.write:self:pref.food.*",
    "facts.read:self:location.home.*",
    "facts.read:self:location.home.city",
    "facts.read:person:relation.colleague",
    "facts.read:person:contact.email",
    "entities.resolve:person",
    "entities.resolve:org",
    "entities.read:person",
    "entities.write:person",
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
]


@pytest.mark.parametrize("s", ACCEPTED)
def test_accepted_strings_round_trip(s: str) -> None:
    assert str(parse(s)) == s


REFUSED = {
    "facts.read:self:*": "two levels",
    "facts.read:self:location.*": "two levels",
    "facts.read:self:location": "two levels",
    "facts.read:self:pref.*": "two levels",
    "facts.read:person:relation.*": "two levels",
    "facts.read:self:weather.today.*": "first predicate level",
    "facts.read:self:Pref.Food.*": "lower-case",
    "facts.read:pref.food.*": "expected facts",
    "facts.delete:self:pref.food.*": "facts actions",
    "email.read": "unknown type",
    "email": "type.action",
    "calendar.read:self": "unknown type",
    "collections.read:everything": "target",
    "collections.read": "target",
    "collections.delete:diary": "unknown action",
    "collections.create:diary": "takes no scope",
    "changes.manage:all": "takes no scope",
    "entities.read": "entities.<action>:<kind>",
    "entities.merge:person": "entities actions",
    "": "empty",
}


@pytest.mark.parametrize(("s", "why"), sorted(REFUSED.items()))
def test_refused_strings_say_why(s: str, why: str) -> None:
    with pytest.raises(InvalidPermissionString) as e:
        parse(s)
    assert why in e.value.detail
    assert e.value.code == "INVALID_PERMISSION_STRING"


def test_facts_write_must_be_covered_by_a_read() -> None:
    # the recipe example of the manifest: write covered by the read of the same prefix
    ok = parse_set(["facts.read:self:pref.food.*", "facts.write:self:pref.food.*", "collections.create"])
    assert [str(p) for p in ok] == ["facts.read:self:pref.food.*", "facts.write:self:pref.food.*", "collections.create"]
    # a narrower write under a wider read is covered; a full predicate under its group too
    parse_set(["facts.read:self:pref.food.*", "facts.write:self:pref.food.like"])
    for bad in (
        ["facts.write:self:pref.food.*"],
        ["facts.read:self:pref.food.like", "facts.write:self:pref.food.*"],
        ["facts.read:person:pref.food.*", "facts.write:self:pref.food.*"],
        ["facts.read:self:pref.foods.*", "facts.write:self:pref.food.x"],
    ):
        with pytest.raises(InvalidPermissionString) as e:
            parse_set(bad)
        assert "covered by a facts.read" in e.value.detail


def test_set_reports_every_issue_and_drops_duplicates() -> None:
    with pytest.raises(InvalidPermissionString) as e:
        parse_set(["email.read", "facts.read:self:*", "collections.read:diary"])
    assert [i["permission"] for i in e.value.extra["issues"]] == ["email.read", "facts.read:self:*"]
    assert len(parse_set(["changes.manage", "changes.manage"])) == 1


def test_prefix_cover_is_by_whole_segments() -> None:
    p = parse("facts.read:self:pref.food.*")
    assert p.covers_predicate("pref.food.like")
    assert p.covers_predicate("pref.food.rated")
    assert not p.covers_predicate("pref.foods.like")
    assert not p.covers_predicate("pref.food")
    assert parse("facts.read:self:location.home.city").covers_predicate("location.home.city")


SEED_SENTENCES = {
    "facts.read:self:location.home.*": "读取你的居住地",
    "facts.write:self:pref.food.*": "记录你的饮食偏好",
    "entities.resolve:person": "根据邮箱等查询联系人的名字",
    "entities.read:person": "查看你的联系人列表",
    "entities.write:person": "新增和编辑联系人",
    "collections.read:diary": "读取你的日记",
    "collections.create": "创建自己的知识库",
    "changes.manage": "查看和撤销所有应用写入的知识",
    "origin.override": "代表其他应用写入数据",
}


@pytest.mark.parametrize(("s", "zh"), sorted(SEED_SENTENCES.items()))
def test_seed_sentences_in_chinese(s: str, zh: str) -> None:
    assert sentence(s, "zh-CN") == zh


def test_every_accepted_string_has_two_distinct_sentences() -> None:
    seen = set()
    for s in ACCEPTED:
        both = sentences(s)
        assert both["zh-CN"] and both["en"] and both["zh-CN"] != both["en"], s
        seen.add(both["en"])
    assert len(seen) == len(ACCEPTED)  # no two strings read the same to the user
    assert sentence("facts.read:self:location.home.*", "en") == "Read your home location"
    assert sentence("collections.write:user-selected", "en") == "Write to the collections you choose"


def test_entities_write_includes_resolve() -> None:
    import uuid

    from openkb.apps.registry import AppCaller
    from openkb.permissions import Principal

    uid = uuid.uuid4()
    c = AppCaller(
        uid,
        uid,
        uid,
        uid,
        "x",
        Principal.user(uid, uid),
        frozenset({"entities.write:person"}),
        (),
        (),
        None,
        None,
        (),
        "s",
    )
    assert c.has("entities.resolve:person") and c.has("entities.write:person")
    assert not c.has("entities.resolve:org") and not c.has("entities.read:person")
