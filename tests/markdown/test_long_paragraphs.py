"""A long paragraph costs time in proportion to its length (docs/markdown.md#limits).

The GFM autolink rules run at every ``w``, ``:`` and ``@`` of a paragraph. They used to copy the
paragraph from there to its end and search the whole pending text: 200 KB of ``key: value`` took
48 s to normalize, and a 5 MB body (what a save may hold) would have held a server thread for
hours. These tests check the bound itself, what each matcher is handed, not a time: a literal
never reaches past the first blank, so a matcher needs no more than the word it stands on."""

from __future__ import annotations

import re
import sys

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it.helpers import parseLinkLabel
from markdown_it.rules_inline import state_inline
from mdit_py_plugins.gfm_autolink import index as gfm

import openkb.markdown.parser as parser
from openkb.markdown import normalize
from tests.steps import lines_run

WORDS = "key: value http:xx https:// mailto:yy a@b www.! a_b@c x_y www.x.org me@x.org https://x.org/p?q=1 "


def test_autolink_matchers_are_handed_the_word_they_stand_on_not_the_rest_of_the_paragraph(monkeypatch):
    handed: list[int] = []

    def spy(real):
        def call(text, *args):
            handed.append(len(text))
            return real(text, *args)

        return call

    monkeypatch.setattr(gfm, "match_http", spy(gfm.match_http))
    monkeypatch.setattr(gfm, "match_www", spy(gfm.match_www))
    monkeypatch.setattr(gfm, "match_any_email", spy(gfm.match_any_email))
    monkeypatch.setattr(parser, "match_any_email", spy(parser.match_any_email))
    scanned: list[int] = []  # what the protocol-name pattern searches (it used to be all pending text)
    pattern = parser._ProtocolAtEnd._pattern

    class Counted:
        def search(self, text):
            scanned.append(len(text))
            return pattern.search(text)

    monkeypatch.setattr(parser._ProtocolAtEnd, "_pattern", Counted())

    body = WORDS * 2000  # ~190 KB, one paragraph
    out = normalize(body)
    longest = max(len(w) for w in WORDS.split())
    assert handed and max(handed) <= longest + len("mailto") + 1  # the word (with its blank) and a back-scanned name
    assert scanned and max(scanned) <= 7
    # and the literals are still links, every one of them
    assert out.count("<https://x.org/p?q=1>") == 2000
    assert out.count("<me@x.org>") == 2000 and out.count("<a_b@c>") == 0


def test_autolinks_next_to_every_kind_of_blank_are_unchanged():
    # the bound is the first blank after the literal: each kind the matchers stop at
    for blank in (" ", "\t"):
        src = f"see{blank}https://x.org/a_b{blank}and{blank}www.x.org{blank}or{blank}a_b@x.org{blank}mailto:m@x.org.\n"
        out = normalize(src)
        for link in ("<https://x.org/a_b>", "[www.x.org](http://www.x.org)", "<a_b@x.org>", "mailto:<m@x.org>."):
            assert link in out, (repr(blank), out)
    assert (
        normalize("https://x.org/a_b\nwww.x.org\na_b@x.org\n")
        == "<https://x.org/a_b>\n[www.x.org](http://www.x.org)\n<a_b@x.org>\n"
    )


def test_a_text_leaf_is_built_once_not_copied_per_piece(monkeypatch):
    """A paragraph of many lines is one text leaf of many pieces (each line, each soft break).
    Its value used to grow by ``+=`` on an attribute, a copy of the whole value per piece: 200,000
    lines took 2.5 s and the time grew with the square. Now the pieces are joined once: a leaf's
    value is set at most twice (its first piece, then the join), however many pieces it has."""
    from openkb.markdown import _inline

    sets: dict[int, int] = {}
    alive: list = []
    slot = _inline.Leaf.value  # the slot's descriptor

    class Counted(_inline.Leaf):
        __slots__ = ()

        @property
        def value(self):
            return slot.__get__(self)

        @value.setter
        def value(self, v):
            sets[id(self)] = sets.get(id(self), 0) + 1
            alive.append(self)  # no id is reused by a later leaf while counting
            slot.__set__(self, v)

    monkeypatch.setattr(_inline, "Leaf", Counted)
    body = "> " + "".join(f"line {i} *em* more\n" for i in range(2_000)) + "\nplain " * 3_000 + "\n"
    out = normalize(body)
    assert out.count("\n> line ") == 1_999 and out.count("*em*") == 2_000
    assert sets and max(sets.values()) <= 2, max(sets.values())


