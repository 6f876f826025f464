"""Inline serialization the way Milkdown does it: ProseMirror marks first, then remark-stringify.

The trap this module exists for: Milkdown does not print the inline tree it parsed. It keeps
flat text runs with *mark sets* (ProseMirror), and on save rebuilds nesting from mark priority,
so ``[**a**](u)`` and ``**[a](u)**`` are the same document and both come out as the latter.
Spaces at the edge of a mark are pushed outside it (``[a ](u)`` -> ``[a](u) ``), adjacent runs
with equal marks merge (two adjacent links to one URL become one link) and the text escaper is
mdast-util-to-markdown's, plus Milkdown's shortcut that prints text ending in whitespace raw.

Only what the markdown-it token stream can express is modelled; see ``normalize`` for blocks.
"""

from __future__ import annotations

import re
import unicodedata
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from markdown_it.token import Token

# Mark kinds. Order = ProseMirror schema rank in Milkdown (commonmark marks, then gfm);
# inline code has priority 100 so it always nests innermost.
EM, STRONG, CODE, LINK, STRIKE = "em", "strong", "code", "link", "strike"
_RANK = {EM: 0, STRONG: 1, LINK: 3, STRIKE: 4, CODE: 10}

Mark = tuple  # (kind, *attrs); equality == ProseMirror Mark.eq


class Leaf:
    """One ProseMirror inline node: text, hardbreak, image, math, footnote ref or raw html."""

    __slots__ = ("kind", "value", "marks", "attrs")

    def __init__(self, kind: str, value: str, marks: tuple, attrs: Any = None) -> None:
        self.kind = kind
        self.value = value
        self.marks = marks
        self.attrs = attrs


_OPEN = {"em_open": EM, "strong_open": STRONG, "s_open": STRIKE, "link_open": LINK}
_CLOSE = frozenset({"em_close", "strong_close", "s_close", "link_close"})
_CODE_MARK: Mark = (CODE,)
_CODE_EXTRA = (_CODE_MARK,)


def leaves(children: list[Token]) -> list[Leaf]:
    """Flatten markdown-it inline tokens into mark-carrying leaves (merging like ProseMirror)."""
    out: list[Leaf] = []
    stack: list[Mark] = []
    # the open marks of each kind, innermost last: the mark set is made from their tops (at most
    # four kinds), not from the whole stack, which ``*a **a *a ...`` makes thousands deep (each
    # open and close walked it: 100 KB of such nesting took 44 s)
    by_kind: dict[str, list[Mark]] = {}
    marks: tuple = ()
    last: Leaf | None = None  # out[-1] if it is a text leaf (the only kind that merges)
    # the pieces of ``last``'s value, joined when it is complete: ``last.value += value`` copied
    # the whole value per piece (an attribute gets no in-place concatenation), so a paragraph of
    # 200,000 lines took 2.5 s here, growing with the square of its length
    parts: list[str] = []

    for tok in children:
        t = tok.type
        if t == "text" or t == "text_special" or t == "softbreak" or t == "code_inline":
            if t == "softbreak":
                value, m = "\n", marks
            elif t == "code_inline":
                value, m = tok.content, marks + _CODE_EXTRA
            else:
                value, m = tok.content, marks
            if not value:
                continue
            if last is not None and last.marks == m:
                parts.append(value)
            else:
                if len(parts) > 1 and last is not None:
                    last.value = "".join(parts)
                last = Leaf("text", value, m)
                parts = [value]
                out.append(last)
            continue
        kind = _OPEN.get(t)
        if kind is not None:
            if kind == LINK:
                mark: Mark = (LINK, tok.attrs.get("href", ""), tok.attrs.get("title") or "")
            elif kind == STRIKE:
                mark = (STRIKE,)
            else:
                mark = (kind, tok.markup[0])
            stack.append(mark)
            by_kind.setdefault(mark[0], []).append(mark)
            marks = _mark_set(by_kind)
            continue
        if t in _CLOSE:
            if stack:
                by_kind[stack.pop()[0]].pop()
            marks = _mark_set(by_kind)
            continue
        if t == "hardbreak":
            leaf = Leaf("break", "", marks)
        elif t == "image":
            alt = "".join(_plain(c) for c in tok.children or [])
            leaf = Leaf("image", alt, marks, (tok.attrs.get("src", ""), tok.attrs.get("title") or ""))
        elif t == "math_inline" or t == "math_inline_double":
            leaf = Leaf("math", _strip_math_padding(tok.content), marks)
        elif t == "footnote_ref":
            leaf = Leaf("fnref", (tok.meta or {}).get("label", ""), marks)
        elif t == "html_inline":
            leaf = Leaf("html", tok.content, marks)
        else:  # unknown inline token: keep its text rather than dropping it
            value = tok.content
            if not value:
                continue
            if last is not None and last.marks == marks:
                parts.append(value)
            else:
                if len(parts) > 1 and last is not None:
                    last.value = "".join(parts)
                last = Leaf("text", value, marks)
                parts = [value]
                out.append(last)
            continue
        if len(parts) > 1 and last is not None:
            last.value = "".join(parts)
        parts = []
        out.append(leaf)
        last = None
    if len(parts) > 1 and last is not None:
        last.value = "".join(parts)
    return out


