"""Ranking people can trust (docs/retrieval.md#scores): an exact keyword match found in one
readable document ranks it first, fusion never drops what both routes rank first, a nonsense
query returns nothing, and scores are in [0, 1] in every profile."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlmodel import Session

from openkb.db import session_scope
from openkb.errors import ConfigError
from openkb.indexing import milvus as mv
from openkb.indexing import service
from openkb.indexing.lexical import LEXICAL_V1, LEXICAL_V2, lexical_text
from openkb.indexing.profiles_spec import ProfileSpec, make_profile
from openkb.permissions import Principal
from openkb.retrieval import forget_active_profile, search
from tests.factories import make_doc, make_kb, make_personas

TOPICS = [
    ("Kubernetes pod scheduling", "The scheduler assigns pods to nodes by resource requests and affinity rules."),
    ("Database backups", "Nightly backups of the database are copied to object storage and verified weekly."),
    ("办公室咖啡机", "咖啡机每天早上九点清洗，使用前请检查水箱和咖啡豆。"),
    ("Travel expenses", "Employees submit travel expenses within thirty days with receipts attached."),
    ("Release process", "Every release is tagged, the changelog is written and the packages are signed."),
    ("TLS certificates", "Certificates are renewed automatically sixty days before they expire."),
]


@pytest.fixture(scope="module")
def world(app_ctx, engine):
    with session_scope(app_ctx.engine) as s:
        service.ensure_default_profile(app_ctx, s)
    forget_active_profile()
    unique = f"zephyrine{uuid.uuid4().hex[:6]}"
    with session_scope(engine) as s:
        p = make_personas(s)
        kb = make_kb(s, p.workspace, p.owner, visibility="workspace")
        docs = [make_doc(s, kb, p.owner, title=t, markdown=f"# {t}\n\n{body}\n") for t, body in TOPICS]
        # the one document with the unique word: its text is otherwise about something else, so
        # the dense route alone would not put it first for the query below
        target = make_doc(
            s,
            kb,
            p.owner,
            title="Meeting notes",
            markdown=f"# Meeting notes\n\nWe discussed the {unique} schedule and the coffee budget.\n",
        )
        hidden = make_doc(
            s,
            kb,
            p.owner,
            title="Secret",
            permission_mode="custom",
            visibility="private",
            markdown=f"# Secret\n\nThe {unique}x project is confidential.\n",
        )
        service.sync_documents(app_ctx, s, [d.id for d in [*docs, target, hidden]])
        ids = {"target": str(target.id), "hidden": str(hidden.id), "all": {str(d.id) for d in docs}}
        member, tenant = p.member.id, p.tenant.id
    return {"unique": unique, "ids": ids, "member": Principal.user(member, tenant)}


def _search(app_ctx, engine, who, q, top_k=10):
    with Session(engine) as s:
        return search(app_ctx, s, who, q, top_k=top_k)


def test_stemmed_english_finds_inflected_forms(world, app_ctx, engine):
    got = _search(app_ctx, engine, world["member"], "certificate renewal expiring")
    assert got and got[0].title == "TLS certificates"


@pytest.mark.parametrize("template", ["{w}", "what was said about {w} planning", "{w} 的安排"])
def test_term_in_exactly_one_readable_document_ranks_it_first(world, app_ctx, engine, template):
    got = _search(app_ctx, engine, world["member"], template.format(w=world["unique"]))
    assert got and got[0].document_id == world["ids"]["target"]
    assert world["ids"]["hidden"] not in {r.document_id for r in got}


@pytest.fixture(scope="module")
def releases(app_ctx, engine):
    """Pages full of small numbers, and two that name a version: one written ``v2.6.1``, one
    ``3.4.0`` (docs/retrieval.md#version-numbers)."""
    with session_scope(app_ctx.engine) as s:
        service.ensure_default_profile(app_ctx, s)
    forget_active_profile()
    with session_scope(engine) as s:
        p = make_personas(s)
        kb = make_kb(s, p.workspace, p.owner, visibility="workspace")
        numbers = [
            make_doc(
                s,
                kb,
                p.owner,
                title=f"Capacity {i}",
                markdown=f"# Capacity {i}\n\nWe run 2 nodes with 6 shards and 1 replica, 3 queues, 4 workers and 0 "
                f"spares; {i} 2 6 1 3 4 0.\n",
            )
            for i in range(8)
        ]
        tagged = make_doc(
            s,
            kb,
            p.owner,
            title="Cluster upgrade",
            markdown="# Cluster upgrade\n\nMove the index servers to v2.6.1 before the schema migration.\n",
        )
        bare = make_doc(
            s, kb, p.owner, title="Installer", markdown="# Installer\n\nThe desktop installer ships 3.4.0 this week.\n"
        )
        service.sync_documents(app_ctx, s, [d.id for d in [*numbers, tagged, bare]])
        ids = {"tagged": str(tagged.id), "bare": str(bare.id)}
        who = Principal.user(p.member.id, p.tenant.id)
    return {"ids": ids, "member": who}


@pytest.mark.parametrize(
    ("q", "want"),
    [("2.6.1", "tagged"), ("move to 2.6.1", "tagged"), ("v2.6.1", "tagged"), ("v3.4.0", "bare"), ("3.4.0", "bare")],
)
def test_a_version_number_finds_its_page_with_or_without_the_v(releases, app_ctx, engine, q, want):
    """``2.6.1`` finds the page that says ``v2.6.1`` and ``v3.4.0`` the one that says ``3.4.0``,
    ahead of pages that hold the same small numbers many times."""
    got = _search(app_ctx, engine, releases["member"], q, top_k=5)
    assert got and got[0].document_id == releases["ids"][want], ([r.title for r in got], _routes(app_ctx, engine, q))


def _routes(app_ctx, engine, q: str) -> list[tuple[str, float, float]]:
    """What each route gave the first hits (title, BM25 share, dense cosine): a failure's diagnosis."""
    from openkb.indexing.profiles import active_profile, spec_of

    with Session(engine) as s:
        spec = spec_of(active_profile(app_ctx, s))
    hits = mv.hybrid_search(app_ctx.milvus, app_ctx.settings.milvus_active_alias, q, "", 8, spec)
    return [(str(h.fields.get("title")), round(h.lexical, 3), round(h.dense, 3)) for h in hits] + [(spec.lexical, 0, 0)]


@pytest.mark.parametrize("q", ["qwxzvbnm plokijuh", "xkcdqzv 7f3a9b2c"])
def test_nonsense_query_returns_nothing(world, app_ctx, engine, q):
    assert _search(app_ctx, engine, world["member"], q) == []


def test_hybrid_scores_are_between_0_and_1_and_sorted(world, app_ctx, engine):
    for q in ("database backups", "咖啡机 清洗", "certificates expire", world["unique"]):
        got = _search(app_ctx, engine, world["member"], q)
        assert got, q
        scores = [r.score for r in got]
        assert all(0.0 <= x <= 1.0 for x in scores), (q, scores)
        assert scores == sorted(scores, reverse=True)


# None: a profile made before the lexical field; V1: one made before V2 (both keep working)
@pytest.mark.parametrize("lexical", [LEXICAL_V2, LEXICAL_V1, None])
def test_bm25_only_profile_scores_are_between_0_and_1(app_ctx, lexical):
    spec = replace(make_profile(model_name=None, dim=0, version=9000 + uuid.uuid4().int % 900), lexical=lexical)
    client = app_ctx.milvus
    mv.ensure_collection(client, spec)
    try:
        rows = [
            mv.chunk_row(
                chunk_id=f"c{i}",
                tenant_id="t1",
                workspace_id="w",
                knowledge_base_id="kb",
                document_id=f"d{i}",
                version_id="v",
                doc_status="published",
                visibility_eff="public",
                content_text=f"{t}\n{body}",
            )
            for i, (t, body) in enumerate([*TOPICS, ("Cluster upgrade", "Move the index servers to v2.6.1 first.")])
        ]
        mv.upsert_rows(client, spec.collection_name, rows)
        # every transform finds a version number written with its "v" when asked without it
        assert mv.hybrid_search(client, spec.collection_name, "2.6.1", "", 5, spec)[0].id == f"c{len(TOPICS)}"
        hits = mv.hybrid_search(client, spec.collection_name, "database backups storage", "", 5, spec)
        assert hits and hits[0].id == "c1"
        assert all(0.0 <= h.score <= 1.0 for h in hits) and hits[0].score == 1.0
        assert mv.hybrid_search(client, spec.collection_name, "qwxzvbnm", "", 5, spec) == []
        if lexical:  # stemmed on both sides: "backup" meets "backups", "copying" meets "copied"
            assert mv.hybrid_search(client, spec.collection_name, "backup copying", "", 5, spec)[0].id == "c1"
        # the other shapes of the same collection are refused, not written into
        for other in {None, LEXICAL_V1, LEXICAL_V2} - {lexical}:
            with pytest.raises(ConfigError):
                mv.ensure_collection(client, replace(spec, lexical=other))
    finally:
        client.drop_collection(spec.collection_name)


def test_lexical_text_stems_lowercases_and_keeps_cjk():
    assert lexical_text("The Databases were Running; 咖啡机 studies v2") == "databas run 咖啡机 studi v2"
    assert lexical_text("the of and") == ""
    assert (
        ProfileSpec.from_metadata({**make_profile(model_name=None, dim=0).to_metadata(), "lexical": None}).lexical
        is None
    )  # a stored profile without the key keeps BM25 over content_text
    assert make_profile(model_name=None, dim=0).lexical == LEXICAL_V2  # new Lite profiles: the latest
    assert make_profile(model_name=None, dim=0, backend="server").lexical is None


def test_lexical_v2_writes_dotted_numbers_by_their_prefixes():
    """V1's terms, but a dotted number is its first number and each longer prefix as one term, the
    same with or without a "v"; what V1 writes does not change (its rows keep their meaning)."""
    assert lexical_text("Upgrade to v2.6.1 today", LEXICAL_V2) == "upgrad 2 v2p6 v2p6p1 today"
    assert lexical_text("Upgrade to 2.6.1.", LEXICAL_V2) == "upgrad 2 v2p6 v2p6p1"
    assert lexical_text("listen on 127.0.0.1:19530", LEXICAL_V2) == "listen 127 v127p0 v127p0p0 v127p0p0p1 19530"
    assert lexical_text("x2.6 and 3.4.0-rc1 on Python 3.11", LEXICAL_V2) == "x2 6 3 v3p4 v3p4p0 rc1 python 3 v3p11"
    assert lexical_text("Upgrade to v2.6.1 today") == lexical_text("Upgrade to v2.6.1 today", LEXICAL_V1)
    assert lexical_text("Upgrade to v2.6.1 today") == "upgrad v2 6 1 today"


# --- fusion as a function: properties --------------------------------------------------------------

_ids = st.lists(st.sampled_from([f"c{i}" for i in range(12)]), min_size=1, max_size=12, unique=True)


@settings(max_examples=300, deadline=None)
@given(
    lex_ids=_ids,
    dense_ids=_ids,
    lex_scores=st.lists(st.floats(0.01, 50), min_size=12, max_size=12),
    cos=st.lists(st.floats(-0.2, 1.0), min_size=12, max_size=12),
    wl=st.floats(0.5, 0.9),
)
def test_fusion_never_drops_what_both_routes_rank_first(lex_ids, dense_ids, lex_scores, cos, wl):
    lex = sorted((mv.Hit(id=c, score=lex_scores[i], fields={}) for i, c in enumerate(lex_ids)), key=lambda h: -h.score)
    dense = sorted((mv.Hit(id=c, score=cos[i], fields={}) for i, c in enumerate(dense_ids)), key=lambda h: -h.score)
    fused = mv.fuse(lex, dense, 24, lexical_weight=wl, dense_weight=1 - wl)
    assert all(0.0 <= h.score <= 1.0 for h in fused)
    top_lex = [h.id for h in lex if h.score == lex[0].score]
    top_dense = [h.id for h in dense if h.score == dense[0].score]
    both = set(top_lex) & set(top_dense)
    if both:
        assert fused[0].id in both or fused[0].score == max(h.score for h in fused if h.id in both)
    # the best keyword match is never outranked by a chunk without any keyword
    no_kw = [h for h in fused if h.lexical == 0]
    best_kw = [h for h in fused if h.id in top_lex]
    if no_kw and best_kw:
        assert best_kw[0].score >= no_kw[0].score
    # with the shipped constants, every keyword match outranks every keyword-less chunk
    default = mv.fuse(lex, dense, 24)
    kw = [h.score for h in default if h.lexical > 0]
    if kw and any(h.lexical == 0 for h in default):
        assert min(kw) > max(h.score for h in default if h.lexical == 0)
