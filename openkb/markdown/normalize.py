"""Write Markdown exactly as Milkdown Crepe 7.22.1 would save it.

Why a renderer of our own: mdformat is ~4x slower than a parse and differs from Milkdown in a
dozen places (escaping, tables, lists, autolinks, math). This walks the markdown-it token
stream once and mimics Milkdown's pipeline: markdown -> ProseMirror doc -> mdast ->
mdast-util-to-markdown with Milkdown's handlers. Notable, deliberately copied behaviours:

* a paragraph holding only an image becomes Crepe's ImageBlock. Crepe writes its resize ratio
  into the alt slot (``![1.00](src "caption")``); OpenKB's ``image_alt`` plugin (features.json)
  keeps the alt text instead and writes a ratio only for a resized image without alt text;
* bullets and thematic breaks use the registry's serializer options (``-``, ``---``); a
  ``---`` right after a paragraph in a tight list item gets a blank line (it would read back
  as a setext heading), as mdast-util-to-markdown does;
* empty paragraphs (not the last block) and empty table cells are written ``<br />``;
* when the document ends in anything but a paragraph or heading, Milkdown's trailing plugin
  appends an empty paragraph, so the file ends with a blank line;
* list "spread" follows micromark (blank line between items), not markdown-it's tight flag.

Parity is proven by ``tests/markdown/test_parity.py`` against outputs recorded from the shipped
editor configuration (``web/scripts/parity.mjs``; docs/markdown.md#normalization).
"""

from __future__ import annotations

import re
from typing import Any

from markdown_it.common.utils import unescapeAll
from markdown_it.token import Token

from ._inline import (
    _RAW_TEXT,
    destination,
    escape,
    image_block_alt,
    leaves,
    serialize_inline,
    title_part,
)
from .parser import parse_with_env, strip_task_marker, task_marker
from .registry import OPENKB_PLUGINS, SERIALIZER, bullet_markers, thematic_break

__all__ = ["normalize", "normalize_tokens", "js_length"]

_BR = frozenset({"<br />", "<br>", "<br >", "<br/>"})
_BACKTICKS = re.compile("`+")
_PHRASING = frozenset()
_LABEL_CTX = frozenset({"label"})
_KEEP_ALT = bool(OPENKB_PLUGINS.get("image_alt"))
_BULLET, _BULLET_OTHER = bullet_markers()
_HR = thematic_break()
# mdast-util-to-markdown joinDefaults: a dash rule right after a paragraph would turn it into
# a setext heading, so it gets a blank line even in a tight list item.
_DASH_RULE_NEEDS_BLANK = SERIALIZER.get("rule", "*") == "-" and not SERIALIZER.get("ruleSpaces")


def js_length(s: str) -> int:
    """String length as JavaScript counts it (UTF-16 code units): table padding uses it."""
    if s.isascii():
        return len(s)
    # surrogatepass: a lone surrogate is one code unit, as in JS
    return len(s.encode("utf-16-le", "surrogatepass")) >> 1


class Block:
    __slots__ = ("kind", "tok", "children", "data")

    def __init__(self, kind: str, tok: Token | None, children: list | None = None, data: Any = None):
        self.kind = kind
        self.tok = tok
        self.children = children if children is not None else []
        self.data = data


# --- tokens -> block tree ------------------------------------------------------------------


def _ends_in_open_fence(item: Block) -> bool:
    """The item's last line is inside a code fence or formula block left open, which runs to
    the end of the item. markdown-it calls the list loose for that blank line; micromark sees
    it as the fence's content, so the editor keeps the list tight (a closed fence ends on its
    non-blank closing line). Parity cases mk-596, mk-605; also through a nested list's last item."""
    if item.children and item.children[-1].kind == "list" and item.children[-1].children:
        return _ends_in_open_fence(item.children[-1].children[-1])
    last = item.children[-1].tok if item.children else None
    return (
        last is not None
        and last.type in ("fence", "math_block")
        and last.map is not None
        and item.tok is not None
        and item.tok.map is not None
        and last.map[1] == item.tok.map[1]
    )


