"""Refuse Markdown the editor would silently lose; let importers transform it on the record.

Two callers, two needs. A save from source mode (``mode="strict"``) must fail with
MARKDOWN_DIALECT_ERROR naming the first offending line/column/feature. An importer
(``mode="import"``) converts foreign files: each issue it can repair carries a ``replacement``
(``prepare_import`` applies them) and comes back as a warning, so content is transformed
deliberately and the change is recorded - never dropped without a trace.

Accepted on purpose although it is raw HTML: ``<br />`` as the *whole* content of a paragraph
or table cell. That is how Milkdown itself writes an empty paragraph or cell, so rejecting it
would make the editor's own output unsaveable.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from markdown_it.token import Token

from openkb.errors import MarkdownDialectError

from ._inline import destination, js_to_fixed2, title_part
from .normalize import normalize_tokens
from .parser import MAX_NESTING, TOO_DEEP, parse_with_env
from .registry import OPENKB_PLUGINS, TOKEN_FEATURES, is_enabled

__all__ = ["DialectIssue", "ensure_valid", "prepare_import", "validate", "validate_and_normalize"]

Mode = Literal["strict", "import"]
_BR = re.compile(r"<br\s*/?>\Z", re.IGNORECASE)
_BR_START = re.compile(r"<br\b", re.IGNORECASE)
_NEWLINE = re.compile("\n")
_VISIBLE = re.compile(r"[^ \t>]")
# token types that are never an issue by themselves (enabled, and not checked any further)
_QUIET_BLOCK = frozenset(
    t for t, k in TOKEN_FEATURES.items() if is_enabled(k) and t not in ("html_block", "inline", "fence", "table_open")
)
# inline children the check has nothing to say about (closing tokens are not listed: also quiet)
_QUIET_INLINE = frozenset(t for t in TOKEN_FEATURES if t != "html_inline")  # registered, not raw HTML
# Crepe's default image block writes its resize ratio into the alt slot; OpenKB's image_alt
# plugin (features.json) keeps alt text, so only without it is a lone image's alt refused.
_RATIO_IN_ALT = not OPENKB_PLUGINS.get("image_alt")
_FRONT = re.compile(r"\A\ufeff?(---|\+\+\+)[ \t]*\r?\n(?:.*?\r?\n)??(\1|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)


@dataclass(frozen=True)
class DialectIssue:
    feature: str
    line: int  # 1-based
    column: int  # 1-based
    message: str
    severity: Literal["error", "warning"] = "error"
    # import repair: replace source[start:end] with replacement (None = cannot repair)
    start: int = -1
    end: int = -1
    replacement: str | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, object]:
        return {
            "feature": self.feature,
            "line": self.line,
            "column": self.column,
            "message": self.message,
            "severity": self.severity,
        }


class _Src:
    """Offset <-> (line, column) for one document."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0]
        self.starts += [m.end() for m in _NEWLINE.finditer(text)]

    def pos(self, offset: int) -> tuple[int, int]:
        lo = max(0, bisect_right(self.starts, offset) - 1)
        return lo + 1, offset - self.starts[lo] + 1

    def line_start(self, line0: int) -> int:
        return self.starts[min(line0, len(self.starts) - 1)]


def validate(markdown: str, mode: Mode = "strict") -> list[DialectIssue]:
    """All dialect issues in document order; empty means the editor keeps every byte of meaning."""
    tokens, env = parse_with_env(markdown)
    return _validate_tokens(markdown, tokens, mode, env)


