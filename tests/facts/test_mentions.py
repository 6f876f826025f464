"""Mentions (docs/facts.md#mentions): chunks of the user's personal documents that name one of
their entities are recorded when indexing writes the chunks (CJK-aware), and
``search(entities=[ref])`` keeps only those passages. Rolled-back ``db``; the chunking step of
indexing runs directly (no Milvus: an empty query lists passages newest first)."""

from __future__ import annotations

import re
import uuid

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlmodel import select

from openkb.apps import knowledge as K
from openkb.errors import NotFound
from openkb.facts import entities as E
from openkb.facts import search as S
from openkb.facts.mentions import fold, matcher
from openkb.indexing.service import ensure_chunks, load_docs
from tests.facts.conftest import Person

PERMS = ["collections.read:diary", "collections.write:diary", "entities.write:person", "entities.read:person"]


def _write_and_chunk(me: Person, key: str, body: str) -> uuid.UUID:
    out = K.documents_upsert(me.db, me.caller("diary-app"), collection="diary", key=key, title=key, body=body)
    _, doc_id = me.caller("diary-app").read_ref(out["ref"], "d", "document")
    ensure_chunks(me.db, load_docs(me.db, [str(doc_id)]).values())  # what the index job does first
    return doc_id


def _texts(me: Person, refs: list[str]) -> list[str]:
    return [x["text"] for x in S.search(None, me.db, me.caller("diary-app"), "", entities=refs)]  # type: ignore[arg-type]


def test_matcher_is_cjk_aware() -> None:
    zs, alice, ann, phone = (uuid.uuid4() for _ in range(4))
    m = matcher([(zs, "name", "张三"), (alice, "name", "alice"), (alice, "email", "alice@acme.nl"),
                 (ann, "name", "ann"), (phone, "phone", "+31612345678")])  # fmt: skip
    assert m.find("今天和张三吃饭") == {zs}  # no spaces in Chinese: a substring
    assert m.find("和Alice吃饭") == {alice}  # a CJK neighbour is a boundary for a Latin name
    assert m.find("Annual report, malice") == set()  # Latin names need word boundaries
    assert m.find("mail ALICE@acme.nl.") == {alice}
    assert m.find("call +31 6 1234 5678 now") == {phone}
    assert m.find("张 三") == set()


def _flat_reading(rows: list[tuple[uuid.UUID, str, str]], text: str) -> set[uuid.UUID]:
    """The word rule read plainly: every Latin term tried at each position, longest first, on
    word boundaries (what the matcher compiled before its terms became a trie)."""
    words = matcher(rows).words
    if not words:
        return set()
    alts = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    w = "0-9a-z_\u00c0-\u024f"
    pattern = re.compile(rf"(?<![{w}@.\-])({alts})(?![{w}\-]|\.[{w}])")
    found: set[uuid.UUID] = set()
    for m in pattern.finditer(fold(text)):
        found |= words[m.group(1)]
    return found


_TERM = st.text(alphabet="abc.-@_ é1", min_size=1, max_size=7).map(str.strip).filter(bool)


@settings(max_examples=300, deadline=None)
@given(
    terms=st.lists(
        st.tuples(st.sampled_from(["name", "email", "domain", "url", "handle"]), _TERM), min_size=1, max_size=12
    ),
    text=st.text(alphabet="abcABC.-@_ é1\n", max_size=60),
)
@example(terms=[("name", "abc"), ("name", "abc d")], text="abc d")
@example(terms=[("name", "ab1"), ("email", "ab1@c")], text="x ab1@c")
def test_the_term_trie_finds_what_the_flat_alternation_finds(terms, text) -> None:
    rows = [(uuid.UUID(int=k), kind, "x:" + v if kind == "handle" else v) for k, (kind, v) in enumerate(terms)]
    assert matcher(rows).find(text) == _flat_reading(rows, text)


def test_terms_that_share_a_prefix_are_written_once() -> None:
    """10,000 names were one alternation the regex engine tried one by one at each position
    (27 ms per 3 KB chunk); as a trie, a prefix the terms share is written, and read, once."""
    rows = [(uuid.uuid4(), "name", f"acme team {i}") for i in range(2_000)]
    m = matcher(rows)
    assert m.pattern is not None and m.pattern.pattern.count("acme") == 1
    assert m.find("ask ACME Team 1234 and acme team 7.") == {rows[1234][0], rows[7][0]}
    acme = uuid.uuid4()
    assert matcher([*rows, (acme, "name", "acme")]).find("acme team 7, acme") == {rows[7][0], acme}  # longest first
    # a chain too deep for one pattern (each term one letter longer) falls back to the plain list
    chain = [(uuid.uuid4(), "name", "a" * k) for k in range(3, 1_500)]
    assert matcher(chain).find("x " + "a" * 40 + " y") == {chain[37][0]}


def test_search_by_entity_returns_only_passages_mentioning_it(me: Person) -> None:
    me.install("diary-app", PERMS)
    zs = E.resolve(me.db, me.caller("diary-app"), {"name": "张三", "email": "zhangsan@acme.nl"}, create=True)
    li = E.resolve(me.db, me.caller("diary-app"), {"name": "李四"}, create=True)
    _write_and_chunk(me, "2026-09-28", "# 周日\n\n一个人在家看书。")
    _write_and_chunk(me, "2026-09-29", "# 周一\n\n今天和张三吃了番茄牛腩。")
    _write_and_chunk(me, "2026-09-30", "# 周二\n\n李四发来邮件,抄送 zhangsan@acme.nl。")
    got = _texts(me, [zs["ref"]])  # newest first; the email identifier counts too
    assert len(got) == 2 and "zhangsan@acme.nl" in got[0] and "今天和张三" in got[1], got
    assert [("李四" in t) for t in _texts(me, [li["ref"]])] == [True]
    assert len(_texts(me, [zs["ref"], li["ref"]])) == 2