def _strip_math_padding(value: str) -> str:
    """remark-math reads ``$ x $`` like a code span: one padding space each side is not content.

    Without this, the serializer's padding (added when the value starts and ends with a space)
    would grow by one space on every save.
    """
    if len(value) >= 2 and value[0] == " " and value[-1] == " " and value.strip(" "):
        return value[1:-1]
    return value


def _mark_set(by_kind: dict[str, list[Mark]]) -> tuple:
    """A ProseMirror mark set holds one mark per type, the innermost (an inner link replaces an
    outer one), in the schema's order."""
    return tuple(sorted((open_[-1] for open_ in by_kind.values() if open_), key=lambda m: _RANK[m[0]]))


def _plain(tok: Token) -> str:
    if tok.type in ("softbreak", "hardbreak"):
        return "\n" if tok.type == "hardbreak" else " "
    if tok.children:
        return "".join(_plain(c) for c in tok.children)
    if tok.type == "image":
        return "".join(_plain(c) for c in tok.children or [])
    return tok.content


# --- mdast rebuild (Milkdown SerializerState.withMark / closeEndedMarks / moveSpaces) ---------


class _Node:
    __slots__ = ("mark", "children")

    def __init__(self, mark: Mark) -> None:
        self.mark = mark
        self.children: list[Any] = []


def build_tree(items: list[Leaf]) -> list[Any]:
    """Leaves -> nested mark nodes; returns children of the paragraph."""
    root = _Node(("root",))
    # the open mark nodes, outermost first; every one spans leaves until a leaf lacks its mark
    open_marks: list[Mark] = []
    open_nodes: list[_Node] = []
    n = len(items)
    for i in range(n):
        leaf = items[i]
        lm = leaf.marks
        if lm:
            # a leaf's marks are one per kind, so checking against the marks open before this
            # leaf and against those it opened itself is the same
            for m in lm:
                if m[0] != CODE and m not in open_marks:
                    open_marks.append(m)
                    open_nodes.append(_Node(m))
        parent = open_nodes[-1] if open_nodes else root
        if leaf.kind == "text" and _CODE_MARK in lm:
            # inline code is a value-carrying mark: the text is its value
            parent.children.append(("code_value", leaf.value))
        else:
            parent.children.append(leaf)
        if not open_marks:
            continue
        nxt = items[i + 1].marks if i + 1 < n else ()
        keep = 0
        depth = len(open_marks)
        while keep < depth and open_marks[keep] in nxt:
            keep += 1
        while depth > keep:
            open_marks.pop()
            node = open_nodes.pop()
            depth -= 1
            _push_trimmed(open_nodes[-1] if open_nodes else root, node)
    return root.children


def _push_trimmed(parent: _Node, node: _Node) -> None:
    ch = node.children
    start = end = ""
    if ch and isinstance(ch[-1], Leaf) and ch[-1].kind == "text" and ch[-1].value.endswith(" "):
        v = ch[-1].value
        t = v.rstrip(" ")
        end = v[len(t) :]
        ch[-1] = Leaf("text", t, ch[-1].marks)
    if ch and isinstance(ch[0], Leaf) and ch[0].kind == "text" and ch[0].value.startswith(" "):
        v = ch[0].value
        t = v.lstrip(" ")
        start = v[: len(v) - len(t)]
        ch[0] = Leaf("text", t, ch[0].marks)
    siblings = parent.children
    if start:
        siblings.append(Leaf("text", start, ()))
    prev = siblings[-1] if siblings else None
    if isinstance(prev, _Node) and prev.mark == node.mark and node.mark[0] != CODE and not start:
        prev.children.extend(node.children)  # maybeMergeChildren
    else:
        siblings.append(node)
    if end:
        siblings.append(Leaf("text", end, ()))