def _validate_tokens(
    markdown: str, tokens: list[Token], mode: Mode, env: dict[str, Any] | None = None
) -> list[DialectIssue]:
    """:func:`validate` on the tokens of an existing parse of ``markdown`` (only reads them;
    ``env``: the parse's, which says whether blocks were nested too deep to parse)."""
    src = _Src(markdown)
    issues: list[DialectIssue] = []
    if env and TOO_DEEP in env:
        line0 = env[TOO_DEEP]
        issues.append(
            DialectIssue(
                "nesting",
                line0 + 1,
                1,
                f"quotes and lists are nested more than {MAX_NESTING} levels deep here (a list counts two):"
                " flatten them; nothing deeper would be kept",
            )
        )
    fm = _front_matter(markdown)
    if fm:
        body = markdown[fm.start(1) : fm.end()].split("\n")[1:-1]
        inner = "\n".join(body[:-1]) if body and body[-1].strip() in ("---", "+++", "...") else ""
        lang = "toml" if fm.group(1) == "+++" else "yaml"
        issues.append(
            DialectIssue(
                "front_matter",
                1,
                1,
                "front matter is not editable: Milkdown turns it into a divider and a heading",
                start=0,
                end=fm.end(),
                replacement=f"```{lang}\n{inner}\n```\n" if inner else "",
            )
        )
    _scan(tokens, src, issues, fm.end() if fm else 0)
    if mode == "import":
        issues = [i if i.replacement is None else _as_warning(i) for i in issues]
    issues.sort(key=lambda i: (i.line, i.column))
    return issues


def _front_matter(markdown: str) -> re.Match[str] | None:
    """A leading header block the editor would not keep, or None.

    Milkdown has no front matter: ``---``, fields, ``---`` becomes a divider and a heading (the
    closing ``---`` underlines the line above it). When the line above the closing ``---`` is
    blank (or there is none), that ``---`` is a divider of its own and the block is plain
    Markdown the editor keeps as it is: a divider, what follows, a divider. Its own output for a
    page that starts with a divider and has another further down is such a block, and was
    refused as front matter on save. ``+++`` and a ``...`` closer stay refused: fields before
    them run into one paragraph."""
    fm = _FRONT.match(markdown)
    if fm is None or fm.group(1) != "---" or fm.group(2) != "---":
        return fm
    lines = markdown[: fm.start(2)].split("\n")
    above = lines[-2] if len(lines) >= 3 else ""  # the line just above the closing fence; none: ""
    return fm if above.strip() else None


def _as_warning(i: DialectIssue) -> DialectIssue:
    return DialectIssue(i.feature, i.line, i.column, i.message, "warning", i.start, i.end, i.replacement)


def _scan(tokens: list[Token], src: _Src, issues: list[DialectIssue], skip_until: int) -> None:
    quiet = _QUIET_BLOCK
    for idx, tok in enumerate(tokens):
        t = tok.type
        if t in quiet or t.endswith("_close"):
            continue
        if tok.map and src.line_start(tok.map[0]) < skip_until:
            continue  # inside front matter, already reported once
        key = TOKEN_FEATURES.get(t)
        if t == "html_block":
            _html_block(tok, src, issues)
            continue
        if t == "inline":
            _inline(tok, tokens[idx - 1] if idx else None, src, issues)
            continue
        if t == "table_open":
            _table_rows(tokens, idx, src, issues)
            continue
        if t == "fence" and len(tok.info.split(None, 1)) > 1:
            line0 = tok.map[0] if tok.map else 0
            line, col = _first_char(src, line0)
            issues.append(
                DialectIssue(
                    "code_block",
                    line,
                    col,
                    f"only the language of a code fence is kept; {tok.info.split(None, 1)[1]!r} is dropped",
                    start=-1,
                    replacement="",  # normalize() drops it; recorded as a warning on import
                )
            )
            continue
        if key is None:
            line, col = _first_char(src, tok.map[0]) if tok.map else (1, 1)
            issues.append(DialectIssue("unknown", line, col, f"construct {t!r} is not in the editor registry"))
        elif not is_enabled(key):
            line, col = _first_char(src, tok.map[0]) if tok.map else (1, 1)
            issues.append(DialectIssue(key, line, col, f"feature {key!r} is disabled in the editor"))


def _first_char(src: _Src, line0: int) -> tuple[int, int]:
    start = src.line_start(line0)
    text = src.text
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    m = _VISIBLE.search(text, start, end)
    return line0 + 1, (m.start() - start if m else 0) + 1


