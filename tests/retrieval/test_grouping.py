"""Grouped search (docs/retrieval.md#grouped-results): one result per document with more of its
chunks as snippets, highlighted terms, and the permission final check kept: a hidden document
never forms a group and no chunk of one document joins another's group."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlmodel import Session, select

from openkb.db import session_scope
from openkb.indexing import service
from openkb.models import DocumentChunk
from openkb.permissions import Principal
from openkb.retrieval import forget_active_profile, search, search_documents
from openkb.retrieval.highlight import highlight_spans
from tests.factories import make_doc, make_kb, make_personas


def _long_doc(word: str, sections: int) -> str:
    filler = " ".join(f"lorem{i} ipsum dolor sit amet" for i in range(50))
    return "\n\n".join(f"## Part {i}\n\nThe {word} appears in part {i}. {filler}" for i in range(sections)) + "\n"


@pytest.fixture(scope="module")
def world(app_ctx, engine):
    with session_scope(app_ctx.engine) as s:
        service.ensure_default_profile(app_ctx, s)
    forget_active_profile()
    word = f"quillwort{uuid.uuid4().hex[:6]}"
    with session_scope(engine) as s:
        p = make_personas(s)
        kb = make_kb(s, p.workspace, p.owner, visibility="workspace")
        a = make_doc(s, kb, p.owner, title="Alpha", markdown=_long_doc(word, 4))
        b = make_doc(s, kb, p.owner, title="Beta", markdown=_long_doc(word, 2))
        hidden = make_doc(
            s, kb, p.owner, title="Hidden", permission_mode="custom", visibility="private", markdown=_long_doc(word, 4)
        )
        service.sync_documents(app_ctx, s, [a.id, b.id, hidden.id])
        chunks = {
            str(c.id): str(c.document_id)
            for c in s.exec(select(DocumentChunk).where(DocumentChunk.document_id.in_([a.id, b.id, hidden.id]))).all()
        }  # type: ignore[attr-defined]
        ids = {"a": str(a.id), "b": str(b.id), "hidden": str(hidden.id)}
        member, owner, tenant = p.member.id, p.owner.id, p.tenant.id
    assert sum(1 for d in chunks.values() if d == ids["a"]) >= 3  # the fixture really has several chunks
    return {
        "word": word,
        "ids": ids,
        "chunks": chunks,
        "member": Principal.user(member, tenant),
        "owner": Principal.user(owner, tenant),
    }


def _grouped(app_ctx, engine, who, q, **kw):
    with Session(engine) as s:
        return search_documents(app_ctx, s, who, q, **kw)


def test_one_result_per_document_with_its_own_snippets(world, app_ctx, engine):
    got = _grouped(app_ctx, engine, world["member"], world["word"], top_k=10, snippets=3)
    docs = [r.document_id for r in got]
    assert set(docs) == {world["ids"]["a"], world["ids"]["b"]} and len(docs) == len(set(docs))
    alpha = next(r for r in got if r.document_id == world["ids"]["a"])
    assert 1 <= len(alpha.snippets) <= 3
    for r in got:
        assert world["chunks"][r.chunk_id] == r.document_id
        for sn in r.snippets:  # every snippet is a chunk of the group's own document
            assert world["chunks"][sn["chunk_id"]] == r.document_id
            assert 0.0 <= sn["score"] <= r.score <= 1.0


def test_hidden_document_never_forms_a_group_or_lends_a_snippet(world, app_ctx, engine):
    member = _grouped(app_ctx, engine, world["member"], world["word"], top_k=10, snippets=5)
    hidden_chunks = {c for c, d in world["chunks"].items() if d == world["ids"]["hidden"]}
    assert world["ids"]["hidden"] not in {r.document_id for r in member}
    assert not hidden_chunks & {sn["chunk_id"] for r in member for sn in r.snippets}
    assert not hidden_chunks & {r.chunk_id for r in member}
    # its owner does see it, as its own group
    owner = _grouped(app_ctx, engine, world["owner"], world["word"], top_k=10, snippets=5)
    assert world["ids"]["hidden"] in {r.document_id for r in owner}


def test_top_k_counts_documents(world, app_ctx, engine):
    got = _grouped(app_ctx, engine, world["owner"], world["word"], top_k=2, snippets=0)
    assert len(got) == 2 and all(r.snippets == [] for r in got)


def test_highlights_mark_the_query_words(world, app_ctx, engine):
    with Session(engine) as s:
        got = search(app_ctx, s, world["member"], f"{world['word']} parts", top_k=3)
    assert got
    for r in got:
        marked = [r.content[a:b].lower() for a, b in r.highlights]
        assert world["word"] in marked and "part" in marked


@pytest.mark.parametrize(
    ("query", "text", "want"),
    [
        ("database backups", "Nightly Backup of the DATABASE.", ["Backup", "DATABASE"]),
        ("咖啡机 清洗", "咖啡机每天早上九点清洗，咖啡机很好", ["咖啡机", "清洗", "咖啡机"]),
        (
            "用 kubernetes 部署",
            "我们用Kubernetes部署服务",
            ["用", "Kubernetes", "部署"],
        ),  # a one-character query word counts
        ("the of and", "the cat of the house and more", []),
        ("cat", "concatenate cats", ["cats"]),
    ],
)
def test_highlight_spans(query, text, want):
    assert [text[a:b] for a, b in highlight_spans(query, text)] == want


_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_MIXED = st.lists(
    st.sampled_from(list("runindexabcXYZé _-.,\n0123") + list("量子检索データ") + ["run", "Index", "索引"]), max_size=60
).map("".join)


@settings(max_examples=400, deadline=None)
@given(
    text=_MIXED,
    words=st.lists(st.sampled_from(["run", "index", "abc", "é", "量子", "检索", "データ", "re"]), max_size=4),
)
def test_highlight_spans_match_words_where_they_start(text, words):
    """The Latin words of a query match where a word starts (after anything but a letter or digit of
    a Latin-script word: CJK counts as a start) and run to the word's end; spans are those of the
    plain definition, a look-behind regex, which highlight_spans avoids for speed."""
    import re

    from openkb.retrieval.highlight import query_terms

    query = " ".join(words)
    latin, cjk = query_terms(query.strip())
    want: list[tuple[int, int]] = []
    if latin:
        alts = "|".join(re.escape(w) for w in sorted(latin, key=len, reverse=True))
        plain = re.compile(rf"(?<![^\W{_CJK}])(?:{alts})[^\W{_CJK}]*", re.IGNORECASE)
        want += [m.span() for m in plain.finditer(text)]
    for w in cjk:
        want += [(m.start(), m.start() + len(w)) for m in re.finditer(re.escape(w), text)]
    merged: list[list[int]] = []
    for s, e in sorted(want):
        if merged and s < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    assert highlight_spans(query, text) == merged


@pytest.mark.parametrize("broken", ["\ud83d", "\x00", "\udc00\ud83d"], ids=["high surrogate", "nul", "reversed pair"])
def test_a_query_with_half_an_emoji_or_a_nul_still_searches_every_route(app_ctx, engine, world, broken):
    """A client that cuts a query by length can split an emoji in two (Dify caps queries), and a
    NUL can come in JSON: the rest of the query is searched by both routes, nothing is reported
    degraded (the embedder and the analyzer never see the broken character)."""
    degraded: list[str] = []
    with Session(engine) as s:
        hits = search_documents(app_ctx, s, world["owner"], f"{world['word']} {broken}", top_k=5, degraded=degraded)
    assert world["ids"]["a"] in {h.document_id for h in hits}
    assert degraded == []


def test_a_page_shared_on_its_own_names_no_folder_or_knowledge_base_the_reader_cannot_open(app_ctx, engine):
    """A page shared with someone from a private knowledge base, inside a folder they cannot
    read: their search finds it but names neither the folder nor the knowledge base (they get 404
    on both, and the page's own breadcrumb leaves the folder out); a folder shared with them is
    named; the owner sees everything."""
    from tests.factories import grant

    word = f"ostracod{uuid.uuid4().hex[:6]}"
    with session_scope(engine) as s:
        p = make_personas(s)
        kb = make_kb(s, p.workspace, p.owner, visibility="private", title="Layoffs 2027")
        # not a gate (inherit): only the knowledge base's collaborators read it, the page below
        # is readable on its own (docs/permissions.md#the-folder-gate-rule)
        folder = make_doc(s, kb, p.owner, type="folder", title="Candidates")
        open_folder = make_doc(s, kb, p.owner, type="folder", title="Open notes", permission_mode="custom")
        page = make_doc(
            s, kb, p.owner, parent=folder, title="Shared plan", permission_mode="custom", markdown=f"The {word} plan.\n"
        )
        other = make_doc(s, kb, p.owner, parent=open_folder, title="Other", markdown=f"Another {word} page.\n")
        grant(s, "document", page.id, p.member, "viewer", tenant_id=p.tenant.id)
        grant(s, "document", open_folder.id, p.member, "viewer", tenant_id=p.tenant.id)
        service.sync_documents(app_ctx, s, [page.id, other.id])
        member, owner, tenant = p.member.id, p.owner.id, p.tenant.id
        ids = {"page": str(page.id), "other": str(other.id)}
    with Session(engine) as s:
        mine = {h.document_id: h for h in search_documents(app_ctx, s, Principal.user(member, tenant), word, top_k=5)}
        theirs = {h.document_id: h for h in search_documents(app_ctx, s, Principal.user(owner, tenant), word, top_k=5)}
    assert set(mine) == {ids["page"], ids["other"]}
    assert (mine[ids["page"]].path, mine[ids["page"]].knowledge_base_title) == ("", "")
    assert (mine[ids["other"]].path, mine[ids["other"]].knowledge_base_title) == ("Open notes", "")
    assert (theirs[ids["page"]].path, theirs[ids["page"]].knowledge_base_title) == ("Candidates", "Layoffs 2027")
