"""What the locked editor (Milkdown Crepe 7.22.1, default features) can hold.

This mirrors the front end's ``feature-registry.ts`` (docs/markdown.md#feature-registry). Server-side
every consumer asks this table instead of hard-coding syntax: ``validate`` rejects a token whose
feature is disabled or unknown, ``normalize`` is the serializer of the enabled ones, and
``extract`` only indexes features with ``supports_search_extraction``.

Crepe UI features that carry no Markdown syntax (Cursor, Toolbar, Placeholder, BlockEdit /
slash menu, LinkTooltip) are not listed: they cannot make a document valid or invalid.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EDITOR_FEATURES", "EditorFeature", "TOKEN_FEATURES", "enabled_features", "feature"]


@dataclass(frozen=True, slots=True)
class EditorFeature:
    key: str
    label: str
    milkdown_plugin: str
    enabled: bool
    markdown_syntax: tuple[str, ...]
    supports_parse: bool = True
    supports_render: bool = True
    supports_serialize: bool = True
    supports_search_extraction: bool = True


_CM = "@milkdown/preset-commonmark"
_GFM = "@milkdown/preset-gfm"

EDITOR_FEATURES: tuple[EditorFeature, ...] = (
    EditorFeature("paragraph", "Paragraph", f"{_CM}:paragraphSchema", True, ("text",)),
    EditorFeature("heading", "Heading", f"{_CM}:headingSchema", True, ("# h1", "## h2", "###### h6")),
    EditorFeature("emphasis", "Italic", f"{_CM}:emphasisSchema", True, ("*em*", "_em_")),
    EditorFeature("strong", "Bold", f"{_CM}:strongSchema", True, ("**strong**", "__strong__")),
    EditorFeature("inline_code", "Inline code", f"{_CM}:inlineCodeSchema", True, ("`code`",)),
    EditorFeature(
        "code_block", "Code block", "Crepe.Feature.CodeMirror", True, ("```lang\ncode\n```",)
    ),
    EditorFeature("blockquote", "Quote", f"{_CM}:blockquoteSchema", True, ("> quote",)),
    EditorFeature("bullet_list", "Bullet list", f"{_CM}:bulletListSchema", True, ("* item",)),
    EditorFeature("ordered_list", "Ordered list", f"{_CM}:orderedListSchema", True, ("1. item",)),
    EditorFeature("task_list", "Task list", f"{_GFM}:extendListItemSchemaForTask", True, ("* [ ] todo", "* [x] done")),
    EditorFeature("link", "Link", f"{_CM}:linkSchema", True, ("[text](url \"title\")", "<https://url>")),
    EditorFeature(
        "internal_link", "Document link", f"{_CM}:linkSchema", True, ("[title](openkb://document/{uuid})",)
    ),
    EditorFeature("image", "Inline image", f"{_CM}:imageSchema", True, ("![alt](src \"title\")",)),
    EditorFeature(
        "image_block",
        "Image block",
        "Crepe.Feature.ImageBlock",
        True,
        ("![1.00](asset://{uuid} \"caption\")",),
    ),
    EditorFeature("hard_break", "Line break", f"{_CM}:hardbreakSchema", True, ("text\\\nmore",)),
    EditorFeature("thematic_break", "Divider", f"{_CM}:hrSchema", True, ("***",)),
    EditorFeature("table", "Table", "Crepe.Feature.Table", True, ("| a | b |\n| - | - |\n| 1 | 2 |",)),
    EditorFeature("strikethrough", "Strikethrough", f"{_GFM}:strikethroughSchema", True, ("~~del~~",)),
    EditorFeature(
        "autolink", "Autolink literal", f"{_GFM}:remarkGFMPlugin", True, ("www.x.com", "https://x", "a@b.co")
    ),
    EditorFeature("footnote", "Footnote", f"{_GFM}:footnoteDefinitionSchema", True, ("text[^1]", "[^1]: note")),
    EditorFeature("math_inline", "Inline formula", "Crepe.Feature.Latex", True, ("$x^2$",)),
    EditorFeature("math_block", "Formula block", "Crepe.Feature.Latex", True, ("$$\n\\sum x\n$$",)),
    EditorFeature(
        "empty_line",
        "Empty paragraph",
        f"{_CM}:remarkPreserveEmptyLinePlugin",
        True,
        ("<br />",),
        supports_search_extraction=False,
    ),
    EditorFeature(
        "reference_link",
        "Reference link",
        f"{_CM}:remarkInlineLinks",
        True,
        ("[text][ref]\n\n[ref]: url",),
        supports_serialize=False,  # written back as an inline link, definition dropped
    ),
    EditorFeature(
        "html",
        "Raw HTML",
        f"{_CM}:htmlSchema",
        False,  # shown as an uneditable atom, `<br>` is deleted: never store it
        ("<div>", "<span>", "<br>"),
        supports_render=False,
        supports_serialize=False,
        supports_search_extraction=False,
    ),
    EditorFeature(
        "front_matter",
        "Front matter",
        "(none)",
        False,  # Milkdown reads `---` as a rule + setext heading and destroys it
        ("---\nkey: value\n---", "+++\nkey = 1\n+++"),
        supports_parse=False,
        supports_render=False,
        supports_serialize=False,
        supports_search_extraction=False,
    ),
)

_BY_KEY = {f.key: f for f in EDITOR_FEATURES}

# markdown-it token type -> feature key. A token type missing here is a construct outside the
# registry, which validate() reports as feature "unknown".
TOKEN_FEATURES: dict[str, str] = {
    "paragraph_open": "paragraph",
    "inline": "paragraph",
    "text": "paragraph",
    "text_special": "paragraph",
    "softbreak": "paragraph",
    "heading_open": "heading",
    "em_open": "emphasis",
    "strong_open": "strong",
    "code_inline": "inline_code",
    "fence": "code_block",
    "code_block": "code_block",
    "blockquote_open": "blockquote",
    "bullet_list_open": "bullet_list",
    "ordered_list_open": "ordered_list",
    "list_item_open": "bullet_list",
    "link_open": "link",
    "image": "image",
    "hardbreak": "hard_break",
    "hr": "thematic_break",
    "table_open": "table",
    "thead_open": "table",
    "tbody_open": "table",
    "tr_open": "table",
    "th_open": "table",
    "td_open": "table",
    "s_open": "strikethrough",
    "footnote_ref": "footnote",
    "footnote_reference_open": "footnote",
    "footnote_block_open": "footnote",
    "footnote_open": "footnote",
    "footnote_anchor": "footnote",
    "math_inline": "math_inline",
    "math_inline_double": "math_inline",
    "math_block": "math_block",
    "html_block": "html",
    "html_inline": "html",
}


def feature(key: str) -> EditorFeature:
    """Raises KeyError for an unknown key: a typo must not read as 'disabled'."""
    return _BY_KEY[key]


def enabled_features() -> tuple[EditorFeature, ...]:
    return tuple(f for f in EDITOR_FEATURES if f.enabled)


def is_enabled(key: str) -> bool:
    f = _BY_KEY.get(key)
    return bool(f and f.enabled)