def _build(tokens: list[Token], lines: list[str]) -> list[Block]:
    pos = 0
    n = len(tokens)

    depth = 0  # blockquotes around the current position

    def blank(line_no: int) -> bool:
        # a line holding only the markers of the quotes we are in is blank there; a `>` of a
        # quote inside (`- a\n  > b\n  >\n- c`) is that quote's content, not a blank line
        if not 0 <= line_no < len(lines):
            return False
        s = lines[line_no]
        for _ in range(depth):
            s = s.lstrip(" \t")
            s = s.removeprefix(">")
        return not s.strip(" \t")

    def seq(close: str | None) -> list[Block]:
        nonlocal pos, depth
        out: list[Block] = []
        while pos < n:
            tok = tokens[pos]
            t = tok.type
            if close is not None and t == close:
                pos += 1
                return out
            pos += 1
            if t == "paragraph_open":
                inline = tokens[pos]
                pos += 2  # inline, paragraph_close
                out.append(Block("paragraph", tok, data=inline.children or []))
            elif t == "heading_open":
                inline = tokens[pos]
                pos += 2
                out.append(Block("heading", tok, data=(int(tok.tag[1]), inline.children or [])))
            elif t == "hr":
                out.append(Block("hr", tok))
            elif t in ("fence", "code_block"):
                # the info string is read with escapes and entities decoded (`foo\+bar` -> `foo+bar`)
                info = unescapeAll(tok.info).strip() if t == "fence" else ""
                lang = info.split(None, 1)[0] if info else ""
                value = tok.content[:-1] if tok.content.endswith("\n") else tok.content
                if lang == "latex":
                    out.append(Block("math", tok, data=value))
                else:
                    out.append(Block("code", tok, data=(lang, value)))
            elif t == "math_block":
                v = tok.content
                out.append(Block("math", tok, data=v[:-1] if v.endswith("\n") else v))
            elif t == "html_block":
                first, _, rest = tok.content.partition("\n")
                if tok.content.strip() in _BR:  # Milkdown's spelling of an empty paragraph
                    out.append(Block("paragraph", tok, data=[]))
                elif first.strip() in _BR and rest.strip():
                    # our own `* <br />\n  1. x` re-reads as one HTML block (type 7 runs to a
                    # blank line): split it again so normalize stays idempotent
                    out.append(Block("paragraph", tok, data=[]))
                    sub, _env = parse_with_env(rest)
                    out.extend(_build(sub, rest.split("\n")))
                else:
                    out.append(Block("html", tok, data=tok.content.rstrip("\n")))
            elif t == "blockquote_open":
                depth += 1
                kids = seq("blockquote_close") or [Block("paragraph", None, data=[])]
                depth -= 1
                out.append(Block("blockquote", tok, kids))
            elif t in ("bullet_list_open", "ordered_list_open"):
                close_t = t.replace("_open", "_close")
                items: list[Block] = []
                while pos < n and tokens[pos].type == "list_item_open":
                    item_tok = tokens[pos]
                    pos += 1
                    checked = task_marker(tokens, pos)
                    if checked is not None:
                        strip_task_marker(tokens[pos + 1])
                    kids = seq("list_item_close")
                    spread = False
                    for _a, b in zip(kids, kids[1:]):
                        if b.tok is not None and b.tok.map and blank(b.tok.map[0] - 1):
                            spread = True
                            break
                    items.append(Block("item", item_tok, kids, (spread, checked)))
                pos += 1  # list close
                lspread = any(
                    it.tok.map and blank(it.tok.map[1] - 1) and not _ends_in_open_fence(it) for it in items[:-1]
                )
                ordered = t == "ordered_list_open"
                start = 1
                if ordered:
                    try:
                        start = int(tok.attrs.get("start", 1))
                    except (TypeError, ValueError):
                        start = 1
                out.append(Block("list", tok, items, (ordered, start, lspread)))
                del close_t
            elif t == "table_open":
                out.append(_table(tokens, tok))
            elif t == "footnote_reference_open":
                label = (tok.meta or {}).get("label", "")
                out.append(Block("footnote", tok, seq("footnote_reference_close"), label))
            elif t == "footnote_block_open":
                seq("footnote_block_close")
            # other closing tokens / unknown: skipped
        return out

    def _table(toks: list[Token], open_tok: Token) -> Block:
        nonlocal pos
        rows: list[list[list[Token]]] = []
        align: list[str] = []
        header = True
        row: list[list[Token]] = []
        while pos < n:
            tk = toks[pos]
            pos += 1
            if tk.type == "table_close":
                break
            if tk.type == "tr_open":
                row = []
            elif tk.type == "tr_close":
                rows.append(row)
                header = False
            elif tk.type in ("th_open", "td_open"):
                if header:
                    style = str(tk.attrs.get("style", ""))
                    align.append(style.split(":", 1)[1] if ":" in style else "")
            elif tk.type == "inline":
                row.append(tk.children or [])
        return Block("table", open_tok, data=(align, rows))

    return seq(None)