def test_dollar_runs_are_listed_once_per_parse_not_walked_per_opening_run(monkeypatch):
    """An opening run of ``$`` closes at the next run of exactly its length. The rule used to walk
    every later run for each opener, so runs of growing length (``$ $$ $$$ ...``, none closing)
    cost the number of runs times the paragraph (80 KB: 1.6 s). Now the runs are listed once per
    inline parse and looked up; what is text and what is math is unchanged."""
    listed: list[int] = []
    real = parser._DOLLARS

    class Counted:
        def finditer(self, text):
            listed.append(len(text))
            return real.finditer(text)

    monkeypatch.setattr(parser, "_DOLLARS", Counted())
    runs = " ".join("$" * k for k in range(1, 400))
    out = normalize(runs + "\n\nand $x$ then $$y$$ and [a $b$](u)\n")
    assert out.split("\n\n")[0] == runs.replace("$", "\\$")  # no run closes: all text
    assert out.split("\n\n")[1] == "and $x$ then $y$ and [a $b$](u)\n"  # the editor writes one $
    assert 0 < len(listed) <= 8, len(listed)  # once per parse of each paragraph, not per opener


def test_deeply_nested_emphasis_keeps_one_mark_per_kind(monkeypatch):
    """``*a **a *a **a ...`` opens thousands of marks. The mark set (one per kind, the innermost)
    is made from the top of each kind's open marks, not by walking all of them at every open and
    close (100 KB of such nesting took 44 s, growing with the square)."""
    from openkb.markdown import _inline
    from openkb.markdown.parser import parse

    seen: list[int] = []
    real = _inline._mark_set

    def spy(by_kind):
        seen.append(len(by_kind))
        return real(by_kind)

    monkeypatch.setattr(_inline, "_mark_set", spy)
    body = "*a **a " * 2_000 + "b" + " a** a*" * 2_000 + "\n"
    inline = next(t for t in parse(body) if t.type == "inline")
    out = _inline.leaves(inline.children or [])
    centre = next(leaf for leaf in out if "b" in leaf.value)
    assert [m[0] for m in centre.marks] == [_inline.EM, _inline.STRONG]  # one each, in schema order
    assert len(seen) == 8_000 and max(seen) <= 4  # per open and close: the kinds, not the depth
    assert normalize(normalize(body)) == normalize(body)


def test_a_label_with_no_closing_bracket_after_it_is_not_scanned(monkeypatch):
    """Each unclosed ``[`` used to scan ahead for its ``]`` at a cost in proportion to the nesting
    limit (``[a[a[a...``: 7.8 s per 100 KB). With no ``]`` after it before the paragraph's end a
    label cannot end: it is refused without the scan, and what has a ``]`` is scanned as before."""
    scanned: list[int] = []
    real = parser._scan_label

    def spy(state, start, disable_nested=False):
        scanned.append(start)
        return real(state, start, disable_nested)

    monkeypatch.setattr(parser, "_scan_label", spy)
    body = "[a" * 5_000 + " ![b" * 1_000 + " [^c" * 1_000
    assert normalize(body + "\n").count("\\[") == 7_000  # every bracket stays text
    assert scanned == []
    out = normalize("[a" * 3 + " [link](u) and ![i](p.png) [b\n")
    assert out == "\\[a\\[a\\[a [link](u) and ![i](p.png) \\[b\n" and scanned  # labels with a ] still scanned


class _CountingCache(dict):
    """An inline parse's cache of token ends that counts its reads: markdown-it's ``skipToken``
    asks ``pos in cache``, the label scan ``cache.get(pos)``."""

    reads = 0

    def get(self, key, default=None):
        _CountingCache.reads += 1
        return super().get(key, default)

    def __contains__(self, key):
        _CountingCache.reads += 1
        return super().__contains__(key)


def test_nested_labels_are_walked_once_not_again_by_each_enclosing_label(monkeypatch):
    """Each label used to walk every position up to its ``]`` (up to the nesting limit), so an
    enclosing label walked again what its nested labels had walked: 100 KB of ``![`` nested
    inside one another took 8-13 s. A scan now goes over a nested label it already knows in one
    step, so the cache reads stay in proportion to the length: under two per character, where
    they were over a hundred."""
    init = state_inline.StateInline.__init__

    def counting_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.cache = _CountingCache()

    monkeypatch.setattr(state_inline.StateInline, "__init__", counting_init)
    shapes = {
        "images": lambda n: "![" * n + "a" + "]" * n,
        "brackets": lambda n: "[" * n + "a" + "]" * n,
        "images with destinations": lambda n: "![" * n + "a" + "](u)" * n,
        "groups": lambda n: ("[a " * 3 + "![b](c) " + "[" * 20 + "x" + "]" * 20 + " ") * (n // 20),
    }
    for name, shape in shapes.items():
        body = shape(3_000)
        _CountingCache.reads = 0
        out = normalize(body + "\n")
        assert _CountingCache.reads < 2 * len(body), name  # ~130 per character before
        assert normalize(out) == out, name
    assert normalize("[" * 3_000 + "a" + "]" * 3_000 + "\n").count("\\[") == 3_000  # all text


_LABEL_PIECES = [
    "[",
    "[",
    "]",
    "]",
    "![",
    "](u)",
    "][r]",
    "[^",
    "\\[",
    "\\]",
    "`",
    "`]`",
    "a",
    " ",
    "*",
    "<",
    ">",
    "\n",
]


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(_LABEL_PIECES), max_size=80),
    depth=st.sampled_from([0, 3, 99, 100, 101, 130]),
    refs=st.booleans(),
)
def test_label_scans_answer_as_markdown_its_own(pieces, depth, refs):
    """The label scan (``_scan_label``) gives every answer markdown-it's ``parseLinkLabel`` gives:
    the same tokens and the same normalized text, around the nesting limit too."""
    body = "[" * depth + "".join(pieces) + "]" * depth + ("\n\n[r]: /x\n" if refs else "\n")

    def tokens():
        return [
            (t.type, t.content, t.attrs, [(c.type, c.content, c.attrs) for c in t.children or []])
            for t in parser.parse(body)
        ]

    ours = (tokens(), normalize(body))
    fast = parser._scan_label
    parser._scan_label = lambda state, start, disable_nested: parseLinkLabel(state, start, disable_nested)
    try:
        theirs = (tokens(), normalize(body))
    finally:
        parser._scan_label = fast
    assert ours == theirs


