"""Which parts of a result matched the query (docs/retrieval.md#grouped-results).

``highlight_spans(query, text)`` returns ``[start, end)`` character offsets into ``text`` for
the query's words: Latin words match case-insensitively at a word start and may run on (so
"backup" marks "backups", "configur" marks "configuration"), with a light suffix strip on the
query side ("expenses" marks "expense"); Chinese/Japanese/Korean runs are cut into words with
jieba (``openkb.retrieval.segment``), the same segmenter the index uses on Lite, and match as substrings (CJK has no word
boundaries to respect). Stop words ("the", "的") are never marked: they match everywhere and
tell the reader nothing.

Trap: offsets are into the text as returned (``SearchResult.content``), so a caller that cuts
the text for display must drop or clip spans past the cut.
"""

from __future__ import annotations

import re
from functools import lru_cache

from openkb.indexing.profiles_spec import LITE_STOP_WORDS
from openkb.retrieval.segment import cut

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_LATIN_WORD = re.compile(rf"[^\W{_CJK}]+", re.UNICODE)
_STOP = frozenset(LITE_STOP_WORDS)
_SUFFIXES = ("ing", "es", "ed", "s")
MAX_TERMS = 32


def _strip_suffix(word: str) -> str:
    for suf in _SUFFIXES:
        if word.endswith(suf) and len(word) - len(suf) >= 4:
            return word[: -len(suf)]
    return word


@lru_cache(maxsize=512)
def query_terms(query: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(Latin word stems, CJK words) of a query, stop words dropped, at most ``MAX_TERMS``."""
    latin: list[str] = []
    for w in _LATIN_WORD.findall(query.lower()):
        if len(w) >= 2 and w not in _STOP:
            latin.append(_strip_suffix(w))
    cjk: list[str] = []
    runs = _CJK_RUN.findall(query)
    if runs:
        for run in runs:
            for w in cut(run):
                if w not in _STOP and (len(w) > 1 or len(run) == 1):
                    cjk.append(w)
    return tuple(dict.fromkeys(latin))[:MAX_TERMS], tuple(dict.fromkeys(cjk))[:MAX_TERMS]


_WORD_CHAR = re.compile(rf"[^\W{_CJK}]")  # a letter or digit of a Latin-script word (CJK is not)


@lru_cache(maxsize=512)
def _latin_pattern(latin: tuple[str, ...]) -> re.Pattern[str]:
    """The query's stems, longest first, each running on to the end of its word. Where a word
    starts is checked on each match (``_WORD_CHAR`` before it: inside a word), not by a
    look-behind in the pattern: a look-behind at the front makes the engine try it at every
    position, 2 to 200 times slower on a page's text. A match that starts inside a word runs to
    that word's end, so no match that starts a word is skipped by it."""
    alts = "|".join(re.escape(w) for w in sorted(latin, key=len, reverse=True))
    return re.compile(rf"(?:{alts})[^\W{_CJK}]*", re.IGNORECASE)


def highlight_spans(query: str, text: str) -> list[list[int]]:
    """Sorted, non-overlapping ``[start, end)`` spans of ``text`` that match ``query``'s words."""
    if not query or not text:
        return []
    latin, cjk = query_terms(query.strip())
    spans: list[tuple[int, int]] = []
    if latin:
        inside = _WORD_CHAR.match
        for m in _latin_pattern(latin).finditer(text):
            start = m.start()
            if not (start and inside(text, start - 1)):
                spans.append(m.span())
    for w in cjk:
        start = text.find(w)
        while start != -1:
            spans.append((start, start + len(w)))
            start = text.find(w, start + len(w))
    spans.sort()
    merged: list[list[int]] = []
    for s, e in spans:
        if merged and s < merged[-1][1]:  # overlapping; touching spans stay two marks
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged
