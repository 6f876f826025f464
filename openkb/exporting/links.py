"""Internal links of an exported page as relative links, without parsing the page when that
is provably the same.

The reference is :func:`openkb.importing.links.rewrite`: parse, swap destinations, write back
through the normalizer. It costs ~5 ms for a 3 KB page — most of an export's time, for bodies
that are normalized already and whose links need only their destination replaced. So
:func:`rewrite_links` first tries a textual replacement and keeps it only when it cannot differ
from the parse:

* every ``openkb://document/<id>`` and ``asset://<id>`` of an exported object is an inline
  destination of the simple form the normalizer writes (``](openkb://document/<uuid>#frag)``, no
  escapes, no angle brackets), so there is no reference definition, autolink or other spelling
  to miss (references to what is not exported stay as they are, whatever they are);
* none of those is inside a fenced block (or a ``$$`` math block), a code span, inline math or a table
  row, and none sits inside the text of another link or image (the parse
  leaves those alone) — judged conservatively: backtick and dollar runs of the whole paragraph
  must pair up within their lines, brackets must balance on the line;
* otherwise the page goes through the parse.

The replacement is written with the normalizer's own ``destination()``, so it is byte for byte
what the parse would write; ``tests/export/test_links.py`` checks the two agree on generated
pages with code, math, tables, images and nested brackets.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable

from openkb.importing.links import rewrite
from openkb.markdown._inline import destination

__all__ = ["Ref", "apply_refs", "bare_ref", "fast_rewrite", "rewrite_links", "scan_refs"]

Resolve = Callable[[str], "str | None"]

_REF = re.compile(
    r"(?<!\\)\]\((openkb://document/[0-9a-fA-F-]{36}(?:#[^\s()<>\\&\"'`$\[\]]*)?|asset://[0-9a-fA-F-]{36})(?=\)| \")"
)
_ANY = re.compile(r"(?:openkb://document/|asset://)[0-9a-fA-F-]{36}")
_FENCE = re.compile(r"^[ \t>]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)*(`{3,}|~{3,}|\${2,})(.*)$", re.M)
_RUNS = re.compile(r"`+")
_SCHEMES = ("openkb://document/", "asset://")
_DOLLARS = re.compile(r"\$+")


def rewrite_links(body: str, resolve: Resolve) -> str:
    """``body`` with each link or image destination that ``resolve`` maps replaced (others kept)."""
    if "openkb://document/" not in body and "asset://" not in body:
        return body
    fast = fast_rewrite(body, resolve)
    if fast is not None:
        return fast
    # an autolink to an exported page becomes [Page.md](<Page.md>), which the import turns back
    # into an autolink (``edit_tokens``'s shown_url); it is never plain, so only the parse sees it
    out, _unresolved = rewrite(body, lambda url, _img: resolve(url.strip()), lambda _t, _a, _e: None, shown_url=True)
    return out


def fast_rewrite(body: str, resolve: Resolve) -> str | None:
    """The textual replacement, or None when it might differ from the parse. Only references
    that ``resolve`` maps matter: the others stay as they are whichever way they are read."""
    return apply_refs(body, scan_refs(body), resolve)


Ref = tuple[int, int, bool]  # (start, end, plain): where a reference's destination is in the body


def scan_refs(body: str) -> list[Ref]:
    """Every ``openkb://document/<id>`` and ``asset://<id>`` of ``body`` in order, with whether
    it is *plain*: an inline destination of the simple form, outside fences, code, math and
    tables and not inside another link's text (then ``end`` is the end of the destination, a
    fragment included; else the end of the id). Depends on the body alone, so it can be computed
    once per version (``openkb/exporting/forms.py``) and applied to any export.

    Cost: one ``str.find`` scan per scheme; the context checks (fences, code spans, brackets)
    run only around references of the simple form, on their own line and paragraph."""
    refs: list[Ref] = []
    fenced: list[tuple[int, int]] | None = None
    fences_known = False
    ctx: _Context | None = None
    for scheme in _SCHEMES:
        i = body.find(scheme)
        while i >= 0:
            nxt = body.find(scheme, i + len(scheme))
            o = _ANY.match(body, i)
            if o is not None:
                m = _REF.match(body, i - 2) if i >= 2 else None
                plain = m is not None and m.start(1) == i
                if plain:
                    if not fences_known:
                        fenced = _fenced(body) if ("```" in body or "~~~" in body or "$$" in body) else []
                        fences_known = True
                    plain = fenced is not None and not any(a <= i - 2 < b for a, b in fenced)
                    if plain:
                        ctx = ctx or _Context(body)
                        plain = ctx.plain_link(i - 2)
                refs.append((i, m.end(1) if plain and m is not None else o.end(), plain))
            i = nxt
    refs.sort()
    return refs


def bare_ref(body: str, start: int) -> str:
    """The reference at ``start`` without its fragment: scheme and id."""
    return body[start : start + (54 if body.startswith("o", start) else 44)]


def apply_refs(body: str, refs: list[Ref], resolve: Resolve) -> str | None:
    """``body`` with the plain references ``resolve`` maps replaced; None when a reference that
    is not plain resolves (only the parse knows what it is)."""
    hits: list[tuple[int, int, str]] = []  # (start, end, new destination)
    for start, end, plain in refs:
        bare = bare_ref(body, start)
        first = resolve(bare)
        if first is None:
            continue
        if not plain:
            return None  # a reference definition, an autolink, an escaped or bracketed form...
        url = body[start:end]
        new = first if url == bare else resolve(url)
        if new is not None:
            hits.append((start, end, new))
    if not hits:
        return body
    out: list[str] = []
    pos = 0
    for start, end, new in hits:
        out.append(body[pos:start])
        out.append(destination(new))
        pos = end
    out.append(body[pos:])
    return "".join(out)


def _fenced(body: str) -> list[tuple[int, int]] | None:
    """Offsets (start, end) of fenced code and math blocks, fence lines included; None if one is
    left open. Only the lines holding a fence-shaped run are looked at."""
    starts: set[int] = set()
    for marker in ("```", "~~~", "$$"):
        i = body.find(marker)
        while i >= 0:
            starts.add(body.rfind("\n", 0, i) + 1)
            eol = body.find("\n", i)
            i = body.find(marker, eol + 1) if eol >= 0 else -1
    out: list[tuple[int, int]] = []
    open_at: tuple[str, int, int] | None = None  # char, length, start offset
    for start in sorted(starts):
        m = _FENCE.match(body, start)
        if m is None:
            continue
        run = m.group(1)
        if open_at is None:
            open_at = (run[0], len(run), m.start())
        elif run[0] == open_at[0] and len(run) >= open_at[1] and not m.group(2).strip():
            out.append((open_at[2], m.end()))
            open_at = None
    return None if open_at is not None else out


def _spans(text: str) -> list[tuple[int, int]] | None:
    """Code spans and inline math of ``text`` (start, end): backtick runs pair as CommonMark
    pairs them (a run closes at the next run of the same length), dollar runs likewise when they
    all have one length (remark-math's ``$x$`` / ``$$x$$``). None when something is unclear — an
    unpaired run, a span across lines, an escaped backtick or dollar, math and code interleaved —
    and the parse decides."""
    if "\\`" in text or "\\$" in text:
        return None
    spans: list[tuple[int, int]] = []
    for runs_re in (_RUNS, _DOLLARS):
        runs = [(r.start(), r.end()) for r in runs_re.finditer(text)]
        if runs_re is _DOLLARS and len({e - s for s, e in runs}) > 1:
            return None
        i = 0
        while i < len(runs):
            s, e = runs[i]
            j = next((k for k in range(i + 1, len(runs)) if runs[k][1] - runs[k][0] == e - s), None)
            if j is None or "\n" in text[s : runs[j][1]]:
                return None
            spans.append((s, runs[j][1]))
            i = j + 1
    spans.sort()
    if any(a[1] > b[0] for a, b in zip(spans, spans[1:])):
        return None  # a backtick inside math or a dollar inside code: the parse knows which wins
    return spans


_NEWLINE = re.compile("\n")


class _Context:
    """What deciding whether a ``](`` closes a plain link needs, computed once per body, per
    paragraph and per line (not per reference): a page of thousands of links (an index page, a
    long list) made every reference re-read its whole paragraph and line, a quadratic cost paid
    at every save (``openkb/exporting/forms.py``): 1,000 links in a list took 1.7 s, 6,600 in
    one paragraph 4 minutes. The decisions are those of the per-reference scans they replaced
    (compared on 300,000 random bodies when written; ``tests/export/test_links.py`` checks the
    fast path against the parse on dense pages and counts the scans)."""

    def __init__(self, body: str) -> None:
        self.body = body
        self._paras: list[tuple[int, int]] | None = None  # (start, end) of each run of non-blank lines
        self._para_starts: list[int] = []
        self._spans: dict[int, list[tuple[int, int]] | None] = {}
        self._lines: dict[int, _Line] = {}
        self._newlines: list[int] | None = None  # where each "\n" is, listed at first need

    def _line_bounds(self, pos: int) -> tuple[int, int]:
        """The start and end (its newline, or the body's end) of the line holding ``pos``, by
        bisection: found with ``rfind``/``find`` per reference, a long line of many links (an
        index paragraph) was read again for each of them, the square of its length (32,000 links
        on one line: 4.3 s at every save)."""
        if self._newlines is None:
            self._newlines = [m.start() for m in _NEWLINE.finditer(self.body)]
        k = bisect_left(self._newlines, pos)
        start = self._newlines[k - 1] + 1 if k else 0
        end = self._newlines[k] if k < len(self._newlines) else len(self.body)
        return start, end

    def _paragraph(self, line_start: int) -> tuple[int, int]:
        """The run of non-blank lines around the (non-blank) line starting at ``line_start``: its
        first line's start and its last line's end (its newline, or the body's end)."""
        if self._paras is None:
            body, paras, start, para = self.body, [], 0, None
            n = len(body)
            while start <= n:
                end = body.find("\n", start)
                if end < 0:
                    end = n
                if body[start:end].strip():
                    para = (para[0], end) if para else (start, end)
                elif para:
                    paras.append(para)
                    para = None
                start = end + 1
            if para:
                paras.append(para)
            self._paras, self._para_starts = paras, [p[0] for p in paras]
        k = bisect_right(self._para_starts, line_start) - 1
        return self._paras[k]

    def plain_link(self, pos: int) -> bool:
        """Whether the ``](`` at ``pos`` closes an ordinary, top-level link or image on its line."""
        body = self.body
        line_start, line_end = self._line_bounds(pos)
        line = self._lines.get(line_start)
        if line is None:
            text = body[line_start:line_end]
            if "\\\\" in text or text.lstrip(" \t>").startswith("|"):
                line = self._lines[line_start] = _Line(None)
            else:
                # the paragraph around the line: code spans must pair up inside their own lines
                para_start, para_end = self._paragraph(line_start)
                if para_start not in self._spans:
                    self._spans[para_start] = _spans(body[para_start:para_end])
                spans = self._spans[para_start]
                if spans is not None:  # those on this line (a span never crosses one), line-relative
                    lo, hi = line_start - para_start, line_end - para_start
                    k = bisect_left(spans, (lo, -1))
                    mine: list[tuple[int, int]] = []
                    while k < len(spans) and spans[k][0] < hi:
                        mine.append((spans[k][0] - lo, spans[k][1] - lo))
                        k += 1
                    spans = mine
                line = self._lines[line_start] = _Line.of(text, spans)
        return line.closes_plain_link(pos - line_start)


_AFTER_ANY_END = float("inf")


class _Line:
    """One line's brackets, with code spans and escaped brackets left out: for each ``]`` the
    ``[`` it closes, and for each position whether a ``[`` before it is still open."""

    __slots__ = ("_spans", "_match", "_open_before")

    def __init__(self, spans: list[tuple[int, int]] | None) -> None:
        # the code spans and inline math on this line, line-relative; None: something on the
        # line or in its paragraph needs the parse, so no link on it is plain
        self._spans = spans
        self._match: dict[int, int] = {}
        self._open_before: list[bool] = []

    @classmethod
    def of(cls, line: str, spans: list[tuple[int, int]] | None) -> _Line:
        """``spans``: the code spans and inline math on ``line`` (None: its paragraph's are unclear)."""
        out = cls(spans)
        if spans is None:
            return out
        masked = bytearray(len(line))
        for a, b in spans:
            masked[a:b] = b"\x01" * (b - a)
        # level: brackets opened minus closed before each position (skipped ones count 0); a "["
        # before i is still open when level[i] exceeds the lowest level before i
        stack: list[int] = []
        level, low = 0, 0
        open_before = out._open_before
        for i, ch in enumerate(line):
            open_before.append(level > low)
            low = min(low, level)
            if masked[i] or (i > 0 and line[i - 1] == "\\") or ch not in "[]":
                continue
            if ch == "[":
                stack.append(i)
                level += 1
            else:
                if stack:
                    out._match[i] = stack.pop()
                level -= 1
        open_before.append(level > low)
        return out

    def closes_plain_link(self, rel: int) -> bool:
        """Whether the ``]`` at ``rel`` (not inside a code span or math) closes a ``[`` with no
        ``[`` before that one left open."""
        if self._spans is None:
            return False
        k = bisect_right(self._spans, (rel, _AFTER_ANY_END)) - 1  # the last span starting at or before rel
        if k >= 0 and self._spans[k][0] <= rel < self._spans[k][1]:
            return False
        opening = self._match.get(rel)
        return opening is not None and not self._open_before[opening]
