"""A page's title when its file names none: the file name, except for a folder's landing page
(README.md, index.md), named by its first level-1 heading or its folder (docs/importing.md)."""

from __future__ import annotations

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
