"""The dialect's import mode: validate -> repair with recorded warnings -> normalize.

Converters hand over Markdown as users (or tools) wrote it; the editor keeps less
(docs/markdown.md#refused-constructs). ``import_markdown`` turns every construct the editor
would lose into something it keeps, and says so in a warning — nothing is dropped silently:

* YAML (or TOML) front matter -> document metadata: ``title``, ``tags``, dates (``date``,
  ``created``, ``updated`` ...) and every other key under ``metadata``; removed from the body.
  Front matter that does not parse stays, as a fenced ``yaml`` block (the dialect's repair).
* ``<!-- comments -->`` -> dropped, with a warning quoting them. Decision: a comment is an
  author's note that no reader sees; keeping it as a visible block would change what the
  page shows, and the warning keeps the text on record.
* ``<br>`` -> a hard break (a space inside a table cell).
* inline formatting tags -> their Markdown (``<b>`` -> ``**``, ``<i>`` -> ``*``, ``<code>``,
  ``<s>``/``<del>``, ``<a href>`` -> a link, ``<img>`` -> an image); tags with no Markdown
  (``<span>``, ``<u>``, ``<sup>``, ``<kbd>`` ...) are removed and their text kept; anything else
  is escaped to visible text.
* HTML blocks -> converted to Markdown (the HTML converter) when that is lossless enough;
  tables with merged cells (``colspan``/``rowspan``) and whatever does not convert stay as a
  fenced ``html`` block: a marked read-only block, per docs/markdown.md#import-repairs.

The repairs are computed from the dialect's own issues (``openkb.markdown.validate`` in import
mode gives their offsets); what remains goes through ``prepare_import`` and the strict
``validate_and_normalize`` a save uses, so the result is exactly what a save would store.
Trap: a repair can create new constructs (a converted HTML block may hold inline HTML), so the
loop re-validates until nothing is left to repair; it stops after a few rounds.
"""

from __future__ import annotations

import html as htmllib
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import yaml
from markdown_it.token import Token

from openkb.errors import MarkdownDialectError
from openkb.markdown import prepare_import, validate, validate_and_normalize

__all__ = ["Repaired", "import_markdown", "split_front_matter"]

_FRONT = re.compile(r"\A(---|\+\+\+)[ \t]*\n(.*?)\n(\1|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_TAG = re.compile(r"<\s*(/?)\s*([a-zA-Z][a-zA-Z0-9-]*)([^>]*)>\Z", re.DOTALL)
_ATTR = re.compile(r"""([a-zA-Z_:][-a-zA-Z0-9_:.]*)\s*=\s*("([^"]*)"|'([^']*)'|([^\s"'>]+))""")
_MARKS = {"b": "**", "strong": "**", "i": "*", "em": "*", "code": "`", "s": "~~", "del": "~~", "strike": "~~"}
_TEXT_ONLY = frozenset(
    {
        "span",
        "u",
        "ins",
        "mark",
        "font",
        "sup",
        "sub",
        "small",
        "big",
        "kbd",
        "abbr",
        "cite",
        "q",
        "var",
        "samp",
        "tt",
        "center",
        "nobr",
        "wbr",
        "time",
        "label",
        "bdi",
        "bdo",
        "dfn",
    }
)
_DATE_KEYS = ("date", "created", "created_at", "updated", "updated_at", "modified", "lastmod")
_MERGED = re.compile(r"<t[dh][^>]*\b(colspan|rowspan)\s*=", re.IGNORECASE)


@dataclass
class Repaired:
    markdown: str  # normalized, valid in strict mode
    title: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _jsonable(v: Any) -> Any:
    if isinstance(v, (datetime, date)):
        return v.isoformat()
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set)):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return str(v)


