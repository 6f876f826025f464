"""The one markdown-it configuration that stands in for Milkdown's remark parser.

Every module in this package parses through :func:`parse`, so a construct is either seen the
same way by the validator, the normalizer and the extractors, or by none of them.

Choices that are not obvious:

* ``html`` is ON although the ``html`` feature is disabled: the parser must *see* raw HTML to
  reject it; with it off, ``<br>`` would silently become text and the check would be blind.
* GFM autolink literals come from ``mdit_py_plugins.gfm_autolink`` (www., http(s)://, mailto:,
  bare e-mail), which follows the GFM extension like micromark does; markdown-it's own
  ``linkify`` (linkify-it) recognises far more (``example.com`` without ``www.``) and would make
  us normalize text Milkdown leaves alone.
* Footnote definitions stay where they are written (``move_to_end=False``): Milkdown keeps
  them in place, it does not collect them at the end.
* ``$$x$$`` inside a paragraph is inline math (``double_inline``), as in remark-math.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left, bisect_right
from functools import lru_cache
from types import SimpleNamespace
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.helpers import parseLinkDestination, parseLinkTitle
from markdown_it.rules_block import StateBlock
from markdown_it.rules_block.paragraph import paragraph as md_paragraph
from markdown_it.rules_inline import StateInline
from markdown_it.rules_inline import strikethrough as _strikethrough
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.dollarmath import index as _dollarmath_index
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.gfm_autolink import gfm_autolink_plugin
from mdit_py_plugins.gfm_autolink import index as _gfm_autolink_index
from mdit_py_plugins.gfm_autolink._match import match_any_email

__all__ = ["get_parser", "parse", "parse_with_env", "task_marker"]


def _is_escaped(state: StateInline, back_pos: int, mod: int = 0) -> bool:
    """Whether the ``$`` at ``back_pos`` is escaped by an odd run of backslashes before it.

    Replaces mdit_py_plugins 0.7.0's ``dollarmath.index.is_escaped``, which reads
    ``src[-1]`` for a ``$`` at position 0: a paragraph or heading that starts with ``$x$`` and
    ends with a backslash lost its first formula (``$x$ a $y$ b\\`` parsed `` a `` as math).
    Also, like remark-math, a backslash does not escape the *closing* ``$``: inside a formula
    backslashes are TeX (``$a\\$b$`` is the formula ``a\\`` followed by ``b$``).
    """
    if back_pos != state.pos:
        return False  # the closing dollar: no escapes inside math
    backslashes = 0
    pos = back_pos - 1
    while pos >= 0 and state.src[pos] == "\\":
        backslashes += 1
        pos -= 1
    return backslashes % 2 != mod if backslashes else False


_dollarmath_index.is_escaped = _is_escaped  # the rule looks it up at call time


_DOLLARS = re.compile(r"\$+")


def _per_parse(state: StateInline, name: str, build: Any) -> Any:
    """What ``build(src)`` makes of the inline parse's text, made once per parse and kept on its
    state under ``name`` (a nested parse, such as a link's text, shares the state and the text)."""
    cached = getattr(state, name, None)
    if cached is None or cached[0] is not state.src:
        cached = (state.src, build(state.src))
        setattr(state, name, cached)
    return cached[1]


def _dollar_runs(src: str) -> tuple[dict[int, list[int]], list[int], list[int]]:
    """The runs of ``$`` of ``src``: their starts by length, and all their starts and ends."""
    by_size: dict[int, list[int]] = {}
    starts: list[int] = []
    ends: list[int] = []
    for m in _DOLLARS.finditer(src):
        by_size.setdefault(m.end() - m.start(), []).append(m.start())
        starts.append(m.start())
        ends.append(m.end())
    return by_size, starts, ends


def _closing_run(state: StateInline, open_end: int, end: int, size: int) -> int:
    """Where the first run of exactly ``size`` dollars at or after ``open_end`` starts, counting
    only what lies before ``end`` (the inline parse's bound), or -1.

    The runs of the text are listed once per parse, by length, and looked up by bisection. The
    rule used to walk every later run for each opening run: a paragraph of runs of growing length
    (``$ $$ $$$ ...``) cost the number of runs times the paragraph's length (80 KB: 1.6 s, 5 MB
    would have held a server thread for many minutes)."""
    by_size, starts, ends = _per_parse(state, "_openkb_dollar_runs", _dollar_runs)
    same = by_size.get(size)
    if same:
        k = bisect_left(same, open_end)
        if k < len(same) and same[k] + size <= end:
            return same[k]  # whole before ``end``: no run cut by ``end`` comes earlier
    # the run ``end`` cuts (an inner parse, such as a link's text) counts its part before ``end``
    k = bisect_right(starts, end - 1) - 1
    if k >= 0 and starts[k] >= open_end and ends[k] > end and end - starts[k] == size:
        return starts[k]
    return -1


def _label_end(state: StateInline, start: int, disable_nested: bool = False) -> int:
    """markdown-it's ``parseLinkLabel``, answering -1 at once when no ``]`` follows ``start``
    before the parse's bound (the label cannot end: the same answer without the scan).

    The scan costs each unclosed ``[`` steps in proportion to the nesting limit (100), so a
    paragraph of ``[a[a[a...`` (or ``[^``, ``![``) with no ``]`` took 7-8 s per 100 KB. The ``]``
    positions are listed once per parse and looked up by bisection."""
    closers = _per_parse(state, "_openkb_closers", lambda src: [m.start() for m in _CLOSERS.finditer(src)])
    k = bisect_right(closers, start)
    if k == len(closers) or closers[k] >= state.posMax:
        return -1
    return _scan_label(state, start, disable_nested)


_STOPPED = (None, True)  # a scan that refuses nesting stopped at a `[` that starts a token


def _scan_label(state: StateInline, start: int, disable_nested: bool) -> int:
    """markdown-it's ``parseLinkLabel`` with the same answers, reading the parse's cache of where
    each token ends itself, and going over a nested label it has already scanned in one step.

    A label that closes is walked token by token up to its ``]``, and each enclosing label walks
    the same positions again: 100 KB of ``![`` nested inside one another took ~13 s, in proportion
    to the nesting limit (100) per label. Each finished scan is remembered per parse (by its
    start and the parse's bound, which a link's text narrows) with its end and whether a ``[`` on
    its way starts a token (where a scan that refuses nesting stops with -1); a scan that refuses
    nesting and stopped so is remembered as stopped, which answers only such scans. A later walk that
    reaches that ``[`` as text takes the remembered end: the positions between are in the cache
    already (the scan that was remembered went through them, and the cache is written once per
    position), so the original walk would have read the same entries to the same end."""
    src, end, cache = state.src, state.posMax, state.cache
    memo = _per_parse(state, "_openkb_labels", lambda _src: {})
    hit = memo.get((start, end))
    if hit is not None:
        if disable_nested and hit[1]:
            return -1  # stopped at (or would stop at) a `[` that starts a token
        if hit[0] is not None:
            return hit[0]
    skip = state.md.inline.skipToken
    old = state.pos
    pos = start + 1
    level = 1
    saw_token = False  # a `[` on the way starts a token (a link, an image, a footnote...)
    while pos < end:
        marker = src[pos]
        if marker == "]":
            level -= 1
            if level == 0:
                memo[(start, end)] = (pos, saw_token)
                state.pos = old
                return pos
        nxt = cache.get(pos)
        if nxt is None:
            state.pos = pos
            skip(state)
            nxt = state.pos
        if marker == "[":
            inner = None
            if nxt != pos + 1:
                saw_token = True
            else:
                level += 1  # a `[` that is text, not the start of a token
                inner = memo.get((pos, end))
            if disable_nested and (saw_token or (inner is not None and inner[1])):
                memo.setdefault((start, end), _STOPPED)
                state.pos = old
                return -1
            if inner is not None and inner[0] is not None:
                saw_token = saw_token or inner[1]
                if inner[0] == -1:
                    break  # the nested label never closes, so neither does this one
                nxt = inner[0]  # its `]` brings the level back down
        pos = nxt
    memo[(start, end)] = (-1, saw_token)
    state.pos = old
    return -1


_CLOSERS = re.compile(r"\]")


def _math_text(state: StateInline, silent: bool) -> bool:
    """Inline math as remark-math reads it: the opening run of ``$`` closes only at a run of
    exactly its length (``$x\\n$$y$`` is the formula ``x\\n$$y``; dollarmath closed at the
    first ``$`` of the ``$$``). Without a closing run the whole opening run is text, so a
    shorter run inside it never opens a formula either."""
    src, start, end = state.src, state.pos, state.posMax
    if src[start] != "$" or _is_escaped(state, start):
        return False
    open_end = start
    while open_end < end and src[open_end] == "$":
        open_end += 1
    size = open_end - start
    close = _closing_run(state, open_end, end, size)
    if close < 0:
        if not silent:
            state.pending += "$" * size
        state.pos = open_end
        return True
    close_end = close + size
    if not silent:
        token = state.push("math_inline" if size == 1 else "math_inline_double", "math", 0)
        token.content = src[open_end:close]
        token.markup = "$" * size
    state.pos = close_end
    return True


def _prev_www(ch: str) -> bool:
    """May a ``www.`` literal follow ``ch``? In the editor, micromark allows only blanks and
    ``( * _ [ ] ~`` (cmark-gfm's set, the plugin's ``check_prev``), but mdast-util-gfm-autolink-
    literal then links what is left in every text node after any Unicode blank, punctuation or
    symbol: ``<www.x.org a>`` is a link after ``<`` (tests/markdown/test_parity.py)."""
    return ch.isspace() or unicodedata.category(ch)[0] in "PS"


def _email_prev_ok(ch: str) -> bool:
    """May an e-mail literal's local part follow ``ch``? Both micromark (``previousEmail``) and
    the mdast transform refuse only address characters before it; a ``/`` is fine
    (``a/b@c.org`` links ``b@c.org``)."""
    return not (ch.isascii() and (ch.isalnum() or ch in "+-._"))


def _preceding_ok(state: StateInline, bscan_len: int) -> bool:
    """The GFM plugin's check before a back-scanned ``http:``/``mailto:`` or e-mail local part,
    with the editor's rules instead of cmark-gfm's (spec-autolinks-008: ``<https://x y>`` links
    ``https://x``). ``http(s)://`` may follow anything but an ASCII letter (micromark's
    ``previousProtocol``). ``mailto:``/``xmpp:`` never start a link: the editor keeps the scheme
    as text and links the address after it (``mailto:<a@b.org>``), which the e-mail rule does."""
    at = state.pos - bscan_len
    if state.src[state.pos] == ":" and state.src[at : state.pos] not in ("http", "https"):
        return False
    if at <= 0:
        return True
    ch = state.src[at - 1]
    if state.src[state.pos] == "@":
        return _email_prev_ok(ch)
    return not (ch.isascii() and ch.isalpha())


# The plugin looks both up in its module at call time (as dollarmath's is_escaped above). Trap:
# a plugin release that renames them silently brings cmark-gfm's narrower rule back; the parity
# corpus (spec-autolinks-008) and tests/markdown/test_parity.py catch that.
_gfm_autolink_index.check_prev = _prev_www
_gfm_autolink_index._preceding_ok = _preceding_ok

# Inline rules of the GFM plugin that slice the paragraph from where they stand to its end
# (``src[pos:posMax]``) and only then look at a few characters of it. The inline scanner stops
# at every ``w``, ``:`` and ``@`` (the plugin's trigger characters), so on one long paragraph
# that copying was quadratic: 200 KB of ``key: value`` took 48 s to normalize, 5 MB (what a
# save may hold) hours of a server thread. The protocol rule also searched the whole pending
# text with a regular expression at every ``:``. A literal cannot reach past the first blank
# (every matcher of the plugin stops there: ``_match._SPACE_CHARS``), so each rule now runs
# with the paragraph's end moved to just after that blank, which gives the same tokens.
_BLANKS = re.compile("[ \t\r\n\x00\x0b\x0c]")
_PROTOCOLS = ("https", "http", "mailto", "xmpp")  # "https" before "http": the longer name wins


def _word_end(state: StateInline) -> int:
    """Just past the first blank at or after ``state.pos`` (or ``posMax``). Cached on the state
    while ``pos`` stays before that blank, so finding it is linear over a paragraph."""
    pos = state.pos
    cached = getattr(state, "_okb_blank", None)
    if cached is None or not cached[0] <= pos <= cached[1]:
        m = _BLANKS.search(state.src, pos)
        cached = (pos, m.start() if m else len(state.src))
        state._okb_blank = cached  # type: ignore[attr-defined]
    return min(state.posMax, cached[1] + 1)


def _within_word(rule: Any, trigger: str) -> Any:
    """``rule`` run with the paragraph's end just after the blank that ends the word, entered
    only where the rule can start (``trigger``: it looks at nothing else first)."""

    def bounded(state: StateInline, silent: bool) -> bool:
        if not state.src.startswith(trigger, state.pos):
            return False
        pos_max = state.posMax
        state.posMax = _word_end(state)
        try:
            return rule(state, silent)
        finally:
            state.posMax = pos_max

    bounded.__name__ = rule.__name__
    bounded.__doc__ = f"{rule.__name__} of the GFM plugin, within the word it stands on"
    return bounded


def _protocol_rule(state: StateInline, silent: bool) -> bool:
    """The plugin's ``http:``/``https:``/``mailto:``/``xmpp:`` rule, entered only on a ``:``
    right after one of those names (checked on the end of the pending text, not by searching
    all of it), within the word it stands on."""
    if not state.pending.endswith(_PROTOCOLS):
        return False
    return _bounded_protocol(state, silent)  # which checks the ":" itself


class _ProtocolAtEnd:
    """The plugin's back-scan for a protocol name (``_PROTO_RE.search(state.pending)``, looked up
    in its module at call time) on the pending text's last 7 characters: the pattern is anchored
    at the end and its longest name is 6 characters plus the one before it, so the match is the
    same, without walking the whole pending text (``http:xx`` repeated was quadratic)."""

    _pattern = _gfm_autolink_index._PROTO_RE

    def search(self, text: str) -> re.Match[str] | None:
        return self._pattern.search(text[-7:])


_gfm_autolink_index._PROTO_RE = _ProtocolAtEnd()
_bounded_protocol = _within_word(_gfm_autolink_index._protocol_rule, ":")
_bounded_www = _within_word(_gfm_autolink_index._www_inline_rule, "www.")
_bounded_email = _within_word(_gfm_autolink_index._email_rule, "@")


_DOUBLE_TILDE = 0x7E7E


def _tilde_tokenize(state: StateInline, silent: bool) -> bool:
    """markdown-it's strikethrough, with ``~~`` runs given a marker of their own while pairs are
    balanced. Like micromark, a ``~`` pairs only with a ``~`` and ``~~`` with ``~~``: markdown-it
    paired ``~`` with ``~~`` and only then dropped the pair for its width, so the later ``~`` that
    micromark closes with went unmatched (``~x~~ a~b`` is struck through "x~~ a" in the editor;
    parity case mk-590)."""
    n = len(state.delimiters)
    if not _strikethrough.tokenize(state, silent):
        return False
    for d in state.delimiters[n:]:
        if state.tokens[d.token].content == "~~":
            d.marker = _DOUBLE_TILDE
    return True


def _tilde_post_process(state: StateInline) -> None:
    """Give ``~~`` its tilde marker back (pairs are balanced by now), then markdown-it's pass."""
    lists = [state.delimiters, *(m["delimiters"] for m in state.tokens_meta if m and "delimiters" in m)]
    for delimiters in lists:
        for d in delimiters:
            if d.marker == _DOUBLE_TILDE:
                d.marker = 0x7E
    _strikethrough.postProcess(state)


# mdast-util-gfm-autolink-literal's patterns, which the editor runs over every text node after
# parsing, URLs first, then e-mail addresses in what is left (JS ``\w`` is ASCII).
_EDITOR_URL = re.compile(r"(?<![0-9a-z])(https?://|www(?=\.))([A-Za-z0-9_-]*\.[A-Za-z0-9_.-]*)([^\t\n\r ]*)", re.I)
_EDITOR_EMAIL = re.compile(
    r"(?<![A-Za-z0-9_+\-.])(?<!mailto:)(?<!xmpp:)([A-Za-z0-9_+\-.]+)@([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+)"
)
_LABEL_END = re.compile(r"[\d\-_]\Z")
_URL_TRAIL = frozenset("!\"&'),.:;<>?]}")


def _punct_or_symbol(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PS"


def _correct_domain(domain: str) -> bool:
    parts = domain.split(".")
    if len(parts) < 2:
        return False
    return not any(p and ("_" in p or not re.search(r"[0-9A-Za-z]", p)) for p in parts[-2:])


def _split_url(url: str) -> tuple[str, str]:
    """Trailing punctuation is not part of a URL, except ``)`` that closes a ``(`` inside it."""
    end = len(url)
    while end and url[end - 1] in _URL_TRAIL:
        end -= 1
    url, trail = url[:end], url[end:]
    opening, closing = url.count("("), url.count(")")
    at = trail.find(")")
    while at != -1 and opening > closing:
        url, trail = url + trail[: at + 1], trail[at + 1 :]
        at = trail.find(")")
        closing += 1
    return url, trail


def _url_at(text: str, m: re.Match[str]) -> tuple[int, str, str] | None:
    """(end, href, label) of the URL literal ``m`` found, or None where the editor finds none."""
    if m.start() and not (text[m.start() - 1].isspace() or _punct_or_symbol(text[m.start() - 1])):
        return None
    protocol, domain, path = m.group(1), m.group(2), m.group(3)
    prefix = ""
    if protocol[0] in "wW":
        domain, protocol, prefix = protocol + domain, "", "http://"
    if _punct_or_symbol(domain[0]) or not _correct_domain(domain):
        return None
    url, trail = _split_url(domain + path)
    return m.end() - len(trail), prefix + protocol + url, protocol + url


def _literals(text: str) -> list[tuple[int, int, str, str]]:
    """(start, end, href, label) of each literal the editor's transform links in one text node.
    A failed match is retried one character later, as mdast-util-find-and-replace does."""
    found: list[tuple[int, int, str, str]] = []
    pos = 0 if "." in text else len(text)
    while (m := _EDITOR_URL.search(text, pos)) is not None:
        hit = _url_at(text, m)
        if hit is None:
            pos = m.start() + 1
            continue
        found.append((m.start(), hit[0], hit[1], hit[2]))
        pos = hit[0]
    gaps, at = [], 0
    for start, end, _h, _l in found:
        gaps.append((at, start))
        at = end
    gaps.append((at, len(text)))
    for lo, hi in gaps:
        part, pos = text[lo:hi], 0
        if "@" not in part:
            continue
        while (m := _EDITOR_EMAIL.search(part, pos)) is not None:
            if _LABEL_END.search(m.group(2)):
                pos = m.start() + 1
                continue
            found.append((lo + m.start(), lo + m.end(), "mailto:" + m.group(0), m.group(0)))
            pos = m.end()
    return sorted(found)


def _literals_in_text(state: Any) -> None:
    """Link the URLs and e-mail addresses the GFM rules left in text, as the editor's tree
    transform does after parsing.

    The inline rules see source characters, so an escape hides a literal
    (``<foo\\+@bar.example.com>``, ``first\\_last@x.org``, ``www\\.x.org``); the editor links
    the decoded text node (parity case spec-autolinks-012). Runs after ``text_join``, when a text
    token holds what an mdast text node holds; text inside links is left alone, as there.
    """
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        out: list[Token] = []
        depth = 0
        changed = False
        for tok in block.children:
            if tok.type == "link_open":
                depth += 1
            elif tok.type == "link_close":
                depth -= 1
            text = tok.content
            hits = [] if tok.type != "text" or depth or not ("@" in text or "." in text) else _literals(text)
            if not hits:
                out.append(tok)
                continue
            at = 0
            for start, end, href, label in hits:
                if start > at:
                    out.append(_text(text[at:start]))
                link = Token("link_open", "a", 1)
                link.attrs = {"href": href}
                link.markup, link.info = "autolink", "auto"
                close = Token("link_close", "a", -1)
                close.markup, close.info = "autolink", "auto"
                out += [link, _text(label), close]
                at = end
            if at < len(text):
                out.append(_text(text[at:]))
            changed = True
        if changed:
            block.children = out


def _text(content: str) -> Token:
    tok = Token("text", "", 0)
    tok.content = content
    return tok


def _identity(url: str) -> str:
    return url


def _accept(url: str) -> bool:
    return True


_EMAIL_LOCAL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.+_-")
# How far an ``_`` looks for the address around it: a local part of at most 1,000 characters
# (RFC 5321 allows 64) and a domain of at most 255 (DNS: 253). Unbounded, each ``_`` of a long
# run re-read the run: quadratic on a 5 MB paragraph (see _word_end).
_LOCAL_MAX = 1000
_DOMAIN_MAX = 255


def _local_tail(pending: str) -> int | None:
    """Length of the e-mail local-part characters ending ``pending``; None past ``_LOCAL_MAX``."""
    n = len(pending)
    i, stop = n, max(0, n - _LOCAL_MAX - 1)
    while i > stop and pending[i - 1] in _EMAIL_LOCAL:
        i -= 1
    return None if n - i > _LOCAL_MAX else n - i


def _underscore_in_email(state: StateInline, silent: bool) -> bool:
    """An ``_`` inside an e-mail literal's local part is text (micromark reads ``a_b@x.org`` as
    one address). markdown-it's emphasis rule would take the ``_`` as a delimiter first, so the
    GFM plugin's scan back from ``@`` saw only ``b`` and linked ``b@x.org``. Here the ``_``
    joins the pending text when the run around it is an address, and the plugin's ``@`` rule
    then links all of it (tests/markdown/test_parity.py, spec-autolinks-028)."""
    pos = state.pos
    if state.linkLevel > 0 or state.src[pos] != "_":
        return False
    n = _local_tail(state.pending)
    if n is None:
        return False
    start = pos - n
    if n and state.src[start:pos] != state.pending[-n:]:  # an escape or another rule changed what pending holds
        return False
    if start > 0 and not _email_prev_ok(state.src[start - 1]):
        return False
    end = min(state.posMax, _word_end(state), start + _LOCAL_MAX + 2 + _DOMAIN_MAX)
    if match_any_email(state.src[start:end], 0, None) is None:
        return False
    if not silent:
        state.pending += "_"
    state.pos += 1
    return True


# Blocks nested deeper than this are not parsed: markdown-it skips the rest of such a block
# (its guard against unbounded recursion) and the normalizer would have stored the document
# without it. A quote adds one level, a list two (the list and its item). The depth reached is
# recorded in the parse's env under ``TOO_DEEP`` (the first 0-based line skipped) and the
# validator refuses the document (docs/markdown.md#limits): nothing is dropped silently.
MAX_NESTING = 100
TOO_DEEP = "openkb_too_deep"


def _guard_depth(tokenize: Any) -> Any:
    """markdown-it's block tokenizer, noting in ``state.env`` where it is about to skip content
    for being nested too deep (the same test as its own loop's, made before it)."""

    def guarded(state: StateBlock, start_line: int, end_line: int, *args: Any) -> None:
        if state.level >= state.md.options["maxNesting"]:
            line = state.skipEmptyLines(start_line)
            if line < end_line and state.sCount[line] >= state.blkIndent:
                state.env.setdefault(TOO_DEEP, line)
        return tokenize(state, start_line, end_line, *args)

    return guarded


@lru_cache(maxsize=1)
def get_parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    # Task checkboxes are NOT markdown-it's tasklists: it block-parses what follows `[ ]`
    # (`- [ ] # x` becomes a heading), micromark keeps it paragraph text. See task_marker().
    md.options["strikethrough_single_tilde"] = True
    md.options["maxNesting"] = MAX_NESTING
    md.block.tokenize = _guard_depth(md.block.tokenize)  # type: ignore[method-assign]
    md.inline.ruler.at("strikethrough", _tilde_tokenize)
    md.inline.ruler2.at("strikethrough", _tilde_post_process)
    # Keep destinations as written (decoded, not percent-encoded): mdast stores them so and
    # Milkdown writes them back so. Unsafe schemes are neutralised at render time instead.
    md.normalizeLink = _identity  # type: ignore[method-assign]
    md.normalizeLinkText = _identity  # type: ignore[method-assign]
    md.validateLink = _accept  # type: ignore[method-assign]
    # the link and image rules find labels through md.helpers: this parser's own namespace
    md.helpers = SimpleNamespace(  # type: ignore[assignment]
        parseLinkLabel=_label_end, parseLinkDestination=parseLinkDestination, parseLinkTitle=parseLinkTitle
    )
    md.use(gfm_autolink_plugin)
    md.inline.ruler.at("gfm_autolink_www", _bounded_www)
    md.inline.ruler.at("gfm_autolink_protocol", _protocol_rule)
    md.inline.ruler.at("gfm_autolink_email", _bounded_email)
    md.inline.ruler.before("emphasis", "underscore_in_email", _underscore_in_email)
    md.core.ruler.after("text_join", "literals_in_text", _literals_in_text)
    md.use(footnote_plugin, inline=False, move_to_end=False)
    md.use(
        dollarmath_plugin,
        allow_labels=False,
        allow_space=True,
        allow_digits=True,
        allow_blank_lines=True,
        double_inline=True,
    )
    # dollarmath's block rule slices raw source, so inside a list or quote the math keeps
    # the container's indentation and `>` markers; and it treats `$$ x $$` on one line as
    # a block where micromark sees inline math. Use a fence-shaped rule instead (remark-math
    # models math flow on code fences).
    md.block.ruler.disable("math_block")
    md.inline.ruler.at("math_inline", _math_text)
    md.block.ruler.before(
        "fence",
        "math_fence",
        _math_fence,
        {"alt": ["paragraph", "reference", "blockquote", "list", "footnote_def"]},
    )
    md.block.ruler.at("paragraph", _paragraph, {"alt": []})
    return md


_PARAGRAPH = md_paragraph


def _paragraph(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """markdown-it's paragraph, but trimmed like micromark: only spaces, tabs and line ends.

    markdown-it trims the CommonMark Unicode whitespace set, so a paragraph that starts with a
    no-break space (pasted text does) lost it; the editor keeps it.
    """
    n = len(state.tokens)
    if not _PARAGRAPH(state, start, end, silent):
        return False
    if len(state.tokens) >= n + 3 and state.tokens[n + 1].type == "inline":
        tok = state.tokens[n + 1]
        tok.content = state.getLines(start, state.line, state.blkIndent, False).strip(" \t\r\n")
    return True


def _math_fence(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    if state.is_code_block(start):
        return False
    pos = state.bMarks[start] + state.tShift[start]
    line_end = state.eMarks[start]
    if pos + 2 > line_end or state.src[pos] != "$":
        return False
    after = state.skipCharsStr(pos, "$")
    size = after - pos
    meta = state.src[after:line_end]
    if size < 2 or "$" in meta:
        return False
    if silent:
        return True
    line = start
    closed = False
    while True:
        line += 1
        if line >= end:
            break
        p = state.bMarks[line] + state.tShift[line]
        e = state.eMarks[line]
        if p < e and state.sCount[line] < state.blkIndent:
            break  # a less indented line ends the container, and the math with it
        if p >= e or state.src[p] != "$" or state.is_code_block(line):
            continue
        q = state.skipCharsStr(p, "$")
        if q - p < size or state.skipSpaces(q) < e:
            continue
        closed = True
        break
    indent = state.sCount[start]
    state.line = line + (1 if closed else 0)
    token = state.push("math_block", "math", 0)
    token.info = meta.strip()
    token.content = state.getLines(start + 1, line, indent, True)
    token.markup = "$" * size
    token.map = [start, state.line]
    return True


def parse_with_env(text: str) -> tuple[list[Token], dict[str, Any]]:
    """Tokens plus the env, which holds reference and footnote definitions."""
    env: dict[str, Any] = {}
    tokens = get_parser().parse(text, env)
    return tokens, env


def parse(text: str) -> list[Token]:
    return get_parser().parse(text, {})


_TASK = re.compile(r"\[([ xX])\](?=[ \t]|$)")


def task_marker(item_children: list[Token], open_index: int) -> bool | None:
    """GFM task state of the list item whose first child paragraph starts at ``open_index``.

    Returns True/False for a checked/unchecked task, None for a plain item. The caller strips
    the ``[x]`` and one following space from the first text token when it acts on this.
    """
    if open_index + 1 >= len(item_children):
        return None
    inline = item_children[open_index + 1]
    if item_children[open_index].type != "paragraph_open" or inline.type != "inline":
        return None
    kids = inline.children or []
    if len(kids) >= 3 and kids[0].type == "link_open" and _TASK.match(inline.content):
        _unlink_task_marker(inline)
        kids = inline.children or []
    if not kids or kids[0].type != "text":
        return None
    m = _TASK.match(kids[0].content)
    if not m:
        return None
    if len(kids) == 1 and not kids[0].content[3:].strip():
        return None  # micromark: the marker must be followed by more of the paragraph
    return m.group(1) != " "


def _unlink_task_marker(inline: Token) -> None:
    """``- [x] a`` with a definition ``[x]: url`` in the document: markdown-it reads ``[x]`` as a
    reference link, micromark reads the task marker first. Turn the link back into the text
    ``[x]`` so the item is the task the editor shows."""
    kids = inline.children or []
    if not (kids[1].type == "text" and kids[1].content in (" ", "x", "X") and kids[2].type == "link_close"):
        return
    text = Token("text", "", 0)
    text.content = "[" + kids[1].content + "]"
    rest = kids[3:]
    if rest and rest[0].type == "text":
        text.content += rest[0].content
        rest = rest[1:]
    inline.children = [text, *rest]


def strip_task_marker(inline: Token) -> None:
    """Remove ``[x]`` and one following blank from the paragraph (mdast-util-gfm-task-list)."""
    first = (inline.children or [])[0]
    first.content = first.content[4:] if len(first.content) > 3 else ""
    if not first.content and inline.children:
        inline.children.pop(0)