# --- serialization -------------------------------------------------------------------------


def _is_ws_or_punct(ch: str) -> bool:
    if not ch or ch.isspace():
        return True
    return unicodedata.category(ch)[0] in "PS"


_ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_CAND = re.compile(r"[\\*_\[\]`~$<&!#>=+\-.):@|]")
_RAW_TEXT = re.compile(r"\s+\Z")  # a text node the editor prints as it is: blanks only
_LINK_PAREN = re.compile(r"\](?=\()")
_BACKSLASH = re.compile(r"\\")
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_BREAK_ROOM = " \t"


def _at_break(value: str, pos: int, digits: bool = False) -> bool:
    i = pos - 1
    if digits:
        j = i
        while j >= 0 and value[j].isdigit() and value[j].isascii():
            j -= 1
        if j == i:
            return False
        i = j
    while i >= 0 and value[i] in _BREAK_ROOM:
        i -= 1
    return i >= 0 and value[i] in "\r\n"


def escape(text: str, before: str, after: str, ctx: frozenset[str]) -> str:
    """mdast-util-to-markdown ``safe()`` for phrasing text with Milkdown's unsafe list.

    ``ctx`` names the constructs we are in: ``label`` (link text / alt), ``table``,
    ``heading``.
    """
    if "(" not in text and not _CAND.search(text):
        # nothing in the text can be unsafe, whatever surrounds it (no backslash either)
        return text
    value = before + text + after
    off = len(before)
    end = off + len(text)
    unsafe: dict[int, tuple[bool, bool]] = {}  # position -> (has before-cond, has after-cond)
    for m in _CAND.finditer(value):
        p = m.start()
        c = value[p]
        nxt = value[p + 1] if p + 1 < len(value) else ""
        prv = value[p - 1] if p > 0 else ""
        hit: tuple[bool, bool] | None = None
        if c in "*_[`~$":
            hit = (False, False)
        elif c == "]":
            hit = (False, False) if "label" in ctx else None
        elif c == "<":
            hit = (False, True) if (nxt in "!/?" and nxt) or (nxt.isascii() and nxt.isalpha()) else None
        elif c == "&":
            hit = (False, True) if nxt == "#" or (nxt.isascii() and nxt.isalpha()) else None
        elif c == "!":
            hit = (False, True) if nxt == "[" else None
        elif c == "\\":
            hit = (False, True) if nxt in ("\n", "\r") and nxt else None
        elif c == "#":
            if _at_break(value, p):
                hit = (True, False)
            elif "heading" in ctx and (nxt in ("\n", "\r") or p + 1 >= len(value)):
                hit = (False, True)
        elif c in ">=":
            hit = (True, False) if _at_break(value, p) else None
        elif c == "+":
            hit = (True, True) if nxt in (" ", "\t", "\n", "\r") and nxt and _at_break(value, p) else None
        elif c == "-":
            if _at_break(value, p) and nxt and nxt in " \t\r\n-:|":
                hit = (True, True)
        elif c == ".":
            if _at_break(value, p, digits=True) and (not nxt or nxt in " \t\r\n"):
                hit = (True, True)
            elif "label" not in ctx and prv in ("w", "W") and nxt and (nxt in _WORD or nxt in "-."):
                hit = (True, True)
        elif c == ")":
            hit = (True, False) if _at_break(value, p, digits=True) else None
        elif c == ":":
            if _at_break(value, p) and nxt == "-":
                hit = (True, True)
            elif "label" not in ctx and prv in ("p", "s") and nxt == "/":
                hit = (True, True)
        elif c == "@":
            if "label" in ctx:
                pass
            elif prv and (prv in _WORD or prv in "+-.") and nxt and (nxt in _WORD or nxt in "-."):
                hit = (True, True)
        elif c == "|":
            if "table" in ctx:
                hit = (False, False)
            elif _at_break(value, p) and nxt and nxt in "\t :-":
                hit = (True, True)
        if c == "(" and prv == "]":
            hit = (True, False)
        if hit is not None:
            unsafe[p] = hit
    if "](" in value:
        for m in _LINK_PAREN.finditer(value):
            unsafe[m.start() + 1] = (True, False)
    if not unsafe:
        return _escape_backslashes(text, after)
    positions = sorted(unsafe)
    out: list[str] = []
    start = off
    i = 0
    n = len(positions)
    while i < n:
        p = positions[i]
        if p < start or p >= end:
            i += 1
            continue
        c = value[p]
        if (
            c == "_"
            and p > 0
            and not _is_ws_or_punct(value[p - 1])
            and (p - 1) not in unsafe
            and not (p - 1 == off and off > 0 and value[off - 1] in "*_")
        ):
            seq_end = p + 1
            while seq_end < end and value[seq_end] == "_":
                seq_end += 1
            skip = seq_end - p - 1
            if (
                i + skip < n
                and positions[i + skip] == seq_end - 1
                and seq_end < len(value)
                and not _is_ws_or_punct(value[seq_end])
                and seq_end not in unsafe
                and not (seq_end == end - 1 and end < len(value) and value[end] in "*_")
            ):
                i += skip + 1
                continue
        b, a = unsafe[p]
        nxt_u = unsafe.get(p + 1)
        prv_u = unsafe.get(p - 1)
        if (p + 1 < end and nxt_u is not None and a and not nxt_u[0] and not nxt_u[1]) or (
            p - 1 >= off and prv_u is not None and b and not prv_u[0] and not prv_u[1]
        ):
            i += 1
            continue
        if start != p:
            out.append(_escape_backslashes(value[start:p], "\\"))
        start = p + 1
        if c in _ASCII_PUNCT:
            out.append("\\" + c)
        else:
            out.append(f"&#x{ord(c):X};")
        i += 1
    out.append(_escape_backslashes(value[start:end], after))
    return "".join(out)


