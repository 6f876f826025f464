"""Every reference to the documentation points at a page and a section that exist.

Code, tests, notes and the pages themselves cite ``docs/<page>.md`` (optionally
``#<section>``); a page that was renamed or a heading that was reworded would leave those
citations pointing nowhere, and nothing else notices (``mkdocs build --strict`` checks links
between pages, not citations in comments). Anchors are computed the way MkDocs computes them:
by Python-Markdown's ``toc`` extension on the page itself, so a rule like "punctuation is
dropped" is never re-implemented here.

The spec's numbered documents (``docs/05``, ``prompts/04`` ...) are not part of this repository:
citing them sends a reader to a file that does not exist, so they are refused outright.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

import markdown
import pytest

SELF = Path(__file__).resolve()
ROOT = SELF.parents[1]
DOCS = ROOT / "docs"
SCANNED_SUFFIXES = (".py", ".md", ".toml")
SKIPPED_DIRS = {
    ".git",
    ".venv",
    "venv",
    "node_modules",
    "site",
    "build",
    "dist",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
}

# ``docs/<page>.md`` optionally followed by ``#anchor``; not preceded by a word character or a
# slash (``/api/docs/x.md``, ``github.com/o/r/docs/x.md`` are someone else's docs), except for
# leading ``../`` segments of a relative link.
DOC_REF = re.compile(r"(?<![\w/.-])(?:\.\./)*docs/([\w.-]+?\.md)(?:#([\w-]+))?")
# Inside docs/: Markdown links to a sibling page or to a section of the same page.
PAGE_LINK = re.compile(r"\]\((?!https?:|mailto:)([\w.-]+\.md)?(?:#([\w-]+))?\)")
# The spec's numbered files: docs/05, docs/05-07, prompts/04 ...
NUMBERED = re.compile(r"(?<![\w/])(?:docs|prompts)/\d\d")


@dataclass(frozen=True)
class Ref:
    where: str  # "path:line"
    page: str  # "permissions.md"
    anchor: str | None  # "the-folder-gate-rule"

    def __str__(self) -> str:
        return f"{self.where}: docs/{self.page}" + (f"#{self.anchor}" if self.anchor else "")


def scanned_files(root: Path = ROOT) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIPPED_DIRS and not d.endswith(".egg-info")]
        out.extend(Path(dirpath) / f for f in filenames if f.endswith(SCANNED_SUFFIXES))
    # this file quotes broken and numbered references on purpose, to test the checker
    return sorted(p for p in out if p.resolve() != SELF)


def references_in(text: str, rel: str, *, in_docs: bool) -> list[Ref]:
    """Every documentation reference in one file's text; ``rel`` is its path for messages."""
    refs: list[Ref] = []
    page_of_file = rel.rsplit("/", 1)[-1]
    for lineno, line in enumerate(text.splitlines(), 1):
        where = f"{rel}:{lineno}"
        for m in DOC_REF.finditer(line):
            refs.append(Ref(where, m.group(1), m.group(2)))
        if in_docs:
            for m in PAGE_LINK.finditer(line):
                page, anchor = m.group(1), m.group(2)
                if page is None and anchor is None:
                    continue
                refs.append(Ref(where, page or page_of_file, anchor))
    return refs


@cache
def anchors_of(page: str) -> frozenset[str]:
    """The heading ids MkDocs gives ``docs/<page>`` (Python-Markdown's toc, as mkdocs.yml uses it)."""
    # MkDocs always enables toc, tables and fenced_code (a fence's "# comment" is no heading)
    md = markdown.Markdown(extensions=["toc", "tables", "fenced_code", "admonition"])
    md.convert((DOCS / page).read_text(encoding="utf-8"))

    def walk(tokens: list[dict]) -> list[str]:
        ids: list[str] = []
        for t in tokens:
            ids.append(t["id"])
            ids.extend(walk(t["children"]))
        return ids

    return frozenset(walk(md.toc_tokens))


def problems(refs: list[Ref]) -> list[str]:
    out: list[str] = []
    for r in refs:
        if not (DOCS / r.page).is_file():
            out.append(f"{r}: no page docs/{r.page}")
        elif r.anchor is not None and r.anchor not in anchors_of(r.page):
            out.append(f"{r}: docs/{r.page} has no section with the anchor #{r.anchor}")
    return out


