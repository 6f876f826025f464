"""Parity of ``normalize()`` with the shipped editor, proven on a corpus (docs/markdown.md#normalization).

``tests/markdown/parity/expected/<name>.md`` is what the exact editor configuration the app
ships (``web/src/editor/crepe.ts``, Crepe 7.22.1 + features.json) saved for
``corpus/<name>.md``, recorded headless by ``web/scripts/parity.mjs``; CI re-runs that script
with ``--check`` so the files cannot drift from the editor. No Node is needed here.

Every corpus document is either refused by the dialect (``validate`` reports an error: the
editor would change it, so it is never stored) or normalized to exactly the editor's bytes,
except the divergences listed by name, with a reason, in ``parity/divergences.txt``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from openkb.markdown import normalize, validate

HERE = Path(__file__).parent / "parity"
NAMES = sorted(p.stem for p in (HERE / "corpus").glob("*.md"))
DIVERGENT = {
    line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
    for line in (HERE / "divergences.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
}


def _case(name: str) -> tuple[str, str]:
    return (HERE / "corpus" / f"{name}.md").read_text(), (HERE / "expected" / f"{name}.md").read_text()


def _refused(md: str) -> bool:
    return any(i.severity == "error" for i in validate(md))


def test_corpus_is_complete() -> None:
    assert len(NAMES) >= 3000
    # the editor's own output is in the corpus too (own-*): saving it again is proven, not assumed
    assert sum(n.startswith("own-") for n in NAMES) >= 1000
    assert {p.stem for p in (HERE / "expected").glob("*.md")} == set(NAMES)
    assert set(DIVERGENT) <= set(NAMES), "divergences.txt names a document that is not in the corpus"
    assert all(DIVERGENT.values()), "every divergence needs a reason"


@pytest.mark.parametrize("name", NAMES)
def test_normalize_matches_the_editor(name: str) -> None:
    md, expected = _case(name)
    if _refused(md):
        assert name not in DIVERGENT, f"{name} is refused by the dialect: drop it from divergences.txt"
        return
    got = normalize(md)
    if name in DIVERGENT:
        assert got != expected, f"{name} matches the editor now: drop it from divergences.txt"
    else:
        assert got == expected


def test_parity_rate() -> None:
    accepted = [n for n in NAMES if not _refused(_case(n)[0])]
    identical = len(accepted) - len(DIVERGENT)
    assert identical / len(accepted) >= 0.99, (identical, len(accepted))


@pytest.mark.parametrize(
    ("md", "expected"),
    [
        # micromark reads an `_` inside the local part as part of the address (spec-autolinks-028)
        ("first_last@example.com wrote\n", "<first_last@example.com> wrote\n"),
        ("a.b-c_d@a.b.\n", "<a.b-c_d@a.b>.\n"),
        # not an address: the `_` keeps its ordinary meaning
        ("_em_ x\n", "_em_ x\n"),
        ("a_b@c and\n", "a_b\\@c and\n"),
        ("a.b-c_d@a.b_\n", "a.b-c_d\\@a.b\\_\n"),
    ],
)
def test_underscore_inside_an_email_literal(md: str, expected: str) -> None:
    assert normalize(md) == expected


def test_row_without_a_leading_pipe_after_a_short_row_is_refused() -> None:
    # mk-594: micromark starts such a row with an empty cell and shifts its cells right
    md = "| a | b | c |\n| --- | --- | --- |\n| x | y |\nb | q |\n"
    [issue] = [i for i in validate(md) if i.severity == "error"]
    assert (issue.feature, issue.line, issue.column) == ("table", 4, 1)
    assert "start this table row with `|`" in issue.message
    # a leading pipe, or a full row before it, is fine (both read it the same way)
    assert not validate("| a | b | c |\n| --- | --- | --- |\n| x | y |\n| b | q |\n")
    assert not validate("| a | b | c |\n| --- | --- | --- |\n| x | y | z |\nb | q |\n")


@pytest.mark.parametrize(
    "md",
    ["costs \\$5 and \\$6 see **bold**\n", "a \\<b\\> [l](u)\n", "x \\$1 and \\$2 \\\n[l](u)\n"],
)
def test_text_before_a_mark_or_link_keeps_its_escapes(md: str) -> None:
    # Milkdown printed a text node ending in a blank untouched: `$5 and $` came back a formula,
    # `<b>` raw HTML. The shipped editor escapes it (web/src/editor/plugins.ts), and so does this.
    out = normalize(md)
    assert "\\$5" in out or "\\<b" in out or "\\$1" in out, out
    assert not [i for i in validate(out) if i.severity == "error"]
    assert normalize(out) == out
