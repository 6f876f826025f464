"""Round-trip per enabled feature, parity with recorded Milkdown output, idempotence."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openkb.markdown import enabled_features, ensure_valid, normalize
from openkb.markdown.normalize import js_length

U = "123e4567-e89b-12d3-a456-426614174000"

# feature key -> (canonical Milkdown form, non-canonical variants that must normalize to it)
ROUND_TRIP: dict[str, tuple[str, list[str]]] = {
    "paragraph": (
        "中文段落 and English\nsecond line\n",
        ["中文段落 and English  \nsecond line"[:0] + "中文段落 and English\nsecond line"],
    ),
    "heading": ("# Setext\n\n## Two\n", ["Setext\n===\n\nTwo\n---", "# Setext #\n\n## Two ##"]),
    "emphasis": ("*a* _b_\n", ["*a* _b_"]),
    "strong": ("**a** __b__\n", ["**a** __b__"]),
    "inline_code": ("`code` and ``a`b``\n", ["` code ` and `` a`b ``"]),
    "code_block": ("```python\nprint(1)\n```\n\n", ["~~~python\nprint(1)\n~~~", "```python\nprint(1)"]),
    "blockquote": ("> quote\n>\n> 引用\n\n", [">quote\n>\n>引用"]),
    "bullet_list": ("- a\n- b\n  - c\n\n", ["* a\n* b\n  * c", "+ a\n+ b\n  + c"]),
    "ordered_list": ("1. a\n2. b\n\n", ["1. a\n1. b", "1) a\n2) b"]),
    "task_list": ("- [ ] todo\n- [x] done\n\n", ["* [ ] todo\n* [X] done"]),
    "link": (
        '[a](http://x.com "T") <https://x.com>\n',
        ["[a][r] [https://x.com](https://x.com)\n\n[r]: http://x.com 'T'"],
    ),
    "internal_link": (f"[文档](openkb://document/{U})\n", [f"[文档]( openkb://document/{U} )"]),
    "image": ('text ![alt](a.png "t") more\n', ["text ![alt](<a.png> 't') more"]),
    "image_block": (f'![图片](asset://{U} "caption")\n\n', [f"![图片](<asset://{U}> 'caption')"]),
    "hard_break": ("line\\\nnext\n", ["line  \nnext"]),
    "thematic_break": ("a\n\n---\n\nb\n", ["a\n\n___\n\nb", "a\n\n* * *\n\nb"]),
    "table": (
        "| 名称 |  b  |  c |\n| :- | :-: | -: |\n| 中文 |  x  |  1 |\n\n",
        ["|名称|b|c|\n|:--|:-:|--:|\n|中文|x|1|"],
    ),
    "strikethrough": ("~~del~~\n", ["~del~"]),
    "autolink": ("[www.x.com](http://www.x.com) <https://a.b/c> <me@x.org>\n", ["www.x.com https://a.b/c me@x.org"]),
    "footnote": ("text[^1]\n\n[^1]: note\n\n", ["text[^1]\n\n[^1]:   note"]),
    "math_inline": ("$x^2$\n", ["$$x^2$$"]),
    "math_block": ("$$\n\\sum x\n$$\n\n", ["```latex\n\\sum x\n```"]),
    "empty_line": ("a\n\n<br />\n\nb\n", ["a\n\n<br>\n\nb"]),
    "reference_link": ("[a](http://x.com)\n", ["[a][x]\n\n[x]: http://x.com"]),
}


def test_every_enabled_feature_has_a_round_trip_case() -> None:
    assert {f.key for f in enabled_features()} == set(ROUND_TRIP)


@pytest.mark.parametrize("key", sorted(ROUND_TRIP))
def test_round_trip(key: str) -> None:
    canonical, variants = ROUND_TRIP[key]
    assert normalize(canonical) == canonical
    ensure_valid(canonical)
    for v in variants:
        assert normalize(v) == canonical, v


def test_escapes_and_entities() -> None:
    assert normalize("5 * 3 \\<tag> [x] &copy; a_b _x") == "5 \\* 3 \\<tag> \\[x] © a_b \\_x\n"


def test_adjacent_lists_alternate_marker() -> None:
    assert normalize("* a\n+ b\n- c") == "- a\n\n* b\n\n- c\n\n"


def test_loose_list() -> None:
    assert normalize("- a\n\n- b") == "- a\n\n- b\n\n"


def test_table_pads_by_js_length() -> None:
    assert js_length("中文") == 2 and js_length("😀") == 2
    out = normalize("| 😀 | b |\n|---|---|\n| x | y |")
    assert out == "| 😀 | b |\n| -- | - |\n| x  | y |\n\n"


def test_empty_cell_and_missing_body() -> None:
    assert normalize("| a |\n|---|") == "| a      |\n| ------ |\n| <br /> |\n\n"


def test_front_matter_is_destroyed_like_milkdown() -> None:
    # normalize mirrors the editor; validate() is what stops this from being saved
    assert normalize("---\ntitle: x\n---\n\nbody") == "---\n\n## title: x\n\nbody\n"


def test_image_block_keeps_alt_text() -> None:
    # Crepe's default wrote the resize ratio into the alt slot (`![1.00](...)`); the image_alt
    # plugin (features.json) keeps the alt and writes a ratio only for a resized image.
    assert normalize(f"![架构图](asset://{U})") == f"![架构图](asset://{U})\n\n"
    assert normalize("![1.00](a.png)") == "![](a.png)\n\n"
    assert normalize('![1.50](a.png "c")') == '![1.50](a.png "c")\n\n'
    assert normalize("![a [x]](a.png)") == "![a \\[x\\]](a.png)\n\n"


def test_parity_fixes() -> None:
    # each of these differed from the editor (tests/markdown/parity)
    assert normalize("| a |\n| - |\n| x\\ |") == "| a   |\n| --- |\n| x\\\\ |\n\n"  # cell ends in `\`
    assert normalize("# $x$ a $y$ b\\") == "# $x$ a $y$ b\\\\\n"  # `$` at 0 and a final backslash
    assert normalize("$a\\$b$") == "$a\\$b\\$\n"  # no escapes inside a formula (remark-math)
    assert normalize("[l](http://a.b/c?x=1&y=2)") == "[l](http://a.b/c?x=1\\&y=2)\n"
    assert normalize("``` foo\\+bar\nx\n```") == "```foo+bar\nx\n```\n\n"
    assert normalize("$$\n$$") == "$$\n$$\n\n"
    assert normalize("- [ ]\n- [x]") == "- \\[ ]\n- \\[x]\n\n"  # no task without text
    assert normalize("- [x]  two") == "- [x] &#x20;two\n\n"
    assert normalize("\xa0 a") == "\xa0 a\n"  # a no-break space is content, not indentation
    assert normalize("- [x] a\n- b\n\n[x]: y") == "- [x] a\n- b\n\n"  # a task, not a reference link
    assert normalize("* a\n  > b\n  >\n* c") == "- a\n  > b\n- c\n\n"  # the `>` line is the quote's


def test_dash_rule_after_paragraph_in_tight_item_gets_a_blank_line() -> None:
    # `- a\n  ---` would read back as a setext heading
    assert normalize("- a\n  ***\n- b") == "- a\n\n  ---\n- b\n\n"


_INLINE = st.sampled_from(
    [
        "word",
        "中文",
        "*em*",
        "_em_",
        "**b**",
        "`c`",
        "[l](http://a.b)",
        "~~d~~",
        "~d~",
        "$x$",
        "www.x.com",
        "https://x.org/p",
        "a@b.co",
        "5 * 3",
        "a_b",
        "[y]",
        "<3",
        "&amp;",
        "#",
        "\\*",
        "a  \nb",
        "a\\\nb",
        "|",
        "![i](a.png)",
        f"[d](openkb://document/{U})",
        "1. x",
        "- x",
        "+",
        "=",
        "$",
    ]
)
_LINE = st.lists(_INLINE, min_size=1, max_size=5).map(" ".join)


@st.composite
def _block(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 8))
    text = draw(_LINE)
    if kind == 0:
        return "#" * draw(st.integers(1, 6)) + " " + text
    if kind == 1:
        m = draw(st.sampled_from(["-", "*", "+", "1.", "- [ ]", "- [x]"]))
        items = draw(st.lists(_LINE, min_size=1, max_size=3))
        return draw(st.sampled_from(["\n", "\n\n"])).join(f"{m} {i}" for i in items)
    if kind == 2:
        return "> " + text
    if kind == 3:
        cells = draw(st.lists(st.sampled_from(["a", "中文", "**b**", "", "`x`"]), min_size=1, max_size=3))
        sep = draw(st.lists(st.sampled_from(["---", ":--", "--:", ":-:"]), min_size=len(cells), max_size=len(cells)))
        return "| " + " | ".join(cells) + " |\n| " + " | ".join(sep) + " |\n| " + " | ".join(reversed(cells)) + " |"
    if kind == 4:
        return "```" + draw(st.sampled_from(["", "py", "latex"])) + "\n" + text + "\n```"
    if kind == 5:
        return "$$\n" + text + "\n$$"
    if kind == 6:
        return draw(st.sampled_from(["***", "---", "___"]))
    return text


@settings(max_examples=150, deadline=None)
@given(st.lists(_block(), min_size=1, max_size=5).map("\n\n".join))
def test_idempotent(doc: str) -> None:
    once = normalize(doc)
    assert normalize(once) == once
