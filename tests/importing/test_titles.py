"""A page's title when its file names none: the file name, except for a folder's landing page
(README.md, index.md), named by its first level-1 heading or its folder; and the tree's order:
folders, the landing page, then names as a file manager sorts them (docs/importing.md)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from sqlmodel import Session

from openkb.models import Document
from tests.importing.conftest import by_path


def _titles(world, report) -> dict[str, str]:
    assert not report.failed, [(f.path, f.error) for f in report.failed]
    with Session(world.engine) as s:
        return {f.path: s.get(Document, f.document_id).title for f in report.files if f.path.lower().endswith(".md")}


def test_landing_pages_are_named_by_their_heading_or_their_folder(world, tmp_path):
    kb = world.new_kb()
    (tmp_path / "guide" / "deep").mkdir(parents=True)
    (tmp_path / "api").mkdir()
    (tmp_path / "README.md").write_text("Top-level notes, no heading.\n")
    (tmp_path / "guide" / "README.md").write_text("Intro text.\n\n# Getting   *started*\n\n## Later\n\n# Second h1\n")
    (tmp_path / "guide" / "deep" / "index.md").write_text("## Only a level-2 heading\n\ntext\n")
    (tmp_path / "api" / "Index.MD").write_text("```\n# not a heading\n```\n\n# `openkb` API 接口\n")
    (tmp_path / "api" / "readme.md").write_text("---\ntitle: Named in front matter\n---\n# Heading\n")
    (tmp_path / "api" / "intro.md").write_text("# A heading\n\nan ordinary page keeps its file name\n")
    first = world.run(tmp_path, kb=kb)
    titles = _titles(world, first)
    assert titles == {
        "README.md": "README",  # at the top there is no folder to name it by
        "guide/README.md": "Getting started",
        "guide/deep/index.md": "deep",
        "api/Index.MD": "openkb API 接口",
        "api/readme.md": "Named in front matter",
        "api/intro.md": "intro",
    }
    again = world.run(tmp_path, kb=kb)  # the same titles again: nothing to update
    assert {f.status for f in again.files if f.path.lower().endswith(".md")} == {"unchanged"}
    assert by_path(again)["guide/README.md"].document_id == by_path(first)["guide/README.md"].document_id


def _children(world, kb_id, parent_id) -> list[str]:
    from sqlmodel import col, select

    with Session(world.engine) as s:
        docs = s.exec(
            select(Document)
            .where(col(Document.knowledge_base_id) == kb_id, col(Document.parent_id) == parent_id)
            .order_by(col(Document.sort_order))
        ).all()
        return [d.title for d in docs]


NAMES = ["10 faq.md", "2 setup.md", "Zeta.md", "alpha.md", "README.md", "1 intro.md", "Alpha.md"]


@pytest.mark.parametrize("as_zip", [False, True], ids=["folder", "zip"])
def test_the_tree_is_in_the_order_a_file_manager_shows(world, tmp_path, as_zip):
    """Folders first; then the landing page; then names as a file manager sorts them: case
    aside, numbers by value (2 before 10), not byte order (``Zeta`` before ``alpha``, ``10``
    before ``2``)."""
    kb = world.new_kb()
    root = tmp_path / "site"
    (root / "b-guide").mkdir(parents=True)
    (root / "A-ref").mkdir()
    (root / "b-guide" / "x.md").write_text("# x\n")
    (root / "A-ref" / "y.md").write_text("# y\n")
    for n in NAMES:
        (root / n).write_text(f"# {n.removesuffix('.md').title()} page\n" if n == "README.md" else "text\n")
    src: Path = root
    if as_zip:
        src = tmp_path / "site.zip"
        with zipfile.ZipFile(src, "w") as z:
            for p in sorted(root.rglob("*"), reverse=True):  # the zip's own order must not matter
                z.write(p, p.relative_to(root).as_posix())
    run = world.run(src, kb=kb)
    assert not run.failed, [(f.path, f.error) for f in run.failed]
    assert _children(world, kb.id, None) == [
        "A-ref",
        "b-guide",
        "Readme page",  # README.md, titled by its heading
        "1 intro",
        "2 setup",
        "10 faq",
        "Alpha",  # equal but for case: the exact names' order, fixed
        "alpha",
        "Zeta",
    ]
