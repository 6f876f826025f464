"""The dialect's import mode (openkb/importing/repair.py): every construct the editor cannot keep
is transformed on the record — a warning per repair, nothing dropped silently."""

from __future__ import annotations

from openkb.importing.repair import import_markdown
from openkb.markdown import validate


def test_front_matter_becomes_metadata_yaml_and_toml():
    r = import_markdown("---\ntitle: 标题\ntags: a, b\nupdated: 2024-05-06\nowner: x\n---\n# Body\n")
    assert (r.title, r.tags) == ("标题", ["a", "b"])
    assert r.metadata == {"updated": "2024-05-06", "front_matter": {"owner": "x"}}
    assert r.markdown == "# Body\n"
    t = import_markdown('+++\ntitle = "T"\ntags = ["x"]\n+++\ntext\n')
    assert (t.title, t.tags, t.markdown) == ("T", ["x"], "text\n")


def test_front_matter_that_does_not_parse_is_kept_as_a_block():
    r = import_markdown("---\ntitle: [unclosed\n---\ntext\n")
    assert r.title is None and "```yaml" in r.markdown and "title: [unclosed" in r.markdown
    assert any("does not parse" in w for w in r.warnings)


def test_inline_html_to_markdown_or_text_each_with_a_warning():
    r = import_markdown(
        'a <b>b</b> <i>c</i> <code>d</code> <del>e</del> <a href="https://x.org/p">f</a> '
        '<img src="i.png" alt="g"> <sup>h</sup> <custom-tag>\n'
    )
    assert "**b**" in r.markdown and "*c*" in r.markdown and "`d`" in r.markdown and "~~e~~" in r.markdown
    assert "[f](https://x.org/p)" in r.markdown and "![g](i.png)" in r.markdown
    assert " h " in r.markdown and "\\<custom-tag>" in r.markdown  # text kept, unknown tag escaped
    for tag in ("<b>", "<i>", "<code>", "<del>", "<a>", "<img>", "<sup>", "<custom-tag>"):  # one per kind
        assert any(tag[:-1] in w for w in r.warnings), tag
    assert not [i for i in validate(r.markdown) if i.severity == "error"]


def test_html_blocks_convert_or_stay_as_a_marked_block():
    src = (
        "<div><h2>Sub</h2><p>para</p></div>\n\n"
        '<table><tr><td rowspan="2">merged</td><td>b</td></tr><tr><td>c</td></tr></table>\n\n'
        "<!-- editor note -->\n"
    )
    r = import_markdown(src)
    assert "## Sub" in r.markdown and "para" in r.markdown
    assert '```html\n<table><tr><td rowspan="2">merged' in r.markdown  # no GFM form: read-only block
    assert "editor note" not in r.markdown
    assert any("converted to Markdown" in w for w in r.warnings)
    assert any("html code block" in w for w in r.warnings)
    assert any("comment dropped: 'editor note'" in w for w in r.warnings)


def test_clean_markdown_needs_no_repair():
    r = import_markdown("# 标题\n\n正文 *em* and a [link](https://x.org).\n")
    assert r.warnings == [] and r.markdown == "# 标题\n\n正文 *em* and a [link](https://x.org).\n"


def test_a_file_that_starts_with_a_divider_keeps_its_markdown():
    """``---``, a blank line, text, ``---``: two dividers around a paragraph, not a header that
    is "not a mapping" (a YAML code block) nor an empty header (both dividers gone)."""
    r = import_markdown("---\n\nA paragraph.\n\n---\n\nBody text.\n")
    assert r.markdown == "---\n\nA paragraph.\n\n---\n\nBody text.\n" and r.title is None and not r.warnings
    r = import_markdown("---\n\n---\n\nx\n")
    assert r.markdown == "---\n\n---\n\nx\n" and not r.warnings
    # fields after a blank first line are still a header, and no blank line is still a header
    r = import_markdown("---\n\ntitle: T\n---\nbody\n")
    assert (r.title, r.markdown) == ("T", "body\n")
    r = import_markdown("---\nSome paragraph\n---\n\nBody\n")
    assert "```yaml\nSome paragraph\n```" in r.markdown and any("not a mapping" in w for w in r.warnings)
