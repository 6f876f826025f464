"""Read-side views of a document: search text, outline, internal references, reader HTML.

All of them parse with the same dialect parser as the validator, so the index never sees a
construct the editor would not (raw HTML, disabled in the registry, is left out of search text
and escaped in HTML instead of being passed through).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from markdown_it.token import Token

from ._inline import RATIO_ALT
from .parser import get_parser, parse, strip_task_marker, task_marker
from .registry import TOKEN_FEATURES, feature

__all__ = ["Heading", "Link", "links", "outline", "plain_text", "render_html"]

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_INTERNAL = re.compile(rf"\A(?:openkb://(document)/|asset://())({_UUID})(?=[/?#]|\Z)")
_SAFE_SCHEME = re.compile(r"\A(?:https?:|mailto:|#|/|\./|\.\./|[^:/?#]*(?:[/?#]|\Z))", re.I)


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    line: int  # 1-based
    anchor: str


@dataclass(frozen=True)
class Link:
    kind: str  # "document" | "asset"
    target: str  # the uuid, lower-cased
    text: str  # link text, or image alt
    line: int  # 1-based
    url: str


def internal_target(url: str) -> tuple[str, str] | None:
    m = _INTERNAL.match(url)
    if not m:
        return None
    return ("document" if m.group(1) else "asset"), m.group(3).lower()


def _extractable(tok_type: str) -> bool:
    key = TOKEN_FEATURES.get(tok_type)
    return key is None or feature(key).supports_search_extraction


def _inline_text(children: list[Token]) -> str:
    out: list[str] = []
    for c in children:
        t = c.type
        if t in ("text", "text_special", "code_inline", "math_inline", "math_inline_double"):
            out.append(c.content)
        elif t in ("softbreak", "hardbreak"):
            out.append("\n" if t == "hardbreak" else " ")
        elif t == "image":
            out.append(image_alt(c))
        elif t == "footnote_ref":
            continue
        elif t == "html_inline" or not _extractable(t):
            continue
    return "".join(out)


def image_alt(image: Token) -> str:
    """An image's alt as text; a resize ratio in the alt slot (``![1.50](...)``, what the image
    block writes for a resized image without alt text) is not text and yields ``""``."""
    alt = _inline_text(image.children or [])
    return "" if RATIO_ALT.match(alt) else alt


def plain_text(markdown: str) -> str:
    """Text for the search index: markup gone; code, link text, image alt, math source kept."""
    parts: list[str] = []
    for tok in parse(markdown):
        t = tok.type
        if t == "inline":
            s = _inline_text(tok.children or [])
            if s.strip():
                parts.append(s)
        elif t in ("fence", "code_block", "math_block"):
            if tok.content.strip():
                parts.append(tok.content.rstrip("\n"))
    text = "\n".join(parts)
    # drop GFM task markers, which are markup, not content
    return re.sub(r"(?m)^\[[ xX]\] ", "", text)


def _slug(text: str) -> str:
    return re.sub(r"\s+", "-", text.lower().strip())  # Milkdown's defaultHeadingIdGenerator


def outline(markdown: str) -> list[Heading]:
    """Headings for the right-hand TOC; anchors are unique (``-1``, ``-2`` on repeats)."""
    tokens = parse(markdown)
    seen: dict[str, int] = {}
    out: list[Heading] = []
    for i, tok in enumerate(tokens):
        if tok.type != "heading_open":
            continue
        text = _inline_text(tokens[i + 1].children or []).replace("\n", " ").strip()
        base = _slug(text)
        n = seen.get(base, 0)
        seen[base] = n + 1
        anchor = base if n == 0 else f"{base}-{n}"
        out.append(Heading(int(tok.tag[1]), text, (tok.map[0] + 1) if tok.map else 0, anchor))
    return out


def links(markdown: str) -> list[Link]:
    """Internal references (``openkb://document/{uuid}``, ``asset://{uuid}``) in order."""
    out: list[Link] = []
    for tok in parse(markdown):
        if tok.type != "inline" or not tok.children:
            continue
        line = (tok.map[0] + 1) if tok.map else 0
        kids = tok.children
        for j, c in enumerate(kids):
            if c.type == "softbreak" or c.type == "hardbreak":
                line += 1
            elif c.type == "link_open":
                url = str(c.attrs.get("href", ""))
                hit = internal_target(url)
                if hit:
                    depth, k, text = 1, j + 1, []
                    while k < len(kids) and depth:
                        if kids[k].type == "link_close":
                            depth -= 1
                        elif kids[k].type == "link_open":
                            depth += 1
                        else:
                            text.append(_inline_text([kids[k]]))
                        k += 1
                    out.append(Link(hit[0], hit[1], "".join(text), line, url))
            elif c.type == "image":
                url = str(c.attrs.get("src", ""))
                hit = internal_target(url)
                if hit:
                    out.append(Link(hit[0], hit[1], image_alt(c), line, url))
    return out


Resolver = Callable[[str, str], "str | None"]


def _safe_url(url: str, resolve_link: Resolver | None) -> str:
    hit = internal_target(url)
    if hit:
        resolved = resolve_link(hit[0], hit[1]) if resolve_link else None
        return resolved or "#"
    if url.startswith(("openkb:", "asset:")):
        return "#"  # malformed internal reference
    return url if _SAFE_SCHEME.match(url.strip()) else "#"


def render_html(markdown: str, resolve_link: Resolver | None = None) -> str:
    """Reader/export HTML. Internal links go through ``resolve_link(kind, uuid)``, which
    returns a web URL or None (unknown or not visible: rendered as ``#``, no existence leak).
    Raw HTML is escaped, never passed through; unsafe URL schemes become ``#``."""
    md = get_parser()
    env: dict = {}
    tokens = md.parse(markdown, env)
    anchors = iter(h.anchor for h in outline(markdown))
    for i, tok in enumerate(tokens):
        t = tok.type
        if t == "html_block":
            tok.type, tok.content = "code_block", tok.content  # shown as escaped source
        elif t == "heading_open":
            tok.attrSet("id", next(anchors, ""))
        elif t == "list_item_open":
            checked = task_marker(tokens, i + 1)
            if checked is not None:
                strip_task_marker(tokens[i + 2])
                box = Token("html_inline", "", 0, meta={"openkb_box": True})
                box.content = '<input type="checkbox" disabled=""%s> ' % (' checked=""' if checked else "")
                tokens[i + 2].children = [box] + (tokens[i + 2].children or [])
                tok.attrSet("class", "task-list-item")
        elif t == "inline":
            for c in tok.children or []:
                if c.type == "html_inline" and not (c.meta or {}).get("openkb_box"):
                    c.type = "text"
                elif c.type == "link_open":
                    c.attrSet("href", _safe_url(str(c.attrs.get("href", "")), resolve_link))
                elif c.type == "image":
                    c.attrSet("src", _safe_url(str(c.attrs.get("src", "")), resolve_link))
    return md.renderer.render(tokens, md.options, env)


__all__ += ["image_alt", "internal_target"]