def _html_block(tok: Token, src: _Src, issues: list[DialectIssue]) -> None:
    content = tok.content.strip()
    if _BR.match(content):
        return  # Milkdown's empty paragraph
    line0 = tok.map[0] if tok.map else 0
    line, col = _first_char(src, line0)
    start = src.line_start(line0) + col - 1
    is_br = bool(_BR_START.match(content))
    if tok.level == 0 and tok.map:
        end = src.line_start(tok.map[1]) if tok.map[1] < len(src.starts) else len(src.text)
        body = src.text[src.line_start(line0) : end].rstrip("\n")
        repl = "```html\n" + body + "\n```\n"
    else:
        end, repl = start + 1, "\\<"
    issues.append(
        DialectIssue(
            "html",
            line,
            col,
            (
                "raw <br> is deleted by the editor; end the line with a backslash instead"
                if is_br
                else "raw HTML blocks cannot be edited; they are stored as an html code block on import"
            ),
            start=start,
            end=end,
            replacement=repl,
        )
    )


_NESTING = {"em_open": "em_close", "strong_open": "strong_close", "s_open": "s_close"}
_NEST_FEATURE = {"em_open": "emphasis", "strong_open": "strong", "s_open": "strikethrough"}


def _nested_marks(tok: Token, src: _Src, issues: list[DialectIssue]) -> None:
    """Emphasis inside emphasis of the same kind (``*a *b* c*``, ``__a __b__ c__``).

    The editor holds a mark set (one emphasis, one strong per character), so the inner pair
    is merged away and on save the markers come out shifted (``*(*foo*)*`` -> ``*(foo*)``):
    the text changes. Refused; write it once.
    """
    depth: dict[str, int] = {}
    closers = {v: k for k, v in _NESTING.items()}
    for c in tok.children or []:
        t = c.type
        if t in _NESTING:
            if depth.get(t):
                assert tok.map is not None
                line, col = _first_char(src, tok.map[0])
                issues.append(
                    DialectIssue(
                        _NEST_FEATURE[t],
                        line,
                        col,
                        f"{_NEST_FEATURE[t]} nested inside the same {_NEST_FEATURE[t]} is merged by the "
                        "editor and its markers move; mark the text once",
                    )
                )
                return
            depth[t] = depth.get(t, 0) + 1
        elif t in closers:
            depth[closers[t]] = max(0, depth.get(closers[t], 0) - 1)


def _unquoted(line: str) -> str:
    """A table row's text without its indentation and the ``>`` markers of quotes around it."""
    text = line.strip()
    while text.startswith(">"):
        text = text[1:].strip()
    return text


def _split_row(line: str) -> int:
    """Cells in one GFM table row as micromark counts them (only ``\\|`` does not split)."""
    text = _unquoted(line)
    cells, i, n = 1, 0, len(text)
    if text.startswith("|"):
        i = 1
    end = n - 1 if n > 1 and text.endswith("|") and not text.endswith("\\|") else n
    while i < end:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "|":  # GFM splits on a pipe inside a code span too
            cells += 1
        i += 1
    return cells


def _line(src: _Src, line0: int) -> str:
    start = src.line_start(line0)
    stop = src.text.find("\n", start)
    return src.text[start : stop if stop >= 0 else len(src.text)]


def _table_rows(tokens: list[Token], idx: int, src: _Src, issues: list[DialectIssue]) -> None:
    """A body row with more cells than the header: markdown-it drops the extra cells, the
    editor adds a column for them. Refused so neither side loses or invents a cell.

    Also a body row without a leading pipe right after a row with fewer cells than the header:
    the editor (micromark) then starts that row with an empty cell and shifts the others right
    (``| a | b | c |`` / ``| x |`` / ``y | z |``); markdown-it does not (parity case mk-594).
    """
    header = 0
    short = False  # the previous body row had fewer cells than the header
    j = idx + 1
    in_head = True
    table_map = tokens[idx].map
    if table_map and "|" not in _line(src, table_map[0] + 1):
        line, col = _first_char(src, table_map[0] + 1)
        issues.append(
            DialectIssue(
                "table",
                line,
                col,
                "a table delimiter row needs a pipe (`| --- |`); the editor reads this line as a heading underline",
            )
        )
        return
    while j < len(tokens) and tokens[j].type != "table_close":
        t = tokens[j]
        if t.type == "th_open":
            header += 1
        elif t.type == "thead_close":
            in_head = False
            if table_map and _split_row(_line(src, table_map[0])) != header:
                # `\\|`: markdown-it reads an escaped pipe, micromark an escaped backslash and a
                # cell border; with the delimiter row's count off, the editor sees no table
                line, col = _first_char(src, table_map[0])
                issues.append(
                    DialectIssue(
                        "table",
                        line,
                        col,
                        f"the editor counts {_split_row(_line(src, table_map[0]))} cells in this header row but "
                        f"{header} in its delimiter row, so it would not read a table (a `|` after `\\\\` "
                        "ends a cell)",
                    )
                )
                return
        elif t.type == "tr_open" and not in_head and t.map:
            line0 = t.map[0]
            start = src.line_start(line0)
            stop = src.text.find("\n", start)
            row = src.text[start : stop if stop >= 0 else len(src.text)]
            cells = _split_row(row)
            if cells > header:
                line, col = _first_char(src, line0)
                issues.append(
                    DialectIssue(
                        "table",
                        line,
                        col,
                        f"this table row has more cells than the header ({header}); the editor would "
                        "add a column for them",
                    )
                )
                return
            if short and not _unquoted(row).startswith("|"):
                line, col = _first_char(src, line0)
                issues.append(
                    DialectIssue(
                        "table",
                        line,
                        col,
                        "start this table row with `|`: after a row with fewer cells than the header "
                        "the editor would read an empty first cell and shift this row's cells right",
                    )
                )
                return
            short = cells < header
        j += 1


