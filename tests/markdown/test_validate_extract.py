"""Rejections (line/column/feature), import repairs, registry use, extraction and HTML."""

from __future__ import annotations

import pytest

from openkb.errors import MarkdownDialectError
from openkb.indexing.chunker import markdown_plain_text
from openkb.markdown import (
    EDITOR_FEATURES,
    ensure_valid,
    feature,
    links,
    normalize,
    outline,
    plain_text,
    prepare_import,
    render_html,
    validate,
)

U = "123e4567-e89b-12d3-a456-426614174000"
V = "00000000-0000-4000-8000-00000000abcd"


def _err(md: str) -> MarkdownDialectError:
    with pytest.raises(MarkdownDialectError) as info:
        ensure_valid(md)
    return info.value


def test_front_matter_rejected() -> None:
    e = _err("---\ntitle: x\n---\n\nbody\n")
    assert (e.extra["line"], e.extra["column"], e.extra["feature"]) == (1, 1, "front_matter")
    assert e.to_dict()["error"] == "MARKDOWN_DIALECT_ERROR"


def test_toml_front_matter_rejected() -> None:
    assert _err("+++\na = 1\n+++\n").extra["feature"] == "front_matter"


def test_inline_br_rejected_with_position() -> None:
    e = _err("first\n\n中文<br>b\n")
    assert (e.extra["line"], e.extra["column"], e.extra["feature"]) == (3, 3, "html")


def test_block_br_rejected() -> None:
    e = _err("a\n\n  <br/>x\n")
    assert (e.extra["line"], e.extra["column"], e.extra["feature"]) == (3, 3, "html")


def test_raw_html_rejected_and_all_issues_listed() -> None:
    e = _err("ok\n\n<div>\nx\n</div>\n\nand <span>s</span>\n")
    assert (e.extra["line"], e.extra["column"], e.extra["feature"]) == (3, 1, "html")
    assert [(i["line"], i["column"]) for i in e.extra["issues"]] == [(3, 1), (7, 5), (7, 12)]


def test_disabled_features_in_registry() -> None:
    assert not feature("html").enabled and not feature("front_matter").enabled
    assert all(f.key for f in EDITOR_FEATURES)
    with pytest.raises(KeyError):
        feature("nope")


def test_milkdown_own_empty_markers_are_valid() -> None:
    ensure_valid("a\n\n<br />\n\nb\n")
    ensure_valid("| a | b |\n| - | - |\n| <br /> | x |\n")


def test_standard_image_on_its_own_line_is_accepted_and_alt_is_search_text() -> None:
    # regression: a lone image's alt was refused (Crepe wrote its resize ratio there) and a
    # saved `![1.00](...)` put "1.00" into search text
    md = f'![架构图](asset://{U} "说明")\n'
    assert validate(md) == []
    assert normalize(md) == md + "\n"
    assert "架构图" in plain_text(md)
    assert "1.00" not in plain_text(f"![1.00](asset://{U})\n") and "1.50" not in plain_text("![1.50](a.png)\n")
    assert [link.text for link in links(f"![1.50](asset://{U})\n")] == [""]
    # the index's own plain text (chunker) follows the same rule
    assert markdown_plain_text(f"![1.50](asset://{U})\n\n![架构图](a.png)\n") == "架构图"


def test_refusals_where_the_editor_would_change_the_text() -> None:
    assert _err("*a *b* c*\n").extra["feature"] == "emphasis"
    assert _err("__a __b__ c__\n").extra["feature"] == "strong"
    e = _err("| a |\n| - |\n| 1 | 2 |\n")
    assert (e.extra["feature"], e.extra["line"]) == ("table", 3)
    assert _err("x `code\nspan` y\n").extra["feature"] == "inline_code"
    ensure_valid("| a | b |\n| - | - |\n| `x\\|y` | 2 |\n")
    assert _err("x |\n---\n").extra["feature"] == "table"  # the editor reads a setext heading


