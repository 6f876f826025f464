"""Importing an export again, and exports that went through other hands (docs/export.md#importing-an-export):
a zip re-made by an operating system's "compress" (one top folder), pages saved with CRLF line
endings, a re-import after pages were trashed, renamed or moved in the source, autolinks and
links with a query, metadata the write refuses."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from sqlmodel import Session, col, select

from openkb.content.documents import create_document, trash_document, update_document
from openkb.errors import ExportFormatUnsupported, ValueOutOfRange
from openkb.importing.service import import_path
from openkb.models import Document
from tests.export.conftest import Node, kb_target, members, snapshot


def wrap(data: bytes, top: str = "wiki", change: dict[str, bytes] | None = None) -> bytes:
    """The export unzipped and compressed again: every entry under one top folder."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(f"{top}/", b"")
        for name, body in {**members(data), **(change or {})}.items():
            z.writestr(f"{top}/{name}", body)
    return out.getvalue()


@pytest.fixture(scope="module")
def source(world):
    kb = world.new_kb()
    ids = world.build(
        kb,
        [
            Node("parent", "Parent page", body="has children, [child]({doc:child})\n", meta={"k": 1}, tags=["t"]),
            Node("child", "Child", parent="parent", body="child of a page\n"),
            Node("draft", "Draft page", status="draft", body="not yet\n"),
        ],
    )
    return kb, ids, world.export(kb_target(kb), include_drafts=True)


def test_a_rezipped_export_imports_as_an_export(world, source, tmp_path):
    kb, _ids, data = source
    empty = world.new_kb()
    report = world.import_zip(wrap(data), empty, tmp_path)
    assert not report.failed, [(f.path, f.error) for f in report.failed]
    assert {f.converter for f in report.files if f.type != "asset"} == {"openkb-export"}
    assert snapshot(world.engine, empty.id) == snapshot(world.engine, kb.id)  # drafts stay drafts, one tree


def test_an_unpacked_export_given_with_its_parent_folder_imports_as_an_export(world, source, tmp_path):
    kb, _ids, data = source
    root = tmp_path / "Downloads"
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        z.extractall(root / "wiki")
    # left by Windows in folders it showed: skipped, not "not listed in the manifest"
    (root / "wiki" / "Thumbs.db").write_bytes(b"\xd0\xcf\x11\xe0" + bytes(60))
    (root / "wiki" / "desktop.ini").write_text("[.ShellClassInfo]\r\n")
    empty = world.new_kb()
    report = import_path(world.units, world.blobs, world.actor(), empty.id, root)
    assert not report.failed, [(f.path, f.error) for f in report.failed]
    assert snapshot(world.engine, empty.id) == snapshot(world.engine, kb.id)


def test_a_manifest_deeper_down_is_refused_not_imported_as_files(world, source, tmp_path):
    _kb, _ids, data = source
    empty = world.new_kb()
    nested = wrap(wrap(data, "wiki"), "backup", {"notes.md": b"# other\n"})
    with pytest.raises(ExportFormatUnsupported) as e:
        world.import_zip(nested, empty, tmp_path)
    assert "wiki/openkb-export.json" in e.value.detail
    with Session(world.engine) as s:
        assert s.exec(select(Document.id).where(col(Document.knowledge_base_id) == empty.id)).all() == []


def test_a_page_saved_with_crlf_keeps_its_front_matter(world, source, tmp_path):
    kb, _ids, data = source
    files = members(data)
    crlf = files["Parent page.md"].replace(b"\n", b"\r\n")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, body in {**files, "Parent page.md": crlf}.items():
            z.writestr(name, body)
    empty = world.new_kb()
    report = world.import_zip(out.getvalue(), empty, tmp_path)
    assert not report.failed, [(f.path, f.error) for f in report.failed]
    assert snapshot(world.engine, empty.id) == snapshot(world.engine, kb.id)


def _pages(world, kb) -> list[tuple[str, str | None, str]]:
    """(title, parent title, body) of each live document of ``kb``."""
    return sorted(
        (r[0].rsplit("/", 1)[-1], r[0].rsplit("/", 1)[0] if "/" in r[0] else None, r[5] or "")
        for r in snapshot(world.engine, kb.id)
    )


def test_reimport_after_a_same_titled_sibling_is_trashed_updates_the_right_page(world, tmp_path):
    kb = world.new_kb()
    ids = world.build(kb, [Node("a", "Notes", body="first\n"), Node("b", "Notes", body="second\n")])
    copy = world.new_kb()
    assert not world.import_zip(world.export(kb_target(kb)), copy, tmp_path).failed
    with world.units() as s:
        trash_document(s, world.actor(), ids["a"])
    again = world.import_zip(world.export(kb_target(kb)), copy, tmp_path)
    assert not again.failed, [(f.path, f.error) for f in again.failed]
    assert _pages(world, copy) == [("Notes", None, "first\n"), ("Notes", None, "second\n")]
    assert {f.status for f in again.files if f.type != "asset"} == {"unchanged"}