# --- block tree -> markdown ----------------------------------------------------------------


class _State:
    __slots__ = ("bullet_last",)

    def __init__(self) -> None:
        self.bullet_last: str | None = None


def _is_image_block(children: list[Token]) -> Token | None:
    items = leaves(children)
    if len(items) == 1 and items[0].kind == "image" and not items[0].marks:
        return next(c for c in children if c.type == "image")
    return None


def _paragraph(b: Block, last_root: bool) -> str:
    children = b.data
    if children and len(children) == 1 and children[0].type == "image":
        img = children[0]
        src = img.attrs.get("src", "")
        title = img.attrs.get("title") or ""
        alt = image_block_alt(_alt_text(img), _KEEP_ALT)
        alt = escape(alt, "[", "]", _LABEL_CTX) if alt else ""
        return "![" + alt + "](" + destination(str(src), str(title)) + title_part(str(title)) + ")"
    kept = [c for c in children if not (c.type == "html_inline" and c.content.strip() in _BR)]
    text = serialize_inline(kept, "\n", "\n", _PHRASING)
    if not text:
        return "" if last_root else "<br />"
    if text[0] in " \t" and _encodes_leading_blank(kept):
        text = f"&#x{ord(text[0]):X};" + text[1:]
    return text


def _alt_text(img: Token) -> str:
    """mdast ``image.alt``: the plain text of the alt's inline content (mdast-util-to-string)."""
    out: list[str] = []
    for c in img.children or []:
        if c.type in ("text", "text_special", "code_inline", "math_inline", "math_inline_double"):
            out.append(c.content)
        elif c.type == "softbreak":
            out.append("\n")
        elif c.type == "image":
            out.append(_alt_text(c))
    return "".join(out)


def _encodes_leading_blank(children: list[Token]) -> bool:
    """mdast-util-to-markdown encodes a blank that starts a paragraph (it would be eaten on the
    way back), but not in a text node the editor prints raw (blanks only) nor in the space it
    moves out of a mark."""
    items = leaves(children)
    if not items or items[0].kind != "text" or items[0].marks:
        return False
    seg = items[0].value.split("\n", 1)[0]
    return not (seg[-1:].isspace() and _RAW_TEXT.match(seg))


def _image_block_token(b: Block) -> bool:
    ch = b.data
    return b.kind == "paragraph" and bool(ch) and len(ch) == 1 and ch[0].type == "image"


