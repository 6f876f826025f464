"""The text BM25 sees on Milvus Lite (docs/retrieval.md#lexical-analysis).

Milvus Lite's analyzers know only the ``standard`` and ``jieba`` tokenizers and a ``stop``
filter: no lowercasing of jieba's Latin tokens, no stemming. Plain BM25 with English stemming
beat OpenKB's search by 0.13 nDCG@10 on English claims for exactly that reason ("studies" never
met "study"). So a profile with ``lexical == LEXICAL_V1`` stores, next to the displayed
``content_text``, a ``lexical_text`` field that its BM25 function reads: the same text with
Latin words lowercased, English stop words dropped and Snowball-stemmed, and CJK runs left as
they are for the collection's jieba analyzer to segment. The query goes through the same
``lexical_text`` before its BM25 request, so both sides meet on the same terms. The dense
route always gets the raw text.

Trap: the transform is part of the index. Changing it changes what every stored row means, so a
change is a new ``LEXICAL_*`` version (and a rebuild), never an edit of this one.
"""

from __future__ import annotations

import re
from functools import lru_cache

import Stemmer

LEXICAL_V1 = "stem-en-1"

_CJK = (
    r"\u2e80-\u2eff\u2f00-\u2fdf\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31bf\u3400-\u4dbf"
    r"\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
)
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W{_CJK}]+", re.UNICODE)
_CJK_START = re.compile(rf"[{_CJK}]")
# English stop words (a common short list: articles, pronouns, auxiliaries, prepositions).
STOP_WORDS = frozenset(
    """
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what when where
which while who whom why will with would you your yours yourself yourselves
""".split()
)

_stemmer = Stemmer.Stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer.stemWord(word)


def lexical_text(text: str) -> str:
    """``text`` as BM25 terms: Latin words lowercased, stop words dropped, stemmed; CJK runs kept
    (the jieba analyzer segments them), everything separated by single spaces."""
    out: list[str] = []
    for m in _TOKEN.finditer(text or ""):
        tok = m.group(0)
        if _CJK_START.match(tok):
            out.append(tok)
            continue
        w = tok.lower()
        if w in STOP_WORDS or w == "_":
            continue
        out.append(_stem(w) if w.isalpha() else w)
    return " ".join(out)


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]+")


def analyzer_language(text: str) -> str:
    """Which of a 2.6 server's analyzers a chunk or query is analyzed with: ``chinese`` as soon as
    Chinese carries a real share of it, else ``english``.

    Share by characters against Latin words (a Han character is about one word): a Chinese page
    quoting English product names stays ``chinese`` (jieba keeps the Latin words as tokens),
    while an English page with a stray 中文 name stays ``english`` and keeps its stemming.
    Trap: this is part of the index like ``lexical_text``; change it only with a rebuild."""
    han = len(_HAN.findall(text or ""))
    if not han:
        return "english"
    latin = len(_LATIN_WORD.findall(text or ""))
    return "chinese" if han >= 0.2 * latin else "english"
