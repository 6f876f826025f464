"""The line comparison of two versions (openkb/content/compare.py, docs/api.md#comparing-versions):
its diff rebuilds the newer text from the older, shows removals before additions, matches
``diff -u`` where the matching is unambiguous, and is refused rather than run past its bound."""

from __future__ import annotations

import difflib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openkb.content import compare
from openkb.content.compare import unified_diff
from openkb.errors import TooManyChanges

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$")


def apply(before: list[str], diff: str) -> list[str]:
    """The newer lines from the older ones and a unified diff (checks each context and removal)."""
    lines = diff.splitlines()
    assert lines[:2] == ["--- a", "+++ b"]
    out: list[str] = []
    pos = 0  # next line of ``before`` not yet copied
    for line in lines[2:]:
        m = HUNK.match(line)
        if m:
            start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
            assert start >= pos
            out += before[pos:start]
            pos = start
            continue
        sign, text = line[0], line[1:]
        if sign == "+":
            out.append(text)
        else:
            assert before[pos] == text, (sign, text, before[pos])
            pos += 1
            if sign == " ":
                out.append(text)
    return out + before[pos:]


def lcs(a: list[str], b: list[str]) -> int:
    """Length of a longest common subsequence (the textbook table)."""
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], prev + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


def text_of(lines: list[str]) -> str:
    return "".join(f"{x}\n" for x in lines)


lines = st.lists(st.sampled_from(["", "# Title", "alpha", "beta", "中文段落", "- item", "gamma"]), max_size=40)


@settings(max_examples=300, deadline=None)
@given(lines, lines)
def test_the_diff_rebuilds_the_newer_text_and_counts_its_lines(a: list[str], b: list[str]) -> None:
    got = unified_diff(text_of(a), text_of(b), from_label="a", to_label="b")
    if a == b:
        assert got == {"diff": "", "added_lines": 0, "removed_lines": 0}
        return
    assert apply(a, got["diff"]) == b
    body = [x for x in got["diff"].splitlines()[2:] if not x.startswith("@@")]
    assert got["added_lines"] == sum(x.startswith("+") for x in body)
    assert got["removed_lines"] == sum(x.startswith("-") for x in body)
    # the smallest diff there is: everything outside a longest common subsequence, nothing more
    assert got["removed_lines"] == len(a) - lcs(a, b)
    assert got["added_lines"] == len(b) - lcs(a, b)
    # in each run of changes, what was removed comes before what was added
    assert not re.search(r"^\+.*\n-", got["diff"], re.M)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            ["# Plan", "", "one", "", "two", "", "three", "", "four", "", "five"],
            ["# Plan", "", "one", "", "TWO", "", "three", "", "four", "", "five"],
        ),
        (["a", "b", "c"], ["start", "a", "b", "c"]),
        (["a", "b", "c"], ["a", "b"]),
        ([], ["only", "new"]),
        (["gone"], []),
        ([f"line {i}" for i in range(30)], [f"line {i}" for i in range(30) if i not in (3, 20)] + ["end"]),
    ],
)
def test_the_same_text_as_diff_u_where_the_matching_is_unambiguous(a: list[str], b: list[str]) -> None:
    expected = "".join(
        x + "\n" for x in difflib.unified_diff(a, b, fromfile="version 1", tofile="version 2", lineterm="", n=3)
    )
    got = unified_diff(text_of(a), text_of(b), from_label="version 1", to_label="version 2")
    assert got["diff"] == expected


def test_a_page_without_a_final_newline_compares_by_its_lines() -> None:
    got = unified_diff("one\ntwo", "one\ntwo\n", from_label="a", to_label="b")
    assert got == {"diff": "", "added_lines": 0, "removed_lines": 0}


@settings(max_examples=200, deadline=None)
@given(lines, lines)
def test_past_the_bound_stretches_are_cut_at_lines_found_once_and_still_rebuild(a: list[str], b: list[str]) -> None:
    """Anchored on the lines found once in each version (patience diff), the diff is no longer
    always the smallest, but it still turns one text into the other, removals first."""
    previous = compare.MAX_LINE_PAIRS
    compare.MAX_LINE_PAIRS = 4
    try:
        got = unified_diff(text_of(a), text_of(b), from_label="a", to_label="b")
    except TooManyChanges:
        return  # a long stretch with no line of its own: refused, never guessed
    finally:
        compare.MAX_LINE_PAIRS = previous
    if a != b:
        assert apply(a, got["diff"]) == b
        assert got["added_lines"] - got["removed_lines"] == len(b) - len(a)
        assert not re.search(r"^\+.*\n-", got["diff"], re.M)


def test_a_long_page_edited_all_over_is_compared_piece_by_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare, "MAX_LINE_PAIRS", 10_000)
    a = [x for i in range(2_000) for x in (f"Paragraph {i}.", "")]
    b = [x for i in range(2_000) for x in (f"Paragraph {i}{' (changed)' if i % 10 == 0 else ''}.", "")]
    got = unified_diff(text_of(a), text_of(b), from_label="a", to_label="b")
    assert (got["added_lines"], got["removed_lines"]) == (200, 200)  # the smallest diff, here
    assert apply(a, got["diff"]) == b


def test_too_many_changed_lines_are_refused_not_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare, "MAX_LINE_PAIRS", 100)
    same = [f"same {i}" for i in range(5_000)]
    # the lines both versions start and end with do not count: one change in a long page is fine
    got = unified_diff(text_of([*same, "old", *same]), text_of([*same, "new", *same]), from_label="a", to_label="b")
    assert (got["added_lines"], got["removed_lines"]) == (1, 1)
    # nothing in common in the stretch: all of it replaced, however long
    got = unified_diff(
        text_of([f"x{i}" for i in range(50)]), text_of([f"y{i}" for i in range(40)]), from_label="a", to_label="b"
    )
    assert (got["added_lines"], got["removed_lines"]) == (40, 50)
    # repeated lines only, past the bound: no line to cut at
    with pytest.raises(TooManyChanges) as e:
        unified_diff(text_of(["x", "y"] * 10), text_of(["y", "x", "x"] * 7), from_label="a", to_label="b")
    assert e.value.code == "TOO_MANY_CHANGES" and e.value.extra["lines"] == [20, 21]
    assert "differ over 20 and 21 lines with no line of their own" in e.value.detail