def _join(left: Block, right: Block, parent_spread: bool | None) -> str:
    """mdast-util-to-markdown joinDefaults, for the node kinds Milkdown can produce."""
    if parent_spread is None:
        return "\n\n"
    if parent_spread:
        return "\n\n"
    if left.kind == "blockquote" and right.kind == "blockquote":
        return "\n\n"
    lk = "image" if _image_block_token(left) else left.kind
    rk = "image" if _image_block_token(right) else right.kind
    if _DASH_RULE_NEEDS_BLANK and lk in ("paragraph", "image") and rk == "hr":
        return "\n\n"
    if lk == "paragraph" and rk == "list":
        # (mdast also joins with a blank line when the list's first item has no children, but in
        # Milkdown every item starts with a paragraph (``_item``), so that rule never fires:
        # ``- + +`` is three tight levels in the editor)
        ordered, start, _ = right.data
        if ordered and start != 1:
            return "\n\n"
    tail = left
    while tail.kind in ("blockquote", "list", "item") and tail.children:
        tail = tail.children[-1]
    tk = "image" if _image_block_token(tail) else tail.kind
    if tk == "item":  # an empty item ends with the empty paragraph the editor gives it (``_item``)
        tk = "paragraph"
    if tk != "paragraph" and tk != "image":
        return "\n"
    if (lk in ("paragraph", "image") or left is not tail) and rk in ("paragraph", "image"):
        return "\n\n"
    return "\n"


def _flow(blocks: list[Block], st: _State, parent_spread: bool | None, root: bool = False) -> str:
    out: list[str] = []
    last = len(blocks) - 1
    for i, b in enumerate(blocks):
        out.append(_block(b, st, root and i == last))
        if b.kind != "list":
            st.bullet_last = None
        if i < last:
            out.append(_join(b, blocks[i + 1], parent_spread))
    return "".join(out)


def _indent(text: str, first: str, rest: str, blank_first: str | None = None) -> str:
    lines = text.split("\n")
    res = []
    for i, line in enumerate(lines):
        if i == 0:
            res.append((blank_first if blank_first is not None else first) if not line else first + line)
        else:
            res.append(rest + line if line else "")
    return "\n".join(res)


def _block(b: Block, st: _State, last_root: bool = False) -> str:
    k = b.kind
    if k == "paragraph":
        return _paragraph(b, last_root)
    if k == "heading":
        level, children = b.data
        if level < 3 and any(c.type in ("softbreak", "hardbreak") for c in children):
            # mdast writes a multi-line heading as setext, underline as long as the last line
            text = serialize_inline(children, "\n", "\n", _PHRASING)
            return text + "\n" + ("=" if level == 1 else "-") * (len(text) - text.rfind("\n") - 1)
        text = serialize_inline(children, "#" * level + " ", "\n", frozenset({"heading"}))
        return "#" * level + (" " + text if text else "")
    if k == "hr":
        return _HR
    if k == "code":
        lang, value = b.data
        longest = max(map(len, _BACKTICKS.findall(value)), default=0) if "`" in value else 0
        fence = "`" * max(3, longest + 1)
        return fence + lang + "\n" + value + ("\n" if value else "") + fence
    if k == "math":
        return "$$\n" + b.data + "\n$$" if b.data else "$$\n$$"
    if k == "html":
        return b.data
    if k == "blockquote":
        inner = _flow(b.children, st, None)
        return "\n".join(">" + (" " + ln if ln else "") for ln in inner.split("\n"))
    if k == "list":
        return _list(b, st)
    if k == "table":
        return _table_out(b)
    if k == "footnote":
        inner = _flow(b.children, st, None)
        head = "[^" + b.data + "]:"
        if not inner:
            return head
        return head + " " + _indent(inner, "", "    ")
    return ""


def _list(b: Block, st: _State) -> str:
    ordered, start, spread = b.data
    if ordered:
        bullet, other = ".", ")"
    else:
        bullet, other = _BULLET, _BULLET_OTHER
    # (mdast also switches marker when an item starts with a thematic break, but in Milkdown
    # every item starts with a paragraph, so that rule never fires.)
    if st.bullet_last is not None and bullet == st.bullet_last:
        bullet = other
    out: list[str] = []
    for idx, item in enumerate(b.children):
        marker = (str(start + idx) + bullet) if ordered else bullet
        out.append(_item(item, marker, st))
        if idx < len(b.children) - 1:
            out.append(_join(item, b.children[idx + 1], spread))
    st.bullet_last = bullet
    return "".join(out)


