"""Which 2.6 analyzer reads a chunk or a query (openkb/indexing/lexical.py ``analyzer_language``)."""

from __future__ import annotations

import pytest

from openkb.indexing.lexical import analyzer_language


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