def split_front_matter(text: str) -> tuple[dict[str, Any] | None, str, list[str]]:
    """``(fields, body, warnings)``; ``fields`` is None when there is no parseable header.

    A ``---`` line, a blank line, then anything but YAML fields is Markdown, not a header: two
    thematic breaks around a paragraph (``---``, blank, text, blank, ``---``) read as a header
    that is "not a mapping" became a YAML code block, and an empty pair of breaks vanished as an
    empty header. A header's first line is never blank in practice; fields after one still count."""
    m = _FRONT.match(text)
    if not m:
        return None, text, []
    raw = m.group(2)
    markdown_like = m.group(1) == "---" and (raw == "" or raw.startswith("\n"))
    try:
        data = tomllib.loads(raw) if m.group(1) == "+++" else yaml.safe_load(raw)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, ValueError) as exc:
        if markdown_like:
            return None, text, []
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, text, [f"line 1: front matter does not parse ({first}); kept as a code block"]
    if markdown_like and not (isinstance(data, dict) and data):
        return None, text, []
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return None, text, ["line 1: front matter is not a mapping; kept as a code block"]
    return {str(k): _jsonable(v) for k, v in data.items()}, text[m.end() :], []


def _meta_from(fields: dict[str, Any]) -> tuple[str | None, list[str] | None, dict[str, Any], list[str]]:
    warnings: list[str] = []
    title = fields.pop("title", None)
    if title is not None and not isinstance(title, str):
        title = str(title)
    tags_raw = fields.pop("tags", None)
    if tags_raw is None:
        tags_raw = fields.pop("tag", None)
    tags: list[str] | None = None
    if isinstance(tags_raw, str):
        tags = [t.strip().lstrip("#") for t in re.split(r"[,\s]+", tags_raw) if t.strip().lstrip("#")]
    elif isinstance(tags_raw, list):
        tags = [str(t).strip().lstrip("#") for t in tags_raw if str(t).strip().lstrip("#")]
    elif tags_raw is not None:
        warnings.append(f"front matter: tags {tags_raw!r} are not a list; kept in metadata")
        fields["tags"] = tags_raw
    meta: dict[str, Any] = {}
    for k in _DATE_KEYS:
        if k in fields:
            meta[k] = fields.pop(k)
    if fields:
        meta["front_matter"] = fields
    return (title.strip() or None) if isinstance(title, str) else None, tags, meta, warnings