def _item(item: Block, marker: str, st: _State) -> str:
    spread, checked = item.data
    kids = item.children
    if not kids or kids[0].kind != "paragraph" or _image_block_token(kids[0]):
        # ProseMirror's list_item must start with a paragraph: Milkdown inserts an empty one.
        kids = [Block("paragraph", None, data=[])] + kids
    inner = _flow(kids, st, spread)
    size = len(marker) + 1
    if isinstance(checked, bool):  # the first child is always a paragraph by now
        inner = ("[x] " if checked else "[ ] ") + inner
    return _indent(inner, marker + " ", " " * size, marker)


def _table_out(b: Block) -> str:
    align, rows = b.data
    cols = len(align)
    ctx = frozenset({"table"})
    matrix: list[list[str]] = []
    for row in rows:
        cells = []
        for j in range(cols):
            children = row[j] if j < len(row) else []
            kept = [c for c in children if not (c.type == "html_inline" and c.content.strip() in _BR)]
            s = serialize_inline(
                kept, "|", "|", ctx
            )  # mdast-util-gfm-table: around = "|" (no tableCellPadding) if kept else ""
            cells.append(s if s else "<br />")
        matrix.append(cells)
    if len(matrix) == 1:
        matrix.append(["<br />"] * cols)
    lengths = [[js_length(c) for c in cells] for cells in matrix]
    widths = [0] * cols
    for row_lengths in lengths:
        for j, w in enumerate(row_lengths):
            if w > widths[j]:
                widths[j] = w
    delim = []
    for j, a in enumerate(align):
        before = ":" if a in ("left", "center") else ""
        after = ":" if a in ("right", "center") else ""
        size = max(1, widths[j] - len(before) - len(after))
        cell = before + "-" * size + after
        widths[j] = max(widths[j], len(cell))
        delim.append(cell)
    lines = []
    for r, cells in enumerate(matrix):
        lines.append(_row(cells, lengths[r], widths, align))
        if r == 0:
            lines.append(_row(delim, [len(c) for c in delim], widths, align, is_delim=True))
    return "\n".join(lines)


def _row(cells: list[str], lengths: list[int], widths: list[int], align: list[str], is_delim: bool = False) -> str:
    parts = []
    for j, c in enumerate(cells):
        gap = widths[j] - lengths[j]
        a = align[j]
        if is_delim and gap:
            c = c[:-1] + "-" * gap + c[-1] if c.endswith(":") else c + "-" * gap
            gap = 0
        if a == "right":
            parts.append(" " * gap + c)
        elif a == "center":
            left = (gap + 1) // 2
            parts.append(" " * left + c + " " * (gap - left))
        else:
            parts.append(c + " " * gap)
    return "| " + " | ".join(parts) + " |"


def normalize(markdown: str) -> str:
    """The bytes Milkdown would save for ``markdown``; idempotent."""
    tokens, _env = parse_with_env(markdown)
    return normalize_tokens(markdown, tokens)


def normalize_tokens(markdown: str, tokens: list[Token]) -> str:
    """:func:`normalize` on the tokens of an existing ``parse_with_env(markdown)``.

    Consumes the tokens: the walk edits them in place (task markers are stripped), so they
    must not be read again afterwards.
    """
    lines = markdown.split("\n")
    blocks = _build(tokens, lines)
    if not blocks:
        return ""
    st = _State()
    text = _flow(blocks, st, None, root=True)
    last = blocks[-1]
    if last.kind not in ("paragraph", "heading", "html") or _image_block_token(last):
        text += "\n\n"  # trailing empty paragraph appended by @milkdown/plugin-trailing
    if text and not text.endswith("\n"):
        text += "\n"
    return text