def test_reimport_after_a_rename_and_move_moves_the_copy(world, tmp_path):
    kb = world.new_kb()
    ids = world.build(
        kb,
        [
            Node("f", "Folder", type="folder"),
            Node("p", "Page", body="page\n"),
            Node("c", "Child", parent="p", body="child\n"),
        ],
    )
    copy = world.new_kb()
    assert not world.import_zip(world.export(kb_target(kb)), copy, tmp_path).failed
    with world.units() as s:
        update_document(s, world.actor(), ids["p"], {"title": "Renamed", "parent_id": ids["f"]})
    again = world.import_zip(world.export(kb_target(kb)), copy, tmp_path)
    assert not again.failed, [(f.path, f.error) for f in again.failed]
    assert [r[:2] for r in snapshot(world.engine, copy.id)] == [r[:2] for r in snapshot(world.engine, kb.id)]
    assert [r[0] for r in snapshot(world.engine, copy.id)] == ["Folder", "Folder/Renamed", "Folder/Renamed/Child"]


def test_metadata_integral_floats_beyond_int64_are_refused_when_written(world):
    kb = world.new_kb()
    with pytest.raises(ValueOutOfRange) as e, world.units() as s:
        create_document(s, world.actor(), knowledge_base_id=kb.id, title="Earth", metadata={"mass": 5.97e24})
    assert e.value.code == "VALUE_OUT_OF_RANGE"
    with world.units() as s:  # a fraction, or a whole number within range, is fine
        create_document(s, world.actor(), knowledge_base_id=kb.id, title="Ok", metadata={"a": 1.5e-30, "b": 1e18})


def test_a_folder_whose_metadata_is_refused_is_created_with_a_warning(world, tmp_path):
    kb = world.new_kb()
    world.build(kb, [Node("f", "Folder", type="folder"), Node("p", "Inside", parent="f", body="inside\n")])
    files = members(world.export(kb_target(kb)))
    m = json.loads(files["openkb-export.json"])
    for d in m["documents"]:
        if d["type"] == "folder":
            d["metadata"] = {"mass": 5970000000000000000000000}  # as jsonb gave back 5.97e24
    files["openkb-export.json"] = json.dumps(m).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, body in files.items():
            z.writestr(name, body)
    empty = world.new_kb()
    report = world.import_zip(out.getvalue(), empty, tmp_path)
    assert not report.failed, [(f.path, f.error) for f in report.failed]
    folder = next(f for f in report.files if f.type == "folder")
    assert any("metadata" in w for w in folder.warnings)
    assert [r[0] for r in snapshot(world.engine, empty.id)] == ["Folder", "Folder/Inside"]


def test_an_autolink_to_a_page_survives_the_round_trip(world, tmp_path):
    kb = world.new_kb()
    world.build(
        kb,
        [
            Node("t", "Target page", body="# Target\n\n## part\n"),
            Node("a", "Links", body="See <{doc:t}> and <{doc:t}#part>.\n"),
        ],
    )
    data = world.export(kb_target(kb))
    empty = world.new_kb()
    report = world.import_zip(data, empty, tmp_path)
    assert not report.failed, [(f.path, f.error) for f in report.failed]
    assert snapshot(world.engine, empty.id) == snapshot(world.engine, kb.id)
    body = snapshot(world.engine, empty.id)[1][5]
    assert body == "See <openkb://document/Target page> and <openkb://document/Target page#part>.\n"
    again = members(world.export(kb_target(empty)))
    assert {p: d for p, d in again.items() if p.endswith(".md")} == {
        p: d for p, d in members(data).items() if p.endswith(".md")
    }


def test_a_link_with_a_query_is_made_relative_and_comes_back(world, tmp_path):
    kb = world.new_kb()
    world.build(
        kb,
        [
            Node("t", "Target", body="# Target\n\n## part\n"),
            Node("a", "Links", body="[q]({doc:t}?x=1) and [qf]({doc:t}?x=1#part)\n"),
        ],
    )
    data = world.export(kb_target(kb))
    text = members(data)["Links.md"].decode()
    assert "openkb://" not in text and "Target.md?x=1" in text
    empty = world.new_kb()
    report = world.import_zip(data, empty, tmp_path)
    assert not report.failed, [(f.path, f.error) for f in report.failed]
    assert snapshot(world.engine, empty.id) == snapshot(world.engine, kb.id)