_TICKS = re.compile(r"`+")


def _multiline_code(tok: Token, src: _Src, issues: list[DialectIssue]) -> None:
    """Inline code across a line break. The editor keeps the line break (and the blanks before
    it) inside the code; markdown-it, like the CommonMark renderer, turns it into a space, so
    the normalizer cannot know the bytes the editor would save. Refused: keep it on one line."""
    content = tok.content
    if "`" not in content or "\n" not in content:
        return
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(content) if m.start() == 0 or content[m.start() - 1] != "\\"]
    # the next run of the same length after each run, found in one pass from the end: looking
    # through the later runs (and then for the closing run's place) for each opening run cost a
    # paragraph of many code spans the square of their number (80 KB of `a`: 14 s)
    after: list[int] = [-1] * len(runs)
    last: dict[int, int] = {}
    for k in range(len(runs) - 1, -1, -1):
        size = runs[k][1] - runs[k][0]
        after[k] = last.get(size, -1)
        last[size] = k
    i = 0
    while i < len(runs):
        j = after[i]
        if j == -1:
            i += 1
            continue
        if content.find("\n", runs[i][1], runs[j][0]) != -1:
            assert tok.map is not None
            line, col = _first_char(src, tok.map[0])
            issues.append(
                DialectIssue(
                    "inline_code",
                    line,
                    col,
                    "inline code across a line break: the editor keeps the "
                    "line break inside the code; keep inline code on one line",
                )
            )
            return
        i = j + 1


def _inline(tok: Token, opener: Token | None, src: _Src, issues: list[DialectIssue]) -> None:
    children = tok.children or []
    if not children or tok.map is None:
        return
    _nested_marks(tok, src, issues)
    _multiline_code(tok, src, issues)
    quiet = _QUIET_INLINE
    if all(c.type in quiet or c.type.endswith("_close") for c in children):
        # no raw HTML, nothing outside the registry: only the image-block check below applies
        if (
            _RATIO_IN_ALT
            and opener is not None
            and opener.type == "paragraph_open"
            and len(children) == 1
            and children[0].type == "image"
        ):
            _image_block(tok, children[0], src, issues)
        return
    base = src.line_start(tok.map[0])
    cursor = base
    html = [c for c in children if c.type == "html_inline"]
    in_cell = opener is not None and opener.type in ("th_open", "td_open")
    if (
        html
        and all(_BR.match(c.content.strip()) for c in html)
        and all(c.type == "html_inline" or (c.type == "text" and not c.content.strip()) for c in children)
    ):
        return  # whole paragraph/cell is `<br />`: Milkdown's empty block
    for c in children:
        if c.type == "html_inline":
            at = src.text.find(c.content, cursor)
            if at < 0:
                at = base
            cursor = at + len(c.content)
            line, col = src.pos(at)
            if _BR.match(c.content.strip()):
                repl = " " if in_cell else "\\\n"
                msg = "raw <br> is deleted by the editor; end the line with a backslash instead"
            else:
                repl = "\\" + c.content
                msg = f"inline HTML {c.content[:30]!r} is not editable; escaped to text on import"
            issues.append(DialectIssue("html", line, col, msg, start=at, end=at + len(c.content), replacement=repl))
        elif c.type not in TOKEN_FEATURES and not c.type.endswith("_close"):
            line, col = src.pos(cursor)
            issues.append(DialectIssue("unknown", line, col, f"construct {c.type!r} is not in the editor registry"))
    if (
        _RATIO_IN_ALT
        and opener is not None
        and opener.type == "paragraph_open"
        and len(children) == 1
        and children[0].type == "image"
    ):
        _image_block(tok, children[0], src, issues)