class _Run:
    """A backtick run as the check sees it (``start``, ``end``, ``group``), counting the times it
    is compared with another or asked for its text."""

    looks = 0

    def __init__(self, match: re.Match[str]) -> None:
        self._m = match

    def start(self) -> int:
        return self._m.start()

    def end(self) -> int:
        return self._m.end()

    def group(self) -> str:
        _Run.looks += 1
        return self._m.group()

    def __eq__(self, other: object) -> bool:
        _Run.looks += 1
        return self is other

    __hash__ = object.__hash__


def test_code_spans_across_lines_are_found_in_one_pass_over_the_backtick_runs(monkeypatch):
    """The check for inline code across a line break looked through the later backtick runs for
    each opening run, copying the list of runs each time, then searched the list for the closing
    run's place: a paragraph of many code spans cost the square of their number (80 KB of
    `` `a` `` took 14 s to validate). The next run of each length is now found in one pass: the
    runs are looked at a bounded number of times each (the search for a run's place compared it
    with every run before it), and the check's own lines grow with the number of spans."""
    validate_module = sys.modules["openkb.markdown.validate"]
    ticks = validate_module._TICKS

    class Runs:
        def finditer(self, text):
            return (_Run(m) for m in ticks.finditer(text))

    monkeypatch.setattr(validate_module, "_TICKS", Runs())
    _Run.looks = 0
    assert validate_module.validate("`a` " * 2_000 + "\nb\n") == []
    assert _Run.looks <= 2 * 4_000  # before, the search for each closing run's place: 4,004,000

    def steps(n: int) -> int:
        body = "`a` " * n + "\nb\n"
        return lines_run(validate_module.__file__, lambda: validate_module.validate(body))

    ratio = steps(8_000) / steps(2_000)
    assert ratio < 5, ratio  # x4 the spans: ~x4 the work
    assert validate_module.validate("`a` " * 8_000 + "\nb\n") == []
    issues = validate_module.validate("`a` " * 8_000 + "\n`code\nspan` y\n")
    assert [i.feature for i in issues] == ["inline_code"]


def _code_across_lines(paragraph: str) -> bool:
    """The rule read plainly: an unescaped backtick run opens, the next run of its length closes
    it, and the code between holds a line break; after a pair, the next run opens again."""
    runs = [m for m in re.finditer(r"`+", paragraph) if m.start() == 0 or paragraph[m.start() - 1] != "\\"]
    i = 0
    while i < len(runs):
        close = next((k for k in range(i + 1, len(runs)) if len(runs[k].group()) == len(runs[i].group())), None)
        if close is None:
            i += 1
        elif "\n" in paragraph[runs[i].end() : runs[close].start()]:
            return True
        else:
            i = close + 1
    return False


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["`", "`", "``", "```", "a", " ", "\n", "\\", "\\`"]), min_size=1, max_size=40))
def test_code_across_lines_is_found_as_the_rule_reads(pieces):
    paragraph = "".join(pieces).strip("\n").replace("\n\n", "\n")
    if not paragraph.strip() or paragraph.lstrip() != paragraph:
        return
    body = "x " + paragraph + "\n"
    blocks = [t for t in parser.parse(body) if t.type == "inline"]
    if len(blocks) != 1 or blocks[0].content != body.rstrip("\n"):
        return  # the pieces made more than one paragraph, or other blocks: not this check's input
    found = [i.feature for i in sys.modules["openkb.markdown.validate"].validate(body)]
    assert ("inline_code" in found) == _code_across_lines(blocks[0].content)