def numbered_references(text: str, rel: str) -> list[str]:
    return [f"{rel}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if NUMBERED.search(line)]


@lru_cache(maxsize=1)
def repository_references() -> tuple[Ref, ...]:
    refs: list[Ref] = []
    for path in scanned_files():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        refs.extend(references_in(text, rel, in_docs=rel.startswith("docs/")))
    return tuple(refs)


# --- the repository --------------------------------------------------------------------------------


def test_every_documentation_reference_resolves() -> None:
    found = problems(list(repository_references()))
    assert not found, "documentation references that point nowhere:\n" + "\n".join(found)


def test_no_reference_to_the_specs_numbered_documents() -> None:
    found: list[str] = []
    for path in scanned_files():
        rel = path.relative_to(ROOT).as_posix()
        found += numbered_references(path.read_text(encoding="utf-8", errors="replace"), rel)
    assert not found, (
        "cite the project's docs/<page>.md (see docs/index.md), not the spec's numbered documents:\n" + "\n".join(found)
    )


def test_code_cites_the_documentation() -> None:
    """The scan sees the citations that exist (a regex that matched nothing would pass the two
    tests above vacuously): the permission service cites the permissions page from code."""
    refs = repository_references()
    from_code = [r for r in refs if not r.where.startswith("docs/")]
    assert any(r.where.startswith("openkb/permissions/") and r.page == "permissions.md" for r in from_code)
    assert {r.page for r in from_code} >= {"permissions.md", "retrieval.md", "accounts.md"}


def test_every_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert pages, "docs/ holds no pages"
    missing = [p for p in pages if not re.search(rf":\s*{re.escape(p)}\s*$", nav, re.MULTILINE)]
    assert not missing, f"pages not in mkdocs.yml nav: {missing}"


# --- the checker itself ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see docs/permissions.md", [("permissions.md", None)]),
        ("(docs/permissions.md#the-folder-gate-rule).", [("permissions.md", "the-folder-gate-rule")]),
        ("[x](../../docs/api.md#errors)", [("api.md", "errors")]),
        ("GET /api/docs/oauth.md and https://x.org/o/r/docs/y.md", []),
        ("server/docs_ui.py docs/ alone", []),
    ],
)
def test_references_are_recognised(text: str, expected: list[tuple[str, str | None]]) -> None:
    assert [(r.page, r.anchor) for r in references_in(text, "x.py", in_docs=False)] == expected


def test_links_inside_the_pages_are_checked_too() -> None:
    refs = references_in(
        "[a](api.md#errors) [b](#principals) [c](https://x.org/a.md)", "docs/permissions.md", in_docs=True
    )
    assert [(r.page, r.anchor) for r in refs] == [("api.md", "errors"), ("permissions.md", "principals")]


def test_a_missing_page_or_section_is_reported() -> None:
    refs = [
        Ref("a.py:1", "permissions.md", "the-folder-gate-rule"),
        Ref("a.py:2", "no-such-page.md", None),
        Ref("a.py:3", "permissions.md", "no-such-section"),
    ]
    assert problems(refs) == [
        "a.py:2: docs/no-such-page.md: no page docs/no-such-page.md",
        (
            "a.py:3: docs/permissions.md#no-such-section: docs/permissions.md has no section with the anchor "
            "#no-such-section"
        ),
    ]


def test_anchors_follow_mkdocs_slugs() -> None:
    """Lower case, spaces to dashes, punctuation dropped (``openkb up`` -> ``openkb-up``)."""
    assert {"the-folder-gate-rule", "outsiders-get-404", "search-scope"} <= anchors_of("permissions.md")
    assert {"openkb-up", "exit-codes", "run-files-and-locks"} <= anchors_of("operations.md")


def test_numbered_spec_references_are_found() -> None:
    text = "ok docs/permissions.md\nrule (docs/05 §7)\nsee docs/05-07 and prompts/04\nopenkb/docs/12x"
    assert numbered_references(text, "x.py") == ["x.py:2: rule (docs/05 §7)", "x.py:3: see docs/05-07 and prompts/04"]
