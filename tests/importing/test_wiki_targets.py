"""Which file a ``[[wiki link]]`` or ``![[embed]]`` names when several share its name, as
Obsidian resolves it (docs/importing.md#what-becomes-what): the nearest to the note; GitHub-wiki
``[[Page Name]]`` for ``Page-Name.md``; an image is reported as an asset only when a page holds it."""

from __future__ import annotations

import re

from sqlmodel import Session

from openkb.models import Document, DocumentAsset, DocumentVersion
from tests.importing.conftest import by_path, uid
from tests.importing.files import png


def _body(world, doc_id) -> str:
    with Session(world.engine) as s:
        d = s.get(Document, doc_id)
        return s.get(DocumentVersion, d.current_version_id).markdown


def _assets(world, body: str) -> list[DocumentAsset]:
    with Session(world.engine) as s:
        out = [s.get(DocumentAsset, a) for a in re.findall(r"asset://([0-9a-f-]{36})", body)]
        s.expunge_all()
        return out


def test_an_embed_two_folders_share_resolves_to_the_nearest_image(world, tmp_path):
    root = tmp_path / f"vault-{uid()}"
    for folder, color in (("Projects", "red"), ("Journal", "blue")):
        (root / folder / "attachments").mkdir(parents=True)
        (root / folder / "attachments" / "image.png").write_bytes(png(color))
        (root / folder / "note.md").write_text(f"# {folder}\n\n![[image.png]]\n", encoding="utf-8")
    kb = world.new_kb()
    report = world.run(root, kb)
    files = by_path(report)
    assert not report.failed, [(f.path, f.error) for f in report.failed]
    for folder, color in (("Projects", "red"), ("Journal", "blue")):
        page = files[f"{folder}/note.md"]
        assert not [w for w in page.warnings if "ambiguous" in w], page.warnings
        [a] = _assets(world, _body(world, page.document_id))
        assert a.document_id is not None and str(a.document_id) == page.document_id
        assert b"".join(world.blobs.open(a.object_key)) == png(color)
        assert files[f"{folder}/attachments/image.png"].status == "asset"


def test_an_image_no_page_holds_is_never_reported_as_an_asset(world, tmp_path):
    root = tmp_path / f"vault-{uid()}"
    root.mkdir()
    (root / "note.md").write_text("# Note\n\nIn code: `![[pic.png]]`\n", encoding="utf-8")
    (root / "pic.png").write_bytes(png("green"))
    kb = world.new_kb()
    report = world.run(root, kb)
    pic = by_path(report)["pic.png"]
    assert pic.status == "created" and pic.type == "page"  # a page of its own: stored, not lost


def test_github_wiki_links_match_hyphenated_file_names(world, tmp_path):
    root = tmp_path / f"wiki-{uid()}"
    root.mkdir()
    (root / "Home.md").write_text("# Home\n\nSee [[Getting Started]] and [[Two Words]].\n", encoding="utf-8")
    (root / "Getting-Started.md").write_text("# Getting started\n", encoding="utf-8")
    (root / "Two-Words.md").write_text("# A\n", encoding="utf-8")
    (root / "Two_Words.md").write_text("# B\n", encoding="utf-8")
    (root / "Two Words-x.md").write_text("# C\n", encoding="utf-8")
    kb = world.new_kb()
    report = world.run(root, kb)
    files = by_path(report)
    assert not report.failed, [(f.path, f.error) for f in report.failed]
    body = _body(world, files["Home.md"].document_id)
    assert f"[Getting Started](openkb://document/{files['Getting-Started.md'].document_id})" in body
    assert f"[Two Words](openkb://document/{files['Two-Words.md'].document_id})" in body


def test_an_embeds_size_is_not_its_alternative_text(world, tmp_path):
    """Obsidian's ``![[image.png|300]]`` shows the image 300 pixels wide: the size is dropped (the
    dialect has none), it does not become the alternative text; text before a size is kept."""
    root = tmp_path / f"vault-{uid()}"
    root.mkdir()
    (root / "a.png").write_bytes(png("red"))
    (root / "b.png").write_bytes(png("blue"))
    (root / "c.png").write_bytes(png("green"))
    (root / "note.md").write_text(
        "# Note\n\n![[a.png|300]]\n\n![[b.png|Blue square|120x80]]\n\n![[c.png|Green square]]\n", encoding="utf-8"
    )
    report = world.run(root, world.new_kb())
    assert not report.failed, [(f.path, f.error) for f in report.failed]
    body = _body(world, by_path(report)["note.md"].document_id)
    alts = re.findall(r"!\[([^\]]*)\]\(asset://", body)
    assert alts == ["", "Blue square", "Green square"], body
