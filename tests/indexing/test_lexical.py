"""Which 2.6 analyzer reads a chunk or a query (openkb/indexing/lexical.py ``analyzer_language``), and
what the BM25 route is asked (``bm25_query``: version numbers in both spellings)."""

from __future__ import annotations

import pytest

from openkb.indexing.lexical import (
    LEXICAL_V1,
    LEXICAL_V2,
    analyzer_language,
    bm25_query,
    lexical_text,
    upgrade_hint,
    version_variants,
)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Studies of deployment on two nodes", "english"),
        ("", "english"),
        ("如何部署", "chinese"),
        ("在两台机器上部署 Milvus 2.6 和 PostgreSQL", "chinese"),  # Chinese quoting product names
        ("The 中 character appears once in a long English paragraph about indexing and search", "english"),
        ("ひらがなだけ", "english"),  # no Han: nothing for the chinese analyzer to segment better
    ],
)
def test_analyzer_language(text, want):
    assert analyzer_language(text) == want


@pytest.mark.parametrize(
    ("query", "variants"),
    [
        ("2.6.1", ["v2.6.1"]),
        ("v2.6.1", ["2.6.1"]),
        ("upgrade Milvus to 2.6.1.", ["v2.6.1"]),  # a full stop after it
        ("Milvus 2.6 and V3.1", ["v2.6", "3.1"]),
        ("2.6.1-rc1", ["v2.6.1"]),
        ("127.0.0.1:19530", []),  # an address, not a version
        ("1.2.3.4", []),
        ("x2.6 abc2.6.1", []),  # part of a longer word
        ("42 and 7", []),
        ("", []),
    ],
)
def test_version_variants(query, variants):
    assert version_variants(query) == variants


def test_the_bm25_query_of_each_transform():
    """V2 needs no addition (its whole term is the same for both spellings). Otherwise only the
    terms the query lacks are added (a repeated one would weigh twice)."""
    assert bm25_query("2.6.1", LEXICAL_V2) == "2 v2p6 v2p6p1" == bm25_query("2.6.1.", LEXICAL_V2)
    assert bm25_query("v2.6.1", LEXICAL_V2) == "2 v2p6 v2p6p1"
    assert bm25_query("2.6.1", LEXICAL_V1) == "2 6 1 v2"
    assert bm25_query("v2.6.1", LEXICAL_V1) == "v2 6 1 2"
    assert bm25_query("Upgrading to 2.6", LEXICAL_V1) == "upgrad 2 6 v2"
    assert bm25_query("no numbers here", LEXICAL_V1) == lexical_text("no numbers here")
    # a 2.6 server's standard tokenizer splits at the dots too: the missing pieces are added
    assert bm25_query("2.6.1", None) == "2.6.1 v2"
    assert bm25_query("Upgrade to V2.6.1", None) == "Upgrade to V2.6.1 2"
    assert bm25_query("plain words", None) == "plain words"


def test_up_says_how_to_move_a_lite_profile_onto_the_latest_transform():
    hint = upgrade_hint("default", LEXICAL_V1, "lite")
    assert hint is not None and "stem-en-1" in hint and LEXICAL_V2 in hint
    assert "`openkb profile create default-2 --like default`" in hint
    assert "`openkb index rebuild --profile default-2 --switch`" in hint
    assert "keyword transform none" in (upgrade_hint("old", None, "lite") or "")  # made before any transform
    assert upgrade_hint("default", LEXICAL_V2, "lite") is None  # already the latest
    assert upgrade_hint("default", None, "server") is None  # a 2.6 server analyzes by itself