def _escape_backslashes(s: str, after: str) -> str:
    if "\\" not in s:
        return s
    whole = s + after
    res = []
    last = 0
    for m in _BACKSLASH.finditer(s):
        p = m.start()
        if p + 1 < len(whole) and whole[p + 1] in _ASCII_PUNCT:
            res.append(s[last:p])
            res.append("\\")
            last = p
    res.append(s[last:])
    return "".join(res)


def text_out(value: str, before: str, after: str, ctx: frozenset[str]) -> str:
    # Milkdown hands remark one text node per line (the newline starts the next one). Its text
    # handler printed any node ending in a blank untouched (`\$5 and \$6 ` before a link came
    # back as a formula); OpenKB's editor prints only a blank-only node so (web/src/editor/
    # plugins.ts escapedText), every other node is escaped.
    if "\n" not in value:
        if value[-1:].isspace() and _RAW_TEXT.match(value):
            return value
        return escape(value, before, after, ctx)
    parts = value.split("\n")
    segs = [parts[0]] + ["\n" + p for p in parts[1:]]
    if not segs[0]:
        segs.pop(0)
    out = []
    prev = before
    for i, seg in enumerate(segs):
        nxt = segs[i + 1][:1] if i + 1 < len(segs) else after
        s = seg if seg[-1:].isspace() and _RAW_TEXT.match(seg) else escape(seg, prev, nxt, ctx)
        out.append(s)
        if s:
            prev = s[-1]
    return "".join(out)


def _fence_size(value: str, char: str, runs_re: re.Pattern[str]) -> int:
    """The shortest run of ``char`` that does not occur in ``value`` as a whole run."""
    if char not in value:
        return 1
    runs = {len(r) for r in runs_re.findall(value)}
    size = 1
    while size in runs:
        size += 1
    return size


def _pad(value: str, char: str) -> bool:
    return bool(_NON_BLANK.search(value)) and (
        (value[:1] in (" ", "\r", "\n") and value[-1:] in (" ", "\r", "\n"))
        or value.startswith(char)
        or value.endswith(char)
    )


def code_span(value: str, ctx: frozenset[str]) -> str:
    seq = "`" * _fence_size(value, "`", _BACKTICK_RUNS)
    if _pad(value, "`"):
        value = " " + value + " "
    if "table" in ctx:
        value = value.replace("|", "\\|")
    return seq + value + seq