def test_a_new_entity_finds_what_was_indexed_before_and_merge_and_delete_keep_it_right(me: Person) -> None:
    me.install("diary-app", PERMS)
    _write_and_chunk(me, "2026-10-01", "# 周三\n\n和王五开会。")
    c = me.caller("diary-app")
    ww = E.resolve(me.db, c, {"name": "王五"}, create=True)  # created after indexing
    assert len(_texts(me, [ww["ref"]])) == 1
    other = E.resolve(me.db, c, {"email": "wangwu@acme.nl"}, create=True)
    _, keep = c.read_ref(other["ref"], "e", "x")
    _, gone = c.read_ref(ww["ref"], "e", "x")
    E.merge(me.db, me.user, keep, gone)
    assert len(_texts(me, [ww["ref"]])) == 1 and len(_texts(me, [other["ref"]])) == 1  # old ref: the survivor
    E.delete(me.db, me.user, keep)
    assert me.db.execute(text("SELECT count(*) FROM entity_mentions")).scalar() == 0
    with pytest.raises(NotFound, match="no entity"):
        _texts(me, [other["ref"]])
    from openkb.content import revert
    from openkb.content.actor import Actor
    from openkb.models import Change

    cid = me.db.execute(select(Change.id).where(Change.object_id == keep, Change.op == "entity.delete")).scalar_one()
    revert.revert(me.db, Actor.of(me.user), change_id=cid)  # undone: its mentions are found again
    assert len(_texts(me, [other["ref"]])) == 1


def test_out_of_reach_passages_are_left_out(me: Person) -> None:
    me.install("diary-app", PERMS)
    zs = E.resolve(me.db, me.caller("diary-app"), {"name": "张三"}, create=True)
    _write_and_chunk(me, "2026-10-02", "张三来了。")
    c = me.switch("diary-app", "collections.read:diary", False)
    assert S.search(None, me.db, c, "", entities=[zs["ref"]]) == []  # type: ignore[arg-type]


def test_team_pages_the_user_reads_and_the_app_reaches_are_matched_too(me: Person) -> None:
    from openkb.apps import registry
    from openkb.models import Tenant, User
    from tests.factories import add_member, make_doc, make_kb, make_user, make_workspace

    tenant, user = me.db.get(Tenant, me.tenant_id), me.db.get(User, me.user.user_id)
    boss = make_user(me.db, tenant)
    ws = make_workspace(me.db, tenant, boss)
    add_member(me.db, ws, user, "member")
    team, elsewhere = make_kb(me.db, ws, boss), make_kb(me.db, ws, boss)
    c = me.install("team-app", ["collections.read:user-selected", "entities.write:person", "entities.read:person"])
    registry.set_selected_collections(me.db, me.user, me.apps["team-app"][0], [{"knowledge_base_id": team.id}])
    c = me.caller("team-app")
    zs = E.resolve(me.db, c, {"name": "张三"}, create=True)
    pages = [
        make_doc(me.db, team, boss, title="read", markdown="今天和张三开会。"),
        make_doc(me.db, team, boss, title="later", markdown="李四也来了。"),
        make_doc(me.db, team, boss, title="hidden", markdown="张三的工资。", permission_mode="custom", visibility="private"),
        make_doc(me.db, elsewhere, boss, title="unreached", markdown="张三在别处。"),
    ]  # fmt: skip
    ensure_chunks(me.db, load_docs(me.db, [str(p.id) for p in pages]).values())
    li = E.resolve(me.db, c, {"name": "李四"}, create=True)  # created after indexing: found too
    assert _texts_of(me, c, [zs["ref"]]) == ["今天和张三开会。"]
    assert _texts_of(me, c, [li["ref"]]) == ["李四也来了。"]
    # the permission service decided: nothing is recorded for the page the user may not read
    hidden = me.db.execute(text("SELECT count(*) FROM entity_mentions WHERE document_id = :d"), {"d": pages[2].id})
    assert hidden.scalar() == 0
    # a knowledge base selected after its pages were indexed: they are matched then
    both = [{"knowledge_base_id": team.id}, {"knowledge_base_id": elsewhere.id}]
    registry.set_selected_collections(me.db, me.user, me.apps["team-app"][0], both)
    assert sorted(_texts_of(me, me.caller("team-app"), [zs["ref"]])) == ["今天和张三开会。", "张三在别处。"]


def _texts_of(me: Person, c, refs: list[str]) -> list[str]:  # noqa: ANN001
    return [x["text"].strip() for x in S.search(None, me.db, c, "", entities=refs)]  # type: ignore[arg-type]


def test_search_by_entity_takes_the_epoch_as_a_bound(me: Person) -> None:
    """``timeRange {to: 0}`` ends at the epoch: nothing written since is found."""
    me.install("diary-app", PERMS)
    zs = E.resolve(me.db, me.caller("diary-app"), {"name": "张三"}, create=True)
    _write_and_chunk(me, "2026-09-29", "# 周一\n\n今天和张三吃了番茄牛腩。")
    c = me.caller("diary-app")
    assert len(S.search(None, me.db, c, "", entities=[zs["ref"]], time_from=0)) == 1  # type: ignore[arg-type]
    assert S.search(None, me.db, c, "", entities=[zs["ref"]], time_to=0) == []  # type: ignore[arg-type]
