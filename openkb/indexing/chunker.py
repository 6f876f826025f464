"""Heading-aware chunking of a version's normalized Markdown into ``document_chunks`` rows.

The chunker is a pure function of (markdown, sizes): the same input always gives the same
chunks, which is what lets an index job reuse a version's chunk rows (and their ids, which are
the Milvus primary keys) instead of re-embedding them.

How it cuts, and why:

* It walks the top-level blocks markdown-it finds (the same parser as the dialect validator,
  ``openkb.markdown.parser``) and cuts by the *source lines* of those blocks, so every
  ``content_markdown`` is a verbatim slice of the document (links, math and footnotes intact).
* Every heading starts a section; ``heading_path`` is the chain of enclosing headings. A section
  too small to stand alone (a heading with one line under it) is merged with the sections *below*
  it (deeper headings), never with a sibling: a chunk never mixes two unrelated topics.
* Sizes are counted in estimated model tokens (``count_tokens``): one per CJK character, about
  one per English word. That makes one budget right for Chinese, English and mixed text, where a
  character budget would give Chinese chunks five times the content of English ones.
* A block larger than the hard maximum is split only at safe points: a list between items, a
  table between rows (the header row repeated in every piece, so each piece is still a table), a
  code block between lines (each piece re-fenced), prose between lines and then between
  sentences. Nothing is cut mid-row or mid-line unless a single line/sentence alone is over the
  maximum.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from markdown_it.token import Token

from openkb.markdown.extract import image_alt
from openkb.markdown.parser import parse

CHUNKER_VERSION = "md-heading-1"
TARGET_TOKENS = 320  # pack blocks up to this
MAX_TOKENS = 512  # a single block above this is split
MIN_TOKENS = 64  # a section smaller than this merges with its subsections

_CJK = (
    r"\u2e80-\u2eff\u2f00-\u2fdf\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31bf\u3400-\u4dbf"
    r"\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
)
_WORD_RE = re.compile(r"\w+", re.UNICODE)
_CJK_RE = re.compile(rf"[{_CJK}]")
# A sentence ends at CJK end punctuation, or at Latin end punctuation followed by a space.
_SENTENCE_END = re.compile(r"(?<=[。！？；!?;])|(?<=[.:])(?=\s)")
_TAG_RE = re.compile(r"<[^>]*>")


def count_tokens(text: str) -> int:
    """Estimated model tokens: each CJK character counts one, each other word one plus one per
    further eight characters (long identifiers split into several subword tokens)."""
    n = len(_CJK_RE.findall(text))
    for w in _WORD_RE.findall(_CJK_RE.sub(" ", text)):
        n += 1 + (len(w) - 1) // 8
    return n


@dataclass(frozen=True)
class Chunk:
    ordinal: int
    heading_path: list[str]
    content_text: str
    content_markdown: str
    token_count: int
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Unit:
    """A piece of the document that is never split further: a block, or a safe part of one."""

    kind: str
    start: int  # first source line (0-based)
    end: int  # one past the last source line
    markdown: str
    text: str
    tokens: int


@dataclass
class _Section:
    level: int  # 0 for text before the first heading
    path: list[str]
    units: list[_Unit] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(u.tokens for u in self.units)


@dataclass
class _Group:
    """The units of one chunk in the making, with their token total and how many are not
    headings kept as they are added: summing them again for every unit made a page of many
    small blocks (20,000 images without alt text: no tokens, one chunk) quadratic."""

    path: list[str]
    units: list[_Unit] = field(default_factory=list)
    tokens: int = 0
    body: int = 0  # units that are not headings

    def add(self, u: _Unit) -> None:
        self.units.append(u)
        self.tokens += u.tokens
        self.body += u.kind != "heading"

    def pop(self) -> _Unit:
        u = self.units.pop()
        self.tokens -= u.tokens
        self.body -= u.kind != "heading"
        return u


# --- plain text --------------------------------------------------------------------------------


def _inline_text(children: Sequence[Token] | None) -> str:
    out: list[str] = []
    for c in children or ():
        if c.type in ("text", "code_inline", "math_inline", "math_inline_double"):
            out.append(c.content)
        elif c.type in ("softbreak", "hardbreak"):
            out.append(" ")
        elif c.type == "image":
            out.append(image_alt(c))  # a resize ratio in the alt slot is not text (docs/markdown.md)
        # footnote refs, html_inline, link/strong/em open+close carry no words of their own
    return "".join(out)


def plain_text_of(tokens: Sequence[Token]) -> str:
    """Plain text of a block-token stream: one line per paragraph/heading/row/code line."""
    lines: list[str] = []
    cells: list[str] | None = None
    for t in tokens:
        if t.type == "tr_open":
            cells = []
        elif t.type == "tr_close":
            if cells is not None:
                lines.append(" | ".join(c.strip() for c in cells))
            cells = None
        elif t.type == "inline":
            text = _inline_text(t.children).strip()
            if cells is not None:
                cells.append(text)
            elif text:
                lines.append(text)
        elif t.type in ("fence", "code_block", "math_block"):
            body = t.content.strip("\n")
            if body.strip():
                lines.append(body)
        elif t.type == "html_block":
            body = " ".join(_TAG_RE.sub(" ", t.content).split())
            if body:
                lines.append(body)
    return "\n".join(lines)


def markdown_plain_text(markdown: str) -> str:
    return plain_text_of(parse(markdown))


# --- blocks ------------------------------------------------------------------------------------

_KIND = {
    "paragraph_open": "paragraph",
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "table_open": "table",
    "blockquote_open": "blockquote",
    "fence": "code",
    "code_block": "code",
    "math_block": "math",
    "html_block": "html",
    "footnote_reference_open": "footnote",
    "hr": "hr",
}


@dataclass
class _Block:
    kind: str
    start: int
    end: int
    tokens: list[Token]
    level: int = 0  # heading level for headings
    heading: str = ""


def _blocks(tokens: list[Token], n_lines: int) -> list[_Block]:
    out: list[_Block] = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t.level != 0 or t.nesting == -1:
            i += 1
            continue
        j = i
        if t.nesting == 1:  # find the matching close at level 0
            depth = 0
            while j < len(tokens):
                depth += tokens[j].nesting
                if depth == 0:
                    break
                j += 1
        span = tokens[i : j + 1]
        start, end = t.map if t.map else (out[-1].end if out else 0, out[-1].end if out else 0)
        end = min(max(end, start), n_lines)
        if t.type == "heading_open":
            out.append(_Block("heading", start, end, span, level=int(t.tag[1]), heading=plain_text_of(span)))
        elif t.type in _KIND and _KIND[t.type] != "hr":
            out.append(_Block(_KIND[t.type], start, end, span))
        i = j + 1
    return out


def _slice(lines: list[str], start: int, end: int) -> str:
    return "\n".join(lines[start:end]).strip("\n")


def _unit(
    kind: str, lines: list[str], start: int, end: int, text: str | None = None, markdown: str | None = None
) -> _Unit:
    md = markdown if markdown is not None else _slice(lines, start, end)
    txt = text if text is not None else markdown_plain_text(md)
    return _Unit(kind, start, end, md, txt, count_tokens(txt))


def _pack(parts: list[_Unit], target: int) -> list[list[_Unit]]:
    groups: list[list[_Unit]] = []
    cur: list[_Unit] = []
    size = 0
    for p in parts:
        if cur and size + p.tokens > target:
            groups.append(cur)
            cur, size = [], 0
        cur.append(p)
        size += p.tokens
    if cur:
        groups.append(cur)
    return groups


def _split_sentences(text: str, target: int) -> list[str]:
    """Cut one over-long line at sentence ends, then (for a single huge sentence) by tokens."""
    sentences = [s for s in _SENTENCE_END.split(text) if s]
    pieces: list[str] = []
    for s in sentences:
        if count_tokens(s) <= target:
            pieces.append(s)
            continue
        cur: list[str] = []
        n = 0
        for m in re.finditer(rf"[{_CJK}]|\s*[^\s{_CJK}]+\s*|\s+", s):
            tok = m.group(0)
            k = count_tokens(tok)
            if cur and n + k > target:
                pieces.append("".join(cur))
                cur, n = [], 0
            cur.append(tok)
            n += k
        if cur:
            pieces.append("".join(cur))
    out: list[str] = []
    buf, n = "", 0
    for p in pieces:
        k = count_tokens(p)
        if buf and n + k > target:
            out.append(buf)
            buf, n = "", 0
        buf += p
        n += k
    if buf:
        out.append(buf)
    return [o.strip() for o in out if o.strip()]


def _split_lines(kind: str, lines: list[str], start: int, end: int, target: int) -> list[_Unit]:
    """Prose/list/quote fallback: pack whole source lines; split a single huge line by sentence."""
    parts: list[_Unit] = []
    for ln in range(start, end):
        line = lines[ln]
        if not line.strip():
            continue
        u = _unit(kind, lines, ln, ln + 1)
        if u.tokens <= target:
            parts.append(u)
            continue
        for piece in _split_sentences(line, target):
            parts.append(_unit(kind, lines, ln, ln + 1, markdown=piece))
    return [_merge(kind, lines, g) for g in _pack(parts, target)]


def _merge(kind: str, lines: list[str], group: list[_Unit]) -> _Unit:
    if len(group) == 1:
        return group[0]
    md = "\n".join(u.markdown for u in group)
    return _unit(kind, lines, group[0].start, group[-1].end, markdown=md)


def _split_block(b: _Block, lines: list[str], target: int) -> list[_Unit]:
    if b.kind == "code":
        opening, closing = lines[b.start], lines[b.end - 1] if b.end - 1 > b.start else ""
        fenced = opening.lstrip().startswith(("```", "~~~"))
        body_start, body_end = (b.start + 1, b.end - 1) if fenced else (b.start, b.end)
        if fenced and not closing.lstrip().startswith(opening.lstrip()[:3]):
            body_end = b.end  # unterminated fence runs to the end of the block
        rows = [
            _Unit("code", ln, ln + 1, lines[ln], lines[ln], count_tokens(lines[ln]))
            for ln in range(body_start, body_end)
        ]
        out: list[_Unit] = []
        for g in _pack(rows, target):
            body = "\n".join(u.markdown for u in g)
            fence = opening.strip() if fenced else "```"
            md = f"{fence}\n{body}\n{fence[:3] if fence.startswith('```') or fence.startswith('~~~') else '```'}"
            out.append(_Unit("code", g[0].start, g[-1].end, md, body, count_tokens(body)))
        return out
    if b.kind == "table":
        trs = [t for t in b.tokens if t.type == "tr_open" and t.map]
        if len(trs) < 2:
            return _split_lines("table", lines, b.start, b.end, target)
        header_md = _slice(lines, b.start, trs[0].map[1] + 1)  # header row + delimiter row
        header_txt = markdown_plain_text(header_md + "\n")
        rows = []
        for tr in trs[1:]:
            s, e = tr.map
            md = _slice(lines, s, e)
            txt = markdown_plain_text(header_md + "\n" + md).split("\n", 1)[-1]
            rows.append(_Unit("table", s, e, md, txt, count_tokens(txt)))
        budget = max(1, target - count_tokens(header_txt))
        out = []
        for g in _pack(rows, budget):
            md = header_md + "\n" + "\n".join(u.markdown for u in g)
            txt = header_txt + "\n" + "\n".join(u.text for u in g)
            out.append(_Unit("table", g[0].start, g[-1].end, md, txt, count_tokens(txt)))
        return out
    if b.kind == "list":
        items = [t for t in b.tokens if t.type == "list_item_open" and t.level == 1 and t.map]
        parts: list[_Unit] = []
        for k, it in enumerate(items):
            s = it.map[0]
            e = items[k + 1].map[0] if k + 1 < len(items) else b.end
            u = _unit("list", lines, s, e)
            parts.extend([u] if u.tokens <= target else _split_lines("list", lines, s, e, target))
        return [_merge("list", lines, g) for g in _pack(parts, target)]
    return _split_lines(b.kind, lines, b.start, b.end, target)


# --- sections and chunks -----------------------------------------------------------------------


def _sections(blocks: list[_Block], lines: list[str], max_tokens: int, target: int) -> list[_Section]:
    sections = [_Section(0, [])]
    stack: list[tuple[int, str]] = []
    for b in blocks:
        if b.kind == "heading":
            while stack and stack[-1][0] >= b.level:
                stack.pop()
            stack.append((b.level, b.heading))
            sec = _Section(b.level, [h for _, h in stack])
            sec.units.append(_unit("heading", lines, b.start, b.end, text=b.heading))
            sections.append(sec)
            continue
        u = _unit(b.kind, lines, b.start, b.end, text=plain_text_of(b.tokens))
        if not u.text.strip() and not u.markdown.strip():
            continue
        sections[-1].units.extend([u] if u.tokens <= max_tokens else _split_block(b, lines, target))
    return [s for s in sections if s.units]


def chunk_markdown(
    markdown: str, *, target_tokens: int = TARGET_TOKENS, max_tokens: int = MAX_TOKENS, min_tokens: int = MIN_TOKENS
) -> list[Chunk]:
    """Chunks of one version's Markdown, in document order (``ordinal`` 0, 1, ...)."""
    text = (markdown or "").replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        return []
    lines = text.split("\n")
    sections = _sections(_blocks(parse(text), len(lines)), lines, max_tokens, target_tokens)

    groups: list[_Group] = []  # one per chunk
    open_level: int | None = None  # level of the section the open chunk began in
    for sec in sections:
        open_size = groups[-1].tokens if groups else 0
        lead = sum(u.tokens for u in sec.units[:2])  # its heading and first block stay together
        mergeable = (
            groups
            and open_level is not None
            and sec.level > open_level
            and open_size < min_tokens
            and open_size + lead <= target_tokens
        )
        if not mergeable:
            groups.append(_Group(sec.path))
            open_level = sec.level
        first_group = len(groups) - 1
        for u in sec.units:
            cur = groups[-1]
            if cur.units and cur.tokens + u.tokens > target_tokens and cur.body:
                carry: list[_Unit] = []
                while cur.units[-1].kind == "heading":  # a heading goes with the text under it
                    carry.append(cur.pop())
                groups.append(_Group(sec.path))
                for c in reversed(carry):
                    groups[-1].add(c)
                groups[-1].add(u)
                open_level = sec.level
            else:
                cur.add(u)
        # a small tail of a long section goes back into its predecessor when that stays legal
        if len(groups) - 1 > first_group:
            tail, prev = groups[-1], groups[-2]
            if tail.tokens < min_tokens and tail.tokens + prev.tokens <= max_tokens:
                for t in tail.units:
                    prev.add(t)
                groups.pop()

    chunks: list[Chunk] = []
    for group in groups:
        path, units = group.path, group.units
        if not units:
            continue
        md = "\n\n".join(u.markdown for u in units if u.markdown)
        txt = "\n".join(u.text for u in units if u.text)
        if not txt.strip() and not md.strip():
            continue
        kinds = list(dict.fromkeys(u.kind for u in units))
        meta = {
            "chunker": CHUNKER_VERSION,
            "lines": [units[0].start + 1, max(u.end for u in units)],
            "blocks": kinds,
            "sha256": hashlib.sha256(md.encode("utf-8")).hexdigest()[:16],
        }
        chunks.append(
            Chunk(
                ordinal=len(chunks),
                heading_path=list(path),
                content_text=txt,
                content_markdown=md,
                token_count=count_tokens(txt),
                metadata=meta,
            )
        )
    return chunks


def index_text(title: str, heading_path: Sequence[str], content_text: str) -> str:
    """What Milvus embeds and BM25-indexes for a chunk: a context line (title and headings, so a
    chunk deep in a long page still matches the page's subject) followed by the chunk's text."""
    context = _context(title, heading_path)
    return f"{context}\n{content_text}" if context else content_text


def strip_index_text(title: str, heading_path: Sequence[str], text: str) -> str:
    """Inverse of ``index_text`` for display: the chunk text without the context line."""
    context = _context(title, heading_path)
    if context and text.startswith(context + "\n"):
        return text[len(context) + 1 :]
    return text


def _context(title: str, heading_path: Sequence[str]) -> str:
    parts: list[str] = []
    for p in [title, *heading_path]:
        p = " ".join(str(p).split())
        if p and (not parts or parts[-1] != p):  # "# Title" under the page titled "Title"
            parts.append(p)
    return " / ".join(parts)
