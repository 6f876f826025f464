"""Rewrite the references of imported Markdown: relative links, images and ``[[wiki links]]``.

Works on the dialect parser's tokens and writes back through the normalizer (the same walk a
save uses), so a URL inside a code span or a fenced block is never touched, reference links are
handled like inline ones, and the result is already normalized. The pipeline decides what a
reference means (a page of this import -> ``openkb://document/<id>``, a file -> ``asset://<id>``);
this module only finds and replaces.

Wiki links (Obsidian, Foam): ``[[Page]]``, ``[[Page|shown text]]``, ``[[Page#Heading]]`` and the
embed ``![[image.png]]``. A target that the resolver cannot name unambiguously stays as text
and the caller records a warning.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import unquote

from markdown_it.token import Token

from openkb.markdown.normalize import normalize_tokens
from openkb.markdown.parser import parse_with_env

__all__ = ["WIKI", "references", "rewrite"]

WIKI = re.compile(r"(!?)\[\[([^\[\]|#\n]+)(#[^\[\]|\n]*)?(?:\|([^\[\]\n]*))?\]\]")

Resolve = Callable[[str, bool], "str | None"]  # (url, is_image) -> new url or None (keep)
ResolveWiki = Callable[[str, str, bool], "str | None"]  # (target, anchor, is_embed) -> url or None


def references(markdown: str) -> list[tuple[str, bool]]:
    """``(url, is_image)`` of every link and image, plus wiki targets as ``("[[target]]", embed)``."""
    out: list[tuple[str, bool]] = []
    tokens, _env = parse_with_env(markdown)
    for tok in tokens:
        for c in tok.children or ():
            if c.type == "link_open":
                out.append((str(c.attrs.get("href", "")), False))
            elif c.type == "image":
                out.append((str(c.attrs.get("src", "")), True))
            elif c.type == "text" and "[[" in c.content:
                out += [(f"[[{m.group(2).strip()}]]", bool(m.group(1))) for m in WIKI.finditer(c.content)]
    return out


def _text(content: str) -> Token:
    t = Token("text", "", 0)
    t.content = content
    return t


_SIZE = re.compile(r"\s*\d+(?:\s*x\s*\d+)?\s*")


def _embed_alt(shown: str | None) -> str:
    """The alternative text of ``![[image.png|…]]``. Obsidian reads a last part that is a size
    (``|300``, ``|300x200``) as the width to show, not as text: the dialect has no image size,
    so it is dropped (``![[a.png|300]]`` had the alt text "300"); what comes before it is the text."""
    parts = (shown or "").split("|")
    if parts and _SIZE.fullmatch(parts[-1]):
        parts.pop()
    return "|".join(parts).strip()


def _wiki_tokens(content: str, wiki: ResolveWiki, unresolved: list[str]) -> list[Token] | None:
    if "[[" not in content:
        return None
    out: list[Token] = []
    pos = 0
    changed = False
    for m in WIKI.finditer(content):
        embed, target, anchor, shown = bool(m.group(1)), m.group(2).strip(), (m.group(3) or ""), m.group(4)
        url = wiki(target, anchor, embed)
        if url is None:
            unresolved.append(m.group(0))
            continue
        changed = True
        if m.start() > pos:
            out.append(_text(content[pos : m.start()]))
        label = (shown if shown is not None else target + (anchor.replace("#", " > ", 1) if anchor else "")).strip()
        if embed:
            alt = _embed_alt(shown)
            img = Token("image", "img", 0, attrs={"src": url, "alt": ""})
            img.children = [_text(alt)] if alt else []
            out.append(img)
        else:
            out.append(Token("link_open", "a", 1, attrs={"href": url}))
            out.append(_text(label or target))
            out.append(Token("link_close", "a", -1))
        pos = m.end()
    if not changed:
        return None
    if pos < len(content):
        out.append(_text(content[pos:]))
    return out


def rewrite(markdown: str, resolve: Resolve, wiki: ResolveWiki, *, shown_url: bool = False) -> tuple[str, list[str]]:
    """The normalized Markdown with references replaced, and the wiki links left as text.
    ``shown_url``: see :func:`edit_tokens`."""
    tokens, _env = parse_with_env(markdown)
    unresolved = edit_tokens(tokens, resolve, wiki, shown_url=shown_url)
    return normalize_tokens(markdown, tokens), unresolved


def _shows(kids: list[Token], url: str) -> bool:
    """Whether the link text ``kids`` is nothing but ``url`` (as written, or percent-decoded)."""
    if not kids or any(k.type not in ("text", "text_special") for k in kids):
        return False
    text = "".join(k.content for k in kids)
    return text in (url, unquote(url))


def edit_tokens(tokens: list[Token], resolve: Resolve, wiki: ResolveWiki, *, shown_url: bool = False) -> list[str]:
    """Replace references in parsed ``tokens`` (in place); returns the wiki links left as text.

    ``shown_url`` (an export and its import, docs/export.md#the-zip): a link whose text is its own
    destination gets the new destination as its text too. So an autolink
    ``<openkb://document/<id>>`` exports as ``[Page.md](<Page.md>)`` (no id in the file: the
    export of an imported copy is byte-identical) and imports back as an autolink to the new id,
    instead of ``[openkb://document/<old id>](...)`` that named an id of another knowledge base."""
    unresolved: list[str] = []
    for tok in tokens:
        if tok.type != "inline" or not tok.children:
            continue
        kids: list[Token] = []
        in_link = 0
        shown: tuple[int, str, str] | None = None  # (where the link's text starts in kids, old url, new url)
        for c in tok.children:
            if c.type == "link_open":
                in_link += 1
                old = str(c.attrs.get("href", ""))
                new = resolve(old, False)
                if new is not None:
                    c.attrSet("href", new)
                    # an autolink, or a relative link (what the export wrote for one); a link
                    # [openkb://...](openkb://...) is no autolink written another way: the stored
                    # form of one is <...>, and the export's fast path leaves its text alone
                    if shown_url and not c.attrs.get("title") and (c.markup == "autolink" or not _SKIP.match(old)):
                        shown = (len(kids) + 1, old, new)
            elif c.type == "link_close":
                in_link -= 1
                if shown is not None and _shows(kids[shown[0] :], shown[1]):
                    del kids[shown[0] :]
                    kids.append(_text(shown[2]))
                shown = None
            elif c.type == "image":
                new = resolve(str(c.attrs.get("src", "")), True)
                if new is not None:
                    c.attrSet("src", new)
            elif c.type == "text" and not in_link:
                repl = _wiki_tokens(c.content, wiki, unresolved)
                if repl is not None:
                    kids += repl
                    continue
            kids.append(c)
        tok.children = kids
    return unresolved


_SKIP = re.compile(r"\A(?:[a-zA-Z][a-zA-Z0-9+.-]*:|#|//)")


def placeholder(nonce: str, i: int) -> str:
    return f"openkb-import://{nonce}/ref{i:06d}"


def mark(markdown: str, nonce: str) -> tuple[str, list[tuple[str, bool]]]:
    """Replace every relative reference by a placeholder (``placeholder(nonce, i)``); returns the
    normalized Markdown and the references in placeholder order.

    Why: this runs where the file is converted (in parallel, before any id exists); the write
    then swaps placeholders for ``openkb://``/``asset://`` URLs with plain string replacement
    (:func:`fill`) instead of parsing the page again. Wiki links are left as text (they need the
    names of every file of the import). ``nonce`` is per run, so no text can collide with it.
    """
    if "](" not in markdown and "]:" not in markdown:
        return markdown, []
    refs: list[tuple[str, bool]] = []

    def resolve(url: str, is_image: bool) -> str | None:
        u = url.strip()
        if not u or _SKIP.match(u):
            return None
        refs.append((url, is_image))
        return placeholder(nonce, len(refs) - 1)

    body, _unresolved = rewrite(markdown, resolve, lambda _t, _a, _e: None)
    return body, refs


def marker(nonce: str, wiki: list[str] | None = None) -> tuple[Callable[[list[Token]], None], list[tuple[str, bool]]]:
    """:func:`mark` for the parse that validates and normalizes the page anyway: an ``edit`` for
    ``validate_and_normalize`` and the list it fills with the references, in placeholder order.
    One parse per page instead of two (the placeholders are what :func:`mark` writes).
    ``wiki`` is filled with the page's wiki links as the write's parse will see them (``![[x]]``;
    none inside code or a link's text): the import decides which images are assets by them."""
    refs: list[tuple[str, bool]] = []

    def resolve(url: str, is_image: bool) -> str | None:
        u = url.strip()
        if not u or _SKIP.match(u):
            return None
        refs.append((url, is_image))
        return placeholder(nonce, len(refs) - 1)

    def edit(tokens: list[Token]) -> None:
        refs.clear()  # only the last (successful) normalization counts
        found = edit_tokens(tokens, resolve, lambda _t, _a, _e: None)
        if wiki is not None:
            wiki[:] = found

    return edit, refs


def fill(markdown: str, nonce: str, refs: list[tuple[str, bool]], resolve: Resolve) -> str:
    """Swap the placeholders of :func:`mark` for what ``resolve`` answers (or the URL as it was).

    Both go through the normalizer's own ``destination`` (a ``#fragment`` may hold parentheses
    or ``&``), so the result is exactly what normalizing the page again would give: the write
    stores it without a second parse (``KeyedItem.normalized``).
    """
    from openkb.markdown._inline import destination

    for i, (url, is_image) in enumerate(refs):
        new = resolve(url, is_image)
        markdown = markdown.replace(placeholder(nonce, i), destination(new if new is not None else url))
    return markdown