# A line break inside inline math that the next line would turn into a block start. The editor
# (mdast-util-math's inlineMath) writes such a break as a space: it cannot escape inside math.
# The set is every ``atBreak`` unsafe pattern the editor's serializer holds (mdast-util-to-
# markdown's unsafe.js, mdast-util-gfm-table's, mdast-util-math's); ``$`` is JS's end of input.
_MATH_UNSAFE_BREAK = re.compile(
    r"[\r\n](?=[\t ]*(?:[#=>\[_`~]|\d+\)|\d+\.(?:[ \t\r\n]|\Z)|\*[ \t\r\n*]|\+[ \t\r\n]"
    r"|-[ \t\r\n:|-]|<[!/?A-Za-z]|\|[\t :-]|:-|\$\$))"
)


def inline_math(value: str, ctx: frozenset[str] = frozenset()) -> str:
    size = _fence_size(value, "$", _DOLLAR_RUNS)
    if _pad(value, "$"):
        value = " " + value + " "
    value = _MATH_UNSAFE_BREAK.sub(" ", value)  # parity cases mk-597, mk-615
    if "table" in ctx:
        # a `|` in a cell's formula was written `\|` (a bare one ends the cell); micromark keeps
        # the backslash in the formula's text, markdown-it took it out with the cell split
        value = value.replace("|", "\\|")
    return "$" * size + value + "$" * size


_BACKTICK_RUNS = re.compile("`+")
_DOLLAR_RUNS = re.compile(r"\$+")
_NON_BLANK = re.compile(r"[^ \r\n]")
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_HEX = re.compile(r"0[xX][0-9a-fA-F]+")
_CONTROL = re.compile(r"[\x00-\x20\x7f]")
_PARENS = re.compile(r"[()]")
_AMP_REF = re.compile(r"&(?=[#A-Za-z])")


def js_to_fixed2(alt: str) -> str:
    """``Number(alt || 1)`` then ``toFixed(2)``, as Crepe's ImageBlock does with the alt slot."""
    s = alt.strip()
    ratio: Decimal
    if not alt:
        ratio = Decimal(1)
    else:
        try:
            if _DECIMAL.fullmatch(s):
                ratio = Decimal(s)
            elif _HEX.fullmatch(s):
                ratio = Decimal(int(s, 16))
            elif s == "":
                ratio = Decimal(0)
            else:
                ratio = Decimal("NaN")
        except InvalidOperation:
            ratio = Decimal("NaN")
        if ratio.is_nan() or ratio == 0:
            ratio = Decimal(1)
        ratio = Decimal(float(ratio))  # JS keeps a double, toFixed rounds its exact value
    return str(ratio.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


# The resize ratio as the image block writes it into the alt slot (``toFixed(2)``). With the
# ``image_alt`` plugin only this exact shape is read as a ratio; anything else is alt text.
RATIO_ALT = re.compile(r"[0-9]+\.[0-9]{2}\Z")


def image_block_alt(alt: str, keep_alt: bool) -> str:
    """What the image block writes into the alt slot for an image read with alt ``alt``.

    ``keep_alt`` (OpenKB's ``image_alt`` plugin, features.json): alt text round-trips; a
    ratio-shaped alt (``1.50``) is the resize ratio, written back as is, except ratio 1 (and
    Crepe's 0 -> 1), which is the unresized image and is written with an empty alt.
    Without the plugin this is Crepe's default: ``Number(alt || 1)`` then ``toFixed(2)``.
    """
    if not keep_alt:
        return js_to_fixed2(alt)
    if not RATIO_ALT.match(alt):
        return alt
    fixed = js_to_fixed2(alt)
    return "" if fixed == "1.00" else fixed


_AUTOLINK_OK = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>\x00-\x20\x7f]*\Z")


def _plain_children(children: list[Any]) -> str | None:
    """The text of a link's content, or None if it holds anything but plain text."""
    parts = []
    for ch in children:
        if isinstance(ch, Leaf) and ch.kind == "text":
            parts.append(ch.value)
        else:
            return None
    return "".join(parts)


