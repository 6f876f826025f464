"""Bad input (docs/export.md): the size cap names itself and how to split; a newer or foreign
manifest is refused before anything is written; a damaged or edited export imports what it can
and says what it could not; the command line answers with one line and its exit code."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from sqlmodel import Session, col, func, select

from openkb.config import Settings
from openkb.errors import ExportFormatUnsupported, ExportTooLarge, ValidationError
from openkb.exporting.service import Target
from openkb.models import AuditLog, Document, DocumentAsset
from tests.export.conftest import Node, kb_target, members, png

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def source(world):
    kb = world.new_kb()
    ids = world.build(
        kb,
        [
            Node("f", "Folder", type="folder"),
            Node("a", "Alpha", parent="f", body="# Alpha\n\nSee [beta]({doc:b}).\n", tags=["t"]),
            Node("b", "Beta", body="# Beta\n"),
            Node("d", "Draft", status="draft", body="# Draft\n"),
        ],
    )
    return kb, ids, world.export(kb_target(kb))


def rezip(data: bytes, change: dict[str, bytes | None]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, body in {**members(data), **change}.items():
            if body is not None:
                z.writestr(name, body)
    return out.getvalue()


def count(world, kb) -> int:
    with Session(world.engine) as s:
        return len(s.exec(select(Document.id).where(col(Document.knowledge_base_id) == kb.id)).all())


def test_size_cap_names_the_cap_and_how_to_split(world, source):
    kb, _ids, _data = source
    with pytest.raises(ExportTooLarge) as e:
        world.export(kb_target(kb), max_bytes=10)
    assert e.value.code == "EXPORT_TOO_LARGE" and e.value.http_status == 422
    assert "the cap is 10 bytes" in e.value.detail and "one at a time" in e.value.detail
    assert e.value.extra["max"] == 10 and e.value.extra["limit"] == "max_export_bytes"
    with pytest.raises(ExportTooLarge, match="the cap is 20 bytes"):  # the setting (MAX_EXPORT_BYTES)
        world.export(kb_target(kb), settings=Settings(max_export_bytes=20))


def test_a_missing_blob_is_left_out_and_counted(world, tmp_path):
    kb = world.new_kb()
    ids = world.build(kb, [Node("p", "Pic", body="![x]({asset:x.png})\n", assets={"x.png": (png(), "image/png")})])
    with Session(world.engine) as s:
        a = s.exec(select(DocumentAsset).where(col(DocumentAsset.document_id) == ids["p"])).one()
    (world.blobs.root / a.object_key).unlink()
    data = world.export(kb_target(kb))
    files = members(data)
    m = json.loads(files["openkb-export.json"])
    assert m["left_out"]["assets_missing"] == 1 and m["assets"] == []
    assert not [p for p in files if p.startswith("assets/")]
    report = world.import_zip(data, world.new_kb(), tmp_path)
    (page,) = [f for f in report.files if f.path == "Pic.md"]
    assert page.status == "created" and any("not in the zip" in w for w in page.warnings)


def test_a_draft_target_needs_include_drafts(world, source):
    _kb, ids, _data = source
    with pytest.raises(ValidationError):
        world.export(Target("document", ids["d"]))
    assert "Draft.md" in members(world.export(Target("document", ids["d"]), include_drafts=True))


@pytest.mark.parametrize(
    "manifest, says",
    [
        ({"format": "openkb-export", "format_version": 2, "documents": []}, "format version 2"),
        ({"format": "something-else", "format_version": 1, "documents": []}, "not an OpenKB export"),
        ({"format": "openkb-export", "format_version": "1", "documents": []}, "no valid format_version"),
        ({"format": "openkb-export", "format_version": 1, "documents": "x"}, "no list of documents"),
        (b"{not json", "not valid JSON"),
    ],
)
def test_foreign_or_newer_manifest_is_refused_whole(world, source, tmp_path, manifest, says):
    _kb, _ids, data = source
    body = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    empty = world.new_kb()
    with pytest.raises(ExportFormatUnsupported) as e:
        world.import_zip(rezip(data, {"openkb-export.json": body}), empty, tmp_path)
    assert says in e.value.detail and e.value.code == "EXPORT_FORMAT_UNSUPPORTED"
    assert count(world, empty) == 0


def test_edited_export_imports_what_it_can(world, source, tmp_path):
    _kb, _ids, data = source
    m = json.loads(members(data)["openkb-export.json"])
    m["documents"].append({"path": "../escape.md", "type": "page", "id": "x", "title": "Escape"})
    edited = rezip(
        data,
        {
            "openkb-export.json": json.dumps(m).encode(),
            "Beta.md": b"# Beta edited <b>bold</b>\n",  # no front matter, inline HTML
            "stray.md": b"# not listed\n",
            "Folder/Alpha.md": None,  # gone
        },
    )
    empty = world.new_kb()
    report = world.import_zip(edited, empty, tmp_path)
    by = {f.path: f for f in report.files}
    assert by["../escape.md"].status == "failed"
    assert by["stray.md"].status == "failed" and "not listed" in by["stray.md"].error
    assert by["Folder/Alpha.md"].status == "failed" and "not in the zip" in by["Folder/Alpha.md"].error
    assert by["Folder/"].status == "created"
    beta = by["Beta.md"]
    assert beta.status == "created" and any("no front matter" in w for w in beta.warnings)
    assert any(w.startswith("repaired:") for w in beta.warnings)
    with Session(world.engine) as s:
        doc = s.get(Document, beta.document_id)
        assert doc.title == "Beta"  # from the manifest


# -- the command line --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env(database_url, test_home):
    return {**os.environ, "DATABASE_URL": database_url, "OPENKB_HOME": str(test_home)}


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )


def test_cli_export_then_import(world, source, env, tmp_path):
    kb, _ids, data = source
    out = tmp_path / "kb.zip"
    p = cli(["export", str(kb.id), "--out", str(out), "--json"], env)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["pages"] == 2 and summary["left_out"]["drafts"] == 1 and summary["path"] == str(out)
    assert out.read_bytes() == data  # the same bytes as the service's export
    p = cli(["export", str(kb.id), "--out", str(tmp_path / "again.zip")], env)
    assert p.returncode == 0, p.stderr
    line = " ".join(p.stdout.split())
    assert line.startswith("exported 2 pages, 1 folder and 0 assets to ") and line.endswith("; left out: drafts 1"), (
        line
    )
    empty = world.new_kb()
    p = cli(["import", str(out), "--kb", str(empty.id), "--json"], env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["counts"]["created"] == 3
    # too large: one line naming the cap, exit 2, no file left behind
    big = tmp_path / "big.zip"
    p = cli(["export", str(kb.id), "--out", str(big), "--max-bytes", "5"], env)
    assert p.returncode == 2 and "the cap is 5 bytes" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not big.exists() and not list(tmp_path.glob(".export-*"))
    # a newer format: refused, exit 65
    newer = tmp_path / "newer.zip"
    m = json.loads(members(data)["openkb-export.json"])
    m["format_version"] = 7
    newer.write_bytes(rezip(data, {"openkb-export.json": json.dumps(m).encode()}))
    p = cli(["import", str(newer), "--kb", str(world.new_kb().id)], env)
    assert p.returncode == 65 and "format version 7" in p.stderr, p.stderr


def test_cli_export_to_a_place_it_cannot_write(world, source, env, tmp_path):
    """One line naming the path asked for (it named the temporary file beside it), and nothing
    planned: no export is audited that was never written."""
    kb, _ids, _data = source
    with Session(world.engine) as s:
        before = s.exec(select(func.count()).select_from(AuditLog).where(AuditLog.action == "content.exported")).one()
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for out in (blocker / "kb.zip", Path("/proc/openkb-test/kb.zip")):  # under a file; a pseudo file system
        p = cli(["export", str(kb.id), "--out", str(out)], env)
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        assert p.stderr.strip().startswith(f"error: cannot write {out}: ") and len(p.stderr.strip().splitlines()) == 1
        assert ".export-" not in p.stderr
    with Session(world.engine) as s:
        after = s.exec(select(func.count()).select_from(AuditLog).where(AuditLog.action == "content.exported")).one()
    assert after == before