def test_import_mode_returns_warnings_and_keeps_content() -> None:
    md = "---\ntitle: 标题\n---\n\na<br>b <span>s</span>\n\n<div>\nx\n</div>\n"
    assert {i.severity for i in validate(md, mode="import")} == {"warning"}
    fixed, warnings = prepare_import(md)
    assert len(warnings) == 5
    ensure_valid(fixed)
    text = plain_text(normalize(fixed))
    for piece in ("title: 标题", "a", "b", "<span>s", "<div>"):
        assert piece in text


def test_valid_document_passes() -> None:
    md = f"# 标题\n\n正文 **粗体** [文档](openkb://document/{U})\n\n* [ ] 任务\n\n$$\nx\n$$\n"
    assert validate(md) == []
    ensure_valid(normalize(md))


def test_links_recognised() -> None:
    md = (
        f"# T\n\n见 [设计文档](openkb://document/{U}) 和 [外部](https://x.com)\n"
        f"第二行 ![图](asset://{V.upper()}) [坏](openkb://document/not-a-uuid)\n"
    )
    got = links(md)
    assert [(link.kind, link.target, link.text, link.line) for link in got] == [
        ("document", U, "设计文档", 3),
        ("asset", V, "图", 4),
    ]


def test_outline() -> None:
    md = "# 第一章 Intro\n\ntext\n\n## 小节\n\nSetext\n---\n\n## 小节\n"
    assert [(h.level, h.text, h.line, h.anchor) for h in outline(md)] == [
        (1, "第一章 Intro", 1, "第一章-intro"),
        (2, "小节", 5, "小节"),
        (2, "Setext", 7, "setext"),
        (2, "小节", 10, "小节-1"),
    ]


def test_plain_text() -> None:
    md = (
        "# 标题\n\n* [x] 完成 **粗体** [链接文字](http://x) ![图片说明](a.png) $E=mc^2$\n\n"
        "```python\nprint('中文')\n```\n\n| a | 表格 |\n| - | - |\n| 1 | 2 |\n\n<div>hidden</div>\n"
    )
    text = plain_text(md)
    assert "**" not in text and "](" not in text and "[x]" not in text
    for piece in ("标题", "完成 粗体 链接文字 图片说明 E=mc^2", "print('中文')", "表格"):
        assert piece in text
    assert "hidden" not in text  # raw HTML is not extractable per the registry


def test_render_html_resolves_and_escapes() -> None:
    md = (
        f"[文档](openkb://document/{U}) [私密](openkb://document/{V}) ![i](asset://{U})\n"
        "[x](javascript:alert(1)) <script>alert(1)</script>\n\n<div onclick=x>\n"
    )

    def resolve(kind: str, target: str) -> str | None:
        return f"/{kind}s/{target}" if target == U else None

    html = render_html(md, resolve_link=resolve)
    assert f'href="/documents/{U}"' in html and f'src="/assets/{U}"' in html
    assert f"{V}" not in html  # unresolved (not visible) link does not leak the id
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'href="#"' in html and "javascript" not in html
    assert "<div onclick" not in html


def test_render_html_task_and_heading_ids() -> None:
    html = render_html("# 标题 A\n\n* [x] done\n")
    assert '<h1 id="标题-a">' in html and 'checked=""' in html and "[x]" not in html


def test_a_page_that_starts_with_a_divider_is_not_front_matter() -> None:
    """The editor's own output for a page that starts with a divider and has another one further
    down: the closing ``---`` has a blank line above it, so it is a divider, not a heading's
    underline, and nothing is lost (docs/markdown.md#refused-constructs)."""
    for md in ("---\n\npara\n\n---\n\n", "---\n\n# H\n\ntext\n\n---\n\nmore\n", "---\n\n---\n\n", "---\n---\n"):
        assert normalize(normalize(md)) == normalize(md)
        ensure_valid(normalize(md))
    # fields right above the closing fence still become a heading there: refused as before
    for md in ("---\ntitle: x\n---\n", "---\n\ntitle: x\n---\n", "---\r\ntitle: x\r\n---\r\n", "---\na: 1\n...\n"):
        assert _err(md).extra["feature"] == "front_matter", md