def destination(url: str, title: str = "") -> str:
    if (not url and title) or _CONTROL.search(url):
        return "<" + url.replace("\\", "\\\\").replace("<", "\\<").replace(">", "\\>") + ">"
    url = _escape_backslashes(url, "")
    if "(" in url or ")" in url:
        url = _PARENS.sub(lambda m: "\\" + m.group(0), url)
    if "&" in url:  # `&x`/`&#` would read as a character reference (mdast unsafe pattern)
        url = _AMP_REF.sub("\\&", url)
    return url


def title_part(title: str) -> str:
    if not title:
        return ""
    return ' "' + _escape_backslashes(title, '"').replace('"', '\\"') + '"'


def phrasing(children: list[Any], before: str, after: str, ctx: frozenset[str]) -> str:
    """containerPhrasing: each child sees the last char before it and the first char after."""
    n = len(children)
    if n == 1:
        return _node_out(children[0], before, after, ctx)
    out: list[str] = []
    prev = before
    for i in range(n):
        if i + 1 < n:
            nxt = children[i + 1]
            nxt_after = nxt.value[:1] if type(nxt) is Leaf and nxt.kind == "text" else _peek(nxt)
        else:
            nxt_after = after
        s = _node_out(children[i], prev, nxt_after, ctx)
        out.append(s)
        if s:
            prev = s[-1]
    return "".join(out)


_PEEK = {"break": "\\", "image": "!", "math": "$", "fnref": "[", "html": "<"}
_LABEL_CTX: dict[frozenset[str], frozenset[str]] = {}


def _label(ctx: frozenset[str]) -> frozenset[str]:
    """``ctx`` inside a link label or image alt."""
    got = _LABEL_CTX.get(ctx)
    if got is None:
        got = _LABEL_CTX[ctx] = ctx | {"label"}
    return got


def _peek(node: Any) -> str:
    if isinstance(node, Leaf):
        if node.kind == "text":
            return node.value[:1]
        return _PEEK.get(node.kind, "")
    if isinstance(node, tuple):
        return "`"
    kind = node.mark[0]
    if kind in (EM, STRONG):
        return node.mark[1]
    if kind == STRIKE:
        return "~"
    if kind == LINK:
        return "<" if _as_autolink(node) else "["
    return ""


def _as_autolink(node: _Node) -> bool:
    _, url, title = node.mark
    if title:
        return False
    text = _plain_children(node.children)
    if text is None or not _AUTOLINK_OK.match(url):
        return False
    return text == url or ("mailto:" + text) == url


def _node_out(node: Any, before: str, after: str, ctx: frozenset[str]) -> str:
    if isinstance(node, tuple):  # ("code_value", text)
        return code_span(node[1], ctx)
    if isinstance(node, Leaf):
        k = node.kind
        if k == "text":
            return text_out(node.value, before, after, ctx)
        if k == "break":
            return "\\\n"
        if k == "image":
            src, title = node.attrs
            alt = escape(node.value, "[", "]", _label(ctx)) if node.value else ""
            return "![" + alt + "](" + destination(src, title) + title_part(title) + ")"
        if k == "math":
            return inline_math(node.value, ctx)
        if k == "fnref":
            return "[^" + node.value + "]"
        return node.value  # raw html (rejected by validate; kept verbatim here)
    kind = node.mark[0]
    if kind in (EM, STRONG):
        m = node.mark[1] * (1 if kind == EM else 2)
        return m + phrasing(node.children, m[-1], m[0], ctx) + m
    if kind == STRIKE:
        return "~~" + phrasing(node.children, "~", "~", ctx) + "~~"
    if kind == LINK:
        _, url, title = node.mark
        if _as_autolink(node):
            text = _plain_children(node.children) or ""
            return "<" + (text if url.startswith("mailto:") and text != url else url) + ">"
        label = phrasing(node.children, "[", "]", _label(ctx))
        return "[" + label + "](" + destination(url, title) + title_part(title) + ")"
    if kind == CODE:  # pragma: no cover - code never wraps nodes
        return ""
    return phrasing(node.children, before, after, ctx)


def serialize_inline(children: list[Token], before: str, after: str, ctx: frozenset[str]) -> str:
    items = leaves(children)
    # Milkdown drops a trailing hard break in a text block (serializeText).
    while items and items[-1].kind == "break":
        items.pop()
    return phrasing(build_tree(items), before, after, ctx)