def _image_block(tok: Token, img: Token, src: _Src, issues: list[DialectIssue]) -> None:
    """An image alone in a paragraph is Crepe's image block: its alt slot is the resize ratio."""
    assert tok.map is not None  # checked by the caller
    base = src.line_start(tok.map[0])
    alt = "".join(x.content for x in img.children or [])
    if alt and js_to_fixed2(alt) != alt:
        seg_end = src.text.find("\n", base)
        line_text = src.text[base : seg_end if seg_end >= 0 else len(src.text)]
        lead = len(line_text) - len(line_text.lstrip(" \t>"))
        start = base + lead
        end = src.line_start(tok.map[1]) - 1 if tok.map[1] < len(src.starts) else len(src.text)
        title = str(img.attrs.get("title") or "") or alt
        repl = (
            "!["
            + js_to_fixed2(alt)
            + "]("
            + destination(str(img.attrs.get("src", "")), title)
            + title_part(title)
            + ")"
        )
        line, col = src.pos(start)
        issues.append(
            DialectIssue(
                "image_block",
                line,
                col,
                "an image alone in a paragraph becomes an image block whose alt slot holds the "
                f"resize ratio: alt text {alt!r} would be lost (put it in the title/caption)",
                start=start,
                end=end if tok.map[1] - tok.map[0] == 1 else start,
                replacement=repl if tok.map[1] - tok.map[0] == 1 else None,
            )
        )


def ensure_valid(markdown: str) -> None:
    """Raise MarkdownDialectError for the first problem, listing every issue."""
    _raise_errors(validate(markdown))


def validate_and_normalize(markdown: str, edit: Callable[[list[Token]], None] | None = None) -> str:
    """``ensure_valid(markdown)`` then ``normalize(markdown)``, parsing the document once.

    What a save does. Same result and same MarkdownDialectError as the two calls; the
    validation scan reads the tokens before the normalizer walks (and edits) them.
    ``edit``: called with the validated tokens before they are written back (the importer swaps
    link targets there instead of parsing the normalized page again); it must keep them valid.
    """
    tokens, env = parse_with_env(markdown)
    _raise_errors(_validate_tokens(markdown, tokens, "strict", env))
    if edit is not None:
        edit(tokens)
    return normalize_tokens(markdown, tokens)


def _raise_errors(all_issues: list[DialectIssue]) -> None:
    issues = [i for i in all_issues if i.severity == "error"]
    if not issues:
        return
    first = issues[0]
    raise MarkdownDialectError(
        f"line {first.line}, column {first.column}: {first.message}",
        line=first.line,
        column=first.column,
        feature=first.feature,
        issues=[i.to_dict() for i in issues],
    )


def prepare_import(markdown: str) -> tuple[str, list[DialectIssue]]:
    """Apply every recorded repair; returns the repaired source and the warnings to store.

    Raises MarkdownDialectError if something remains that no repair covers.
    """
    issues = validate(markdown, mode="import")
    errors = [i for i in issues if i.severity == "error"]
    if errors:
        ensure_valid(markdown)
    edits = sorted((i for i in issues if i.replacement is not None and i.start >= 0), key=lambda i: -i.start)
    out = markdown
    last_start = len(out) + 1
    for i in edits:
        if i.end > last_start:
            continue  # overlapping repair (e.g. html inside front matter): first one wins
        out = out[: i.start] + (i.replacement or "") + out[i.end :]
        last_start = i.start
    return out, [i for i in issues if i.severity == "warning"]
