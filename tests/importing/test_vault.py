"""An Obsidian-style vault: folders, front matter, relative images and links, wiki links, CJK
names; re-import, prune and revert (docs/importing.md)."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest
from PIL import Image
from sqlmodel import Session, col, select

from openkb.content.revert import revert
from openkb.models import Change, Document, DocumentAsset, DocumentVersion
from tests.importing.conftest import by_path


def png(color: str = "red") -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(buf, format="PNG")
    return buf.getvalue()


HOME = """---
title: 首页 Home
tags: [知识, vault]
date: 2024-03-01
aliases: [start]
---
# 欢迎

See [the other page](sub/Other%20Page.md#part) and [[Other Page]] and [[Missing page]].

![图 caption](../attachments/图片.png)

line one<br>line two <!-- private note -->
"""

OTHER = "# Other\n\n## part\n\nBack to [home](../首页.md). Embedded: ![[图片.png]]\n"


@pytest.fixture(scope="module")
def vault(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("vault") / "My Vault"
    (root / "笔记" / "sub").mkdir(parents=True)
    (root / "attachments").mkdir()
    (root / ".obsidian").mkdir()
    (root / ".obsidian" / "app.json").write_text("{}")
    (root / "笔记" / "首页.md").write_text(HOME, encoding="utf-8")
    (root / "笔记" / "sub" / "Other Page.md").write_text(OTHER, encoding="utf-8")
    (root / "attachments" / "图片.png").write_bytes(png())
    (root / "attachments" / "unused.png").write_bytes(png("blue"))
    (root / "readme.txt").write_text("plain text 纯文本\n", encoding="utf-8")
    # what Windows leaves in folders it showed: not content, skipped like .obsidian
    (root / "attachments" / "Thumbs.db").write_bytes(b"\xd0\xcf\x11\xe0" + bytes(60))
    (root / "笔记" / "desktop.ini").write_text("[.ShellClassInfo]\r\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def first(world, vault):
    return world.run(vault)


def _doc(world, doc_id) -> tuple[Document, DocumentVersion]:
    with Session(world.engine) as s:
        d = s.get(Document, doc_id)
        v = s.get(DocumentVersion, d.current_version_id) if d.current_version_id else None
        s.expunge_all()
        return d, v


def test_folders_pages_and_assets(world, first):
    files = by_path(first)
    assert not first.failed, [(f.path, f.error) for f in first.failed]
    assert {p: f.status for p, f in files.items()} == {
        "attachments": "created",
        "笔记": "created",
        "笔记/sub": "created",
        "笔记/首页.md": "created",
        "笔记/sub/Other Page.md": "created",
        "readme.txt": "created",
        "attachments/unused.png": "created",  # nobody shows it: a page of its own
        "attachments/图片.png": "asset",  # shown by the pages: their asset, not a page
    }
    home, hv = _doc(world, files["笔记/首页.md"].document_id)
    other, ov = _doc(world, files["笔记/sub/Other Page.md"].document_id)
    sub, _ = _doc(world, files["笔记/sub"].document_id)
    notes, _ = _doc(world, files["笔记"].document_id)
    assert (sub.type, sub.parent_id, other.parent_id, home.parent_id, notes.parent_id) == (
        "folder",
        notes.id,
        sub.id,
        notes.id,
        None,
    )
    # front matter -> metadata
    assert home.title == "首页 Home" and home.tags == ["知识", "vault"]
    assert home.meta["date"] == "2024-03-01" and home.meta["front_matter"] == {"aliases": ["start"]}
    assert home.meta["import"]["path"] == "笔记/首页.md"
    # links both ways, whatever the order: relative and wiki
    assert f"[the other page](openkb://document/{other.id}#part)" in hv.markdown
    assert f"[Other Page](openkb://document/{other.id})" in hv.markdown
    assert f"(openkb://document/{home.id})" in ov.markdown
    assert "\\[\\[Missing page]]" in hv.markdown  # unresolved: kept as text, with a warning
    assert any("Missing page" in w for w in files["笔记/首页.md"].warnings)
    # image -> an asset attached to the page; <br> -> hard break; comment dropped on the record
    ref = re.search(r"asset://([0-9a-f-]{36})", hv.markdown).group(1)
    with Session(world.engine) as s:
        a = s.get(DocumentAsset, ref)
        assert a.document_id == home.id and a.filename == "图片.png" and a.mime_type == "image/png"
        assert b"".join(world.blobs.open(a.object_key)) == png()
    assert "line one\\\nline two" in hv.markdown and "private note" not in hv.markdown
    assert any("comment dropped" in w and "private note" in w for w in files["笔记/首页.md"].warnings)
    assert re.search(r"!\[[^\]]*\]\(asset://", ov.markdown)  # ![[embed]] -> the image


def test_reimport_is_unchanged_and_writes_nothing(world, vault, first):
    with Session(world.engine) as s:
        before = s.exec(select(Change).where(col(Change.run_id) == first.run_id)).all()
    again = world.run(vault)
    assert {f.status for f in again.files} <= {"unchanged", "asset"}, [(f.path, f.status) for f in again.files]
    with Session(world.engine) as s:
        assert not s.exec(select(Change).where(col(Change.run_id) == again.run_id)).all()
    assert before


def test_changed_file_updates_removed_file_is_pruned_and_revert_undoes(world, vault, first, tmp_path):
    copy = tmp_path / "v"
    shutil.copytree(vault, copy)
    (copy / "笔记" / "sub" / "Other Page.md").write_text(OTHER + "\nMore text.\n", encoding="utf-8")
    (copy / "readme.txt").unlink()
    run = world.run(copy, prune=True)
    files = by_path(run)
    assert files["笔记/sub/Other Page.md"].status == "updated"
    assert files["readme.txt"].status == "trashed"
    assert files["笔记/首页.md"].status == "unchanged"
    readme, _ = _doc(world, files["readme.txt"].document_id)
    assert readme.status == "deleted"
    with world.units() as s:
        out = revert(s, world.actor(), run_id=run.run_id, blobs=world.blobs)
    assert len(out["reverted"]) == 2
    readme, _ = _doc(world, files["readme.txt"].document_id)
    _other, ov = _doc(world, files["笔记/sub/Other Page.md"].document_id)
    assert readme.status == "published" and "More text" not in ov.markdown


def test_dry_run_writes_nothing_and_revert_removes_pages_and_assets(world, tmp_path):
    kb = world.new_kb()
    (tmp_path / "img").mkdir()
    # bytes no other row of the tenant holds: the blob goes with its last row (openkb/assets.py)
    (tmp_path / "img" / "a.png").write_bytes(png("orange"))
    (tmp_path / "page.md").write_text("# Page\n\n![a](img/a.png)\n")
    dry = world.run(tmp_path, kb=kb, dry_run=True)
    assert {f.path: f.status for f in dry.files} == {
        "page.md": "would_create",
        "img/a.png": "asset",  # img/ holds no page: no empty folder for it
    }
    with Session(world.engine) as s:
        assert not s.exec(select(Document).where(col(Document.knowledge_base_id) == kb.id)).all()
    run = world.run(tmp_path, kb=kb)
    page = by_path(run)["page.md"].document_id
    with Session(world.engine) as s:
        [asset] = s.exec(select(DocumentAsset).where(col(DocumentAsset.document_id) == page)).all()
        key = asset.object_key
    with world.units() as s:
        out = revert(s, world.actor(), run_id=run.run_id, blobs=world.blobs)
    assert {r["op"] for r in out["reverted"]} == {"document.create", "asset.create"}
    with Session(world.engine) as s:
        assert not s.exec(
            select(Document).where(col(Document.knowledge_base_id) == kb.id, col(Document.status) != "deleted")
        ).all()
        assert s.get(DocumentAsset, asset.id) is None
    assert not (world.blobs.root / key).exists()


def test_a_folder_of_shown_images_only_is_not_made_an_empty_folder(world, tmp_path):
    """Obsidian's ``attachments/`` or a site's ``img/``: every image in it became an asset of the
    page that shows it, so the folder would sit empty in the tree. A folder that holds nothing at
    all is kept (someone made it), and so is one an earlier import created."""
    kb = world.new_kb()
    (tmp_path / "notes" / "img").mkdir(parents=True)
    (tmp_path / "notes" / "img" / "a.png").write_bytes(png("blue"))
    (tmp_path / "attachments" / "deep").mkdir(parents=True)
    (tmp_path / "attachments" / "deep" / "b.png").write_bytes(png())
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes" / "page.md").write_text("# Page\n\n![a](img/a.png) ![b](../attachments/deep/b.png)\n")
    got = {f.path: f.status for f in world.run(tmp_path, kb=kb).files}
    assert got == {
        "notes": "created",
        "empty": "created",
        "notes/page.md": "created",
        "notes/img/a.png": "asset",
        "attachments/deep/b.png": "asset",
    }
    with Session(world.engine) as s:
        titles = set(s.exec(select(Document.title).where(col(Document.knowledge_base_id) == kb.id)).all())
    assert titles == {"notes", "empty", "page"}
    # a folder an earlier import created stays, and a re-run with --prune does not trash it
    (tmp_path / "notes" / "img" / "c.png").write_bytes(png("green"))  # nobody shows it: a page
    again = {f.path: f.status for f in world.run(tmp_path, kb=kb).files}
    assert again["notes/img"] == "created" and again["notes/img/c.png"] == "created"
    (tmp_path / "notes" / "img" / "c.png").unlink()
    pruned = {f.path: f.status for f in world.run(tmp_path, kb=kb, prune=True).files}
    assert pruned["notes/img"] == "unchanged" and pruned["notes/img/c.png"] == "trashed"


def test_pages_showing_one_image_keep_one_blob(world, tmp_path):
    """A site's logo shown by every page: each page gets its own asset row (readable with the
    page), and the rows share one blob, also across batches and re-runs (openkb/assets.py)."""
    kb = world.new_kb()
    logo = png("teal")
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "logo.png").write_bytes(logo)
    for i in range(60):  # more than one batch of pages
        (tmp_path / f"p{i:02d}.md").write_text(f"# Page {i}\n\n![logo](img/logo.png)\n")
    run = world.run(tmp_path, kb=kb)
    assert not run.failed, [(f.path, f.error) for f in run.failed]
    pages = [f.document_id for f in run.files if f.path.endswith(".md")]
    with Session(world.engine) as s:
        rows = s.exec(select(DocumentAsset).where(col(DocumentAsset.document_id).in_(pages))).all()
    assert len(rows) == 60 and {str(a.document_id) for a in rows} == {str(p) for p in pages}
    assert len({a.object_key for a in rows}) == 1
    assert [p for p in world.blobs.root.rglob("*") if p.is_file() and p.read_bytes() == logo] == [
        world.blobs.root / rows[0].object_key
    ]
    again = world.run(tmp_path, kb=kb)
    assert {f.status for f in again.files if f.path.endswith(".md")} == {"unchanged"}
    assert len([p for p in world.blobs.root.rglob("*") if p.is_file() and p.read_bytes() == logo]) == 1


def test_dry_run_counts_what_the_real_run_does(world, tmp_path):
    """Re-importing with --prune after a folder of pages was deleted: the dry run and the real
    run report the same counts (every page inside the gone folder, not only the folder), and an
    unchanged file is ``unchanged`` in the dry run too, never ``would_update``."""
    kb = world.new_kb()
    (tmp_path / "keep.md").write_text("# Keep\n\nSee [gone](old/p0.md) and ![img](pic.png).\n")
    (tmp_path / "pic.png").write_bytes(png())
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "sub").mkdir()
    for i in range(3):
        (tmp_path / "old" / f"p{i}.md").write_text(f"# P{i}\n\nbody {i}\n")
    (tmp_path / "old" / "sub" / "deep.md").write_text("# Deep\n\nbody\n")
    first = world.run(tmp_path, kb=kb)
    assert not [f for f in first.files if f.status == "failed"], first.files
    shutil.rmtree(tmp_path / "old")
    (tmp_path / "keep.md").write_text("# Keep\n\nSee ![img](pic.png).\n")
    (tmp_path / "new.md").write_text("# New\n")
    dry = world.run(tmp_path, kb=kb, dry_run=True, prune=True)
    real = world.run(tmp_path, kb=kb, prune=True)
    d, r = dry.counts(), real.counts()
    assert d.get("would_trash") == r.get("trashed") == 6  # old, old/sub, 3 pages, deep.md
    assert d.get("would_create") == r.get("created") == 1
    assert d.get("would_update") == r.get("updated") == 1  # keep.md lost its link
    again = world.run(tmp_path, kb=kb, dry_run=True, prune=True)
    assert {f.path: f.status for f in again.files if f.type != "asset"} == {
        "keep.md": "unchanged",
        "new.md": "unchanged",
    }