def _attrs(s: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in _ATTR.finditer(s):
        val = m.group(3) if m.group(3) is not None else m.group(4) if m.group(4) is not None else m.group(5)
        out[m.group(1).lower()] = htmllib.unescape(val or "")
    return out


def _dest(url: str) -> str:
    url = url.strip()
    return f"<{url}>" if (" " in url or "(" in url or ")" in url) else url


def _inline_repair(src: str, state: dict[str, list[str]]) -> tuple[str, str] | None:
    """(replacement, warning) for one inline HTML token; None = use the dialect's default repair."""
    s = src.strip()
    if s.startswith("<!--"):
        return "", f"HTML comment dropped: {s[4:-3].strip()[:80]!r}"
    m = _TAG.match(s)
    if not m:
        return None
    closing, tag, rest = m.group(1) == "/", m.group(2).lower(), m.group(3)
    if tag == "br":
        return None  # the dialect's own repair: a hard break (a space in a table cell)
    if tag in _MARKS:
        return _MARKS[tag], f"<{tag}> written as Markdown {_MARKS[tag]!r}"
    if tag == "a":
        hrefs = state.setdefault("a", [])
        if not closing:
            a = _attrs(rest)
            hrefs.append(a.get("href", ""))
            return ("[" if a.get("href") else ""), "<a> link written as a Markdown link"
        href = hrefs.pop() if hrefs else ""
        return (f"]({_dest(href)})" if href else ""), "<a> link written as a Markdown link"
    if tag == "img" and not closing:
        a = _attrs(rest)
        if not a.get("src"):
            return "", "<img> without src dropped"
        alt = a.get("alt", "").replace("]", "\\]").replace("[", "\\[")
        title = a.get("title", "").replace('"', '\\"')
        return (
            f"![{alt}]({_dest(a['src'])}" + (f' "{title}"' if title else "") + ")",
            "<img> written as a Markdown image",
        )
    if tag in _TEXT_ONLY:
        return "", f"<{tag}> formatting is not supported by the editor; its text is kept without it"
    return None


def _block_repair(src: str, default: str | None, depth: int) -> tuple[str, str] | None:
    s = src.strip()
    if s.startswith("<!--") and s.endswith("-->"):
        return "", f"HTML comment dropped: {s[4:-3].strip()[:80]!r}"
    if _MERGED.search(s):
        return None  # merged table cells have no GFM form: a read-only html block
    if depth > 1:
        return None
    from openkb.importing.converters import html_to_markdown

    try:
        md = html_to_markdown(s).strip()
    except Exception:  # noqa: BLE001 - any converter failure keeps the block as code
        return None
    if not md:
        return "", f"empty HTML block dropped: {s[:60]!r}"
    return md + "\n\n", "HTML block converted to Markdown"


def _repair_html(text: str, warnings: list[str], depth: int) -> str:
    issues = validate(text, mode="import")
    edits: list[tuple[int, int, str]] = []
    state: dict[str, list[str]] = {}
    for i in issues:
        if i.feature != "html" or i.start < 0:
            continue
        piece = text[i.start : i.end]
        if i.replacement is not None and i.replacement.startswith("```html"):
            got = _block_repair(piece, i.replacement, depth)  # a top-level HTML block
        elif i.end - i.start == 1:
            got = None  # an HTML block inside a list or quote: the dialect escapes its "<"
        else:
            got = _inline_repair(piece, state)
        if got is None:
            continue  # prepare_import applies the dialect's default, with its own warning
        repl, why = got
        edits.append((i.start, i.end, repl))
        warnings.append(f"line {i.line}: {why}")
    out = text
    last = len(out) + 1
    for start, end, repl in sorted(edits, key=lambda e: -e[0]):
        if end > last:
            continue
        out = out[:start] + repl + out[end:]
        last = start
    return out


def import_markdown(text: str, *, depth: int = 0, edit: Callable[[list[Token]], None] | None = None) -> Repaired:
    """Repair ``text`` for the editor; raises MarkdownDialectError if something cannot be.
    ``edit``: given to the final ``validate_and_normalize`` (``links.marker``)."""
    warnings: list[str] = []
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    fields, text, fm_warnings = split_front_matter(text)
    warnings += fm_warnings
    title = tags = None
    meta: dict[str, Any] = {}
    if fields is not None:
        title, tags, meta, more = _meta_from(fields)
        warnings += more
        warnings.append("line 1: front matter moved to the document's metadata")
    if not fm_warnings:
        try:  # most files need no repair: one parse, as a save does
            return Repaired(validate_and_normalize(text, edit), title, tags, meta, warnings)
        except MarkdownDialectError:
            pass
    for _ in range(4):
        text = _repair_html(text, warnings, depth)
        repaired, issues = prepare_import(text)
        for i in issues:
            msg = "<br> written as a hard break" if i.message.startswith("raw <br>") else i.message
            warnings.append(f"line {i.line}: {msg}")
        text = repaired
        if not [i for i in validate(text, mode="import") if i.severity == "warning" and i.start >= 0]:
            break
    body = validate_and_normalize(text, edit)  # MarkdownDialectError: what no repair covers
    return Repaired(body, title, tags, meta, sorted(_dedupe(warnings), key=_line_of))


def _line_of(w: str) -> int:
    m = re.match(r"line (\d+):", w)
    return int(m.group(1)) if m else 0


def _dedupe(warnings: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for w in warnings:
        if w not in seen:
            seen.add(w)
            out.append(w)
    return out


def repair_for_write(markdown: str, markdown_hash: str | None = None) -> Repaired:
    """``on_unsupported: "convert"`` of an API write (docs/importing.md#api-writers): the client's
    hash is checked against what it sent, then the import repairs apply; the caller stores the
    result (still validated and normalized by the save) and answers the warnings."""
    from openkb.content.versions import sha256_hex
    from openkb.errors import HashMismatch

    if markdown_hash is not None and markdown_hash.strip().lower() != sha256_hex(markdown):
        raise HashMismatch(
            "markdown_hash is not the SHA-256 of the markdown sent (lowercase hex of its UTF-8)",
            field="markdown_hash",
            expected=sha256_hex(markdown),
        )
    rep = import_markdown(markdown)
    if rep.title:  # the write names its own title; the header's stays on record
        rep.metadata.setdefault("front_matter", {})["title"] = rep.title
    return rep
