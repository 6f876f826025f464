"""The chunker is pure: these tests need no database."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from openkb.indexing import chunker
from openkb.indexing.chunker import (
    MAX_TOKENS,
    chunk_markdown,
    count_tokens,
    index_text,
    markdown_plain_text,
    strip_index_text,
)
from openkb.markdown.parser import parse
from tests.steps import lines_run

ZH = "权限检查在数据库里完成，检索索引只做预过滤。知识库支持中文和英文混合搜索。"
EN = "The index worker recomputes chunks and upserts rows into the active collection. "


def test_token_estimate_counts_cjk_per_char_and_words():
    assert count_tokens("你好世界") == 4
    assert count_tokens("hello world") == 2
    assert count_tokens("Milvus 原生检索") == 1 + 4
    assert count_tokens("") == 0


def test_empty_and_blank_documents_have_no_chunks():
    assert chunk_markdown("") == []
    assert chunk_markdown("  \n\n \n") == []


def test_heading_paths_follow_the_outline():
    md = (
        "# Guide\n\nIntro text here.\n\n## Install\n\n"
        + EN * 30
        + "\n\n### Linux\n\n"
        + EN * 30
        + "\n\n## Usage\n\n"
        + EN * 30
        + "\n"
    )
    chunks = chunk_markdown(md)
    paths = [c.heading_path for c in chunks]
    assert ["Guide", "Install"] in paths or ["Guide"] in paths
    assert ["Guide", "Install", "Linux"] in paths
    assert ["Guide", "Usage"] in paths
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    # "## Usage" is a sibling of Linux: never in the same chunk as Linux's text
    for c in chunks:
        assert not ("Linux" in c.content_text and "Usage" in c.content_text)


def test_small_sections_merge_into_their_parent_not_their_sibling():
    md = "# A\n\nshort.\n\n## A1\n\nalso short.\n\n# B\n\nother.\n"
    chunks = chunk_markdown(md)
    assert len(chunks) == 2
    assert chunks[0].heading_path == ["A"] and "also short" in chunks[0].content_text
    assert chunks[1].heading_path == ["B"]


def test_a_heading_is_not_left_behind_without_its_text():
    md = "# T\n\n" + EN * 20 + "\n\n## Next\n\n" + EN * 20 + "\n"
    for c in chunk_markdown(md, target_tokens=200):
        assert not c.content_markdown.rstrip().endswith("## Next")


def test_stable_output_for_unchanged_input_and_line_endings():
    md = "# 标题\n\n" + ZH * 40 + "\n\n```py\nx = 1\n```\n\n| a | b |\n| - | - |\n| 1 | 2 |\n"
    a, b = chunk_markdown(md), chunk_markdown(md)
    assert a == b
    assert chunk_markdown(md.replace("\n", "\r\n")) == a


def test_chinese_and_english_chunks_have_comparable_token_sizes():
    zh = chunk_markdown("\n\n".join([ZH * 3] * 40))
    en = chunk_markdown("\n\n".join([EN * 3] * 40))
    assert len(zh) > 1 and len(en) > 1
    for c in zh + en:
        assert c.token_count <= MAX_TOKENS
    zh_avg = sum(c.token_count for c in zh) / len(zh)
    en_avg = sum(c.token_count for c in en) / len(en)
    assert 0.5 < zh_avg / en_avg < 2.0
    # the Chinese budget is in characters, not bytes: a chunk holds hundreds of characters
    assert max(len(c.content_text) for c in zh) > 200


def test_long_code_block_splits_between_lines_and_each_piece_is_fenced():
    code_lines = [f"    value_{i} = compute_something({i}, other_argument={i * 2})  # line {i}" for i in range(400)]
    md = "# Code\n\n```python\n" + "\n".join(code_lines) + "\n```\n"
    chunks = chunk_markdown(md)
    assert len(chunks) > 1
    seen: list[str] = []
    for c in chunks:
        toks = [t for t in parse(c.content_markdown) if t.type == "fence"]
        assert len(toks) == 1 and toks[0].info == "python"
        body = toks[0].content.rstrip("\n").split("\n")
        assert all(line in code_lines for line in body)  # whole lines only
        seen.extend(body)
    assert seen == code_lines


def test_long_table_splits_between_rows_with_the_header_repeated():
    rows = [f"| row {i} | {ZH[:10]} {i} | value number {i} with words |" for i in range(300)]
    md = "| name | 描述 | value |\n| --- | --- | --- |\n" + "\n".join(rows) + "\n"
    chunks = chunk_markdown(md)
    assert len(chunks) > 1
    got: list[str] = []
    for c in chunks:
        lines = c.content_markdown.split("\n")
        assert lines[0] == "| name | 描述 | value |" and lines[1].startswith("| ---")
        assert any(t.type == "table_open" for t in parse(c.content_markdown))
        got.extend(lines[2:])
        assert c.content_text.startswith("name | 描述 | value")
    assert got == rows


def test_long_list_splits_between_items():
    items = [f"- item {i}: " + EN for i in range(200)]
    chunks = chunk_markdown("\n".join(items) + "\n")
    assert len(chunks) > 1
    got = [line for c in chunks for line in c.content_markdown.split("\n")]
    assert got == items


def test_one_huge_paragraph_splits_at_sentence_ends():
    md = ZH * 200
    chunks = chunk_markdown(md)
    assert len(chunks) > 1
    assert "".join(c.content_text for c in chunks) == md
    for c in chunks[:-1]:
        assert c.content_text.endswith(("。", "，")) or c.token_count <= MAX_TOKENS


def test_plain_text_drops_markup_but_keeps_words():
    text = markdown_plain_text("A **bold** [link](http://x.io) `code` ![alt text](i.png)\n\n<div>html words</div>\n")
    assert "bold" in text and "link" in text and "code" in text and "alt text" in text and "html words" in text
    assert "**" not in text and "http://x.io" not in text


def test_index_text_round_trip_and_title_dedup():
    t = index_text("Guide", ["Guide", "Install"], "body")
    assert t == "Guide / Install\nbody"
    assert strip_index_text("Guide", ["Guide", "Install"], t) == "body"
    assert index_text("", [], "body") == "body"


_BLOCKS = st.sampled_from(
    [
        lambda r: f"{'#' * r.randint(1, 4)} Heading {r.randint(0, 99)}",
        lambda r: " ".join(
            r.choice(["alpha", "beta", "检索", "权限", "gamma.", "知识库。"]) for _ in range(r.randint(1, 300))
        ),
        lambda r: "```\n" + "\n".join(f"line {i}" for i in range(r.randint(1, 200))) + "\n```",
        lambda r: "| a | b |\n| - | - |\n" + "\n".join(f"| {i} | x{i} |" for i in range(r.randint(1, 150))),
        lambda r: "\n".join(f"- item {i} words words" for i in range(r.randint(1, 120))),
        lambda r: "> quoted " + "text " * r.randint(1, 50),
    ]
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_BLOCKS, min_size=1, max_size=12), st.integers(0, 10_000))
def test_property_deterministic_bounded_and_lossless(blocks, seed):
    r = random.Random(seed)
    md = "\n\n".join(b(r) for b in blocks) + "\n"
    a = chunk_markdown(md)
    assert a == chunk_markdown(md)
    assert [c.ordinal for c in a] == list(range(len(a)))
    words_in = markdown_plain_text(md).split()
    words_out = [w for c in a for w in c.content_text.split()]
    # every word of the document is in exactly one chunk, in order (table headers repeat)
    assert [w for w in words_out if w not in ("a", "b", "|")] == [w for w in words_in if w not in ("a", "b", "|")]
    for c in a:
        assert c.token_count <= MAX_TOKENS + 64  # a unit is only over the cap if one line is


def _chunker_steps(markdown: str) -> int:
    """Lines of ``openkb/indexing/chunker.py`` run while chunking ``markdown``."""
    return lines_run(chunker.__file__, lambda: chunk_markdown(markdown))


def test_many_small_blocks_in_one_chunk_cost_in_proportion_to_their_number():
    """A chunk's token total and whether it holds more than headings are kept as units are added:
    they used to be summed again for each unit, so a page of blocks with no tokens (images with
    no alt text, empty headings: all in one chunk) cost the square of their number."""
    pages = {
        "images with no alt text": lambda n: "![](a.png)\n\n" * n,
        "empty headings under a heading": lambda n: "# a\n\n" + "##\n\n" * n,
    }
    for name, page in pages.items():
        ratio = _chunker_steps(page(2_000)) / _chunker_steps(page(500))
        assert ratio < 5, (name, ratio)  # x4 the blocks: ~x4 the work (the square was ~x14)
    chunks = chunk_markdown("![](a.png)\n\n" * 2_000)
    assert len(chunks) == 1 and chunks[0].metadata["lines"] == [1, 3_999]
