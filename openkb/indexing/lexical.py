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

``LEXICAL_V2`` changes one thing: a dotted number (a version, an address). V1 splits ``v2.6.1``
into ``v2 6 1`` and ``3.4.0`` into ``3 4 0``, numbers that pages of figures hold many times, so a
search for a release found every page with small numbers before the release notes, and ``2.6.1``
met ``v2.6.1`` only on ``6`` and ``1``. V2 writes a dotted number as its first number and then
each longer prefix as one term: ``v2.6.1`` and ``2.6.1`` both become ``2 v2p6 v2p6p1``. The
whole number is one rare term, the same with or without the ``v``; ``2.6`` (``2 v2p6``) still
meets ``2.6.1``, and ``Python 3`` still meets ``3.11``; the later small numbers are no terms of
their own, so pages that repeat them do not compete. The terms are letters and digits only, so
Lite's jieba analyzer keeps each as one token (it would cut ``2.6.1`` or ``2_6_1``).

Trap: the transform is part of the index. Changing it changes what every stored row means, so a
change is a new ``LEXICAL_*`` version (and a rebuild), never an edit of this one. Each version
has its own field (``LEXICAL_FIELDS``): a collection's schema says which transform wrote it.
"""

from __future__ import annotations

import re
from functools import lru_cache

import Stemmer

LEXICAL_V1 = "stem-en-1"
LEXICAL_V2 = "stem-en-2"  # V1, but dotted numbers as their prefixes (module docstring)
# the Milvus field each transform writes and the BM25 function reads (openkb/indexing/milvus.py)
LEXICAL_FIELDS = {LEXICAL_V1: "lexical_text", LEXICAL_V2: "lexical_text_v2"}

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


def upgrade_hint(profile: str, version: str | None, backend: str) -> str | None:
    """What ``openkb up`` says when the active profile is a Lite profile on an older transform
    than new profiles get (a profile keeps its own: its rows mean that), with the two commands
    that move it; None when there is nothing to say (a 2.6 server analyzes by itself)."""
    if backend != "lite" or version == LEXICAL_V2:
        return None
    new = f"{profile}-2" if len(profile) <= 61 else "keywords-2"
    return (
        f"The active index profile {profile!r} uses keyword transform {version or 'none'}; new profiles use "
        f"{LEXICAL_V2}, which finds version numbers such as 2.6.1 with or without their v: "
        f"`openkb profile create {new} --like {profile}` then `openkb index rebuild --profile {new} --switch` "
        "(docs/retrieval.md#version-numbers)."
    )


def describe_lexical(version: str | None) -> str:
    """A profile's transform in words (``openkb profile show``), saying when a newer one exists."""
    if version is None:
        return "none: BM25 reads content_text through the analyzer alone"
    what = {
        LEXICAL_V1: "stemmed English, dotted numbers split at their dots",
        LEXICAL_V2: "stemmed English, dotted numbers whole (and by prefix)",
    }.get(version, "unknown")
    newer = "" if version == LEXICAL_V2 else f" (new Lite profiles get {LEXICAL_V2}: docs/retrieval.md#version-numbers)"
    return f"{version}: {what}{newer}"


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer.stemWord(word)


# a dotted number, with or without a leading "v": 2.6, v2.6.1, 10.0.0.12 (not part of a longer
# word or dotted run; a full stop after it allowed)
_DOTTED = re.compile(r"(?<![\w.])(v?)(\d+(?:\.\d+)+)(?!\.?\w)", re.IGNORECASE)


def _whole(m: re.Match[str]) -> str:
    """A dotted number as ``LEXICAL_V2``'s terms: its first number, then each longer prefix as
    one term (``v2.6.1`` -> ``2 v2p6 v2p6p1``)."""
    parts = m.group(2).split(".")
    return " ".join([parts[0], *("v" + "p".join(parts[:i]) for i in range(2, len(parts) + 1))])


def lexical_text(text: str, version: str = LEXICAL_V1) -> str:
    """``text`` as BM25 terms: Latin words lowercased, stop words dropped, stemmed; CJK runs kept
    (the jieba analyzer segments them), everything separated by single spaces. ``LEXICAL_V2``
    writes each dotted number by its prefixes (module docstring)."""
    if version == LEXICAL_V2 and text:
        text = _DOTTED.sub(_whole, text)
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


# a version number written with or without a leading "v": 2.6, v2.6.1 (one or two dots: not an
# IPv4 address)
_VERSION = re.compile(r"(?<![\w.])(v?)(\d+(?:\.\d+){1,2})(?!\.?\w)", re.IGNORECASE)


def version_variants(text: str) -> list[str]:
    """Each dotted version number of ``text`` in its other spelling: ``2.6.1`` -> ``v2.6.1`` and
    ``v2.6.1`` -> ``2.6.1``. Release notes and runbooks write ``v2.6.1`` where people search
    ``2.6.1`` (and the other way round), and analyzers that split at the dots (``stem-en-1``,
    a 2.6 server's standard tokenizer) make ``v2 6 1`` of one and ``2 6 1`` of the other, which
    meet only on the small numbers. ``LEXICAL_V2`` needs none of this: its whole term is the
    same for both spellings."""
    out: list[str] = []
    for m in _VERSION.finditer(text or ""):
        other = m.group(2) if m.group(1) else "v" + m.group(2)
        if other not in out:
            out.append(other)
    return out


# the terms of a 2.6 server's standard tokenizer: runs of letters and digits (it splits at
# everything else, dots and underscores included)
_ALNUM = re.compile(r"[^\W_]+")


def bm25_query(query: str, lexical: str | None) -> str:
    """The text of a search's BM25 route, for a profile whose transform is ``lexical``: the query
    through the same ``lexical_text`` as the rows (``LEXICAL_V2`` matches a version number with
    or without its ``v`` by itself); otherwise plus the terms of its version numbers' other
    spellings that the query lacks (``2.6.1`` adds ``v2``, ``v2.6.1`` adds ``2``; a term the
    query already has is not repeated, it would weigh twice): through ``lexical_text`` with
    ``LEXICAL_V1``, as the standard tokenizer cuts them without a transform (a 2.6 server's own
    analyzer). A query-time addition: the index does not change."""
    if lexical == LEXICAL_V2:
        return lexical_text(query, LEXICAL_V2)
    variants = version_variants(query)
    if lexical is None:
        have = {t.lower() for t in _ALNUM.findall(query)}
        extra = dict.fromkeys(t for v in variants for t in _ALNUM.findall(v.lower()) if t not in have)
        return " ".join([query, *extra])
    base = lexical_text(query, lexical)
    have = set(base.split())
    extra = dict.fromkeys(t for v in variants for t in lexical_text(v, lexical).split() if t not in have)
    return " ".join([base, *extra]).strip()


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
