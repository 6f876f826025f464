"""Bad input fails file by file with a clear reason; the batch goes on; a re-run resumes; the
caller's permissions apply (docs/importing.md#bad-input)."""

from __future__ import annotations

import os
import unicodedata
import uuid
import zipfile

import pytest
from sqlmodel import Session

from openkb.content import upsert
from openkb.errors import ConversionFailed, NotFound, PermissionDenied
from openkb.importing.pipeline import run_import
from openkb.importing.sources import open_source
from openkb.models import Document
from tests.factories import grant
from tests.importing import files
from tests.importing.conftest import by_path


@pytest.fixture(scope="module")
def messy(tmp_path_factory):
    root = tmp_path_factory.mktemp("messy") / "in"
    root.mkdir()
    outside = root.parent / "secret.md"
    outside.write_text("# outside\n")
    (root / "good.md").write_text("# good\n\n[broken](../secret.md)\n")
    (root / "binary.md").write_bytes(b"\x00\x01\x02\x03 binary named md \x00")
    (root / "latin1.md").write_bytes("caf\u00e9 au lait".encode("latin-1"))
    (root / "locked.docx").write_bytes(files.encrypted_office())
    (root / "locked.pdf").write_bytes(files.encrypted_pdf())
    (root / "corrupt.xlsx").write_bytes(b"PK\x03\x04 not really a workbook")
    (root / "bomb.docx").write_bytes(files.zip_of({"word/document.xml": b"<w/>", "word/x.xml": b"0" * (40 << 20)}))
    (root / "big.md").write_text("x" * 200_000)
    (root / "escape.md").symlink_to(outside)
    (root / "inner-link.md").symlink_to(root / "good.md")
    (root / "vanishes.md").write_text("# soon gone\n")
    return root


@pytest.fixture(scope="module")
def report(world, messy):
    src = open_source(messy, max_file_bytes=100_000)  # big.md is oversize at this cap
    (messy / "vanishes.md").unlink()  # listed, then unreadable when its turn comes
    try:
        return run_import(world.units, world.blobs, world.actor(), world.new_kb().id, src)
    finally:
        src.close()


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("binary.md", "binary content"),
        ("latin1.md", "not valid UTF-8"),
        ("locked.docx", "password-protected Office file"),
        ("locked.pdf", "password-protected PDF"),
        ("corrupt.xlsx", "damaged"),
        ("bomb.docx", "zip bomb"),
        ("big.md", "oversize: 200000 bytes"),
        ("escape.md", "symlink points outside"),
        ("vanishes.md", "cannot read the file"),
    ],
)
def test_each_bad_file_fails_with_its_reason(report, path, needle):
    f = by_path(report)[path]
    assert f.status == "failed" and needle in f.error, (f.status, f.error)
    assert f.code in ("CONVERSION_FAILED", "UNSUPPORTED_FILE_TYPE")


def test_the_batch_goes_on(report):
    files_ = by_path(report)
    assert files_["good.md"].status == "created"
    assert files_["inner-link.md"].status == "created"  # a symlink inside the folder is fine
    assert any("outside the import" in w for w in files_["good.md"].warnings)


def test_rerun_resumes_without_duplicates(world, messy, report):
    src = open_source(messy, max_file_bytes=100_000)
    try:
        again = run_import(world.units, world.blobs, world.actor(), uuid.UUID(report.knowledge_base_id), src)
    finally:
        src.close()
    assert by_path(again)["good.md"].status == "unchanged"
    assert by_path(again)["good.md"].document_id == by_path(report)["good.md"].document_id


def test_zip_paths_collisions_symlinks_and_bombs(world, tmp_path):
    nfc, nfd = unicodedata.normalize("NFC", "café.md"), unicodedata.normalize("NFD", "café.md")
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("ok.md", "# ok\n")
        z.writestr("../evil.md", "# evil\n")
        z.writestr("/abs.md", "# abs\n")
        z.writestr(nfc, "# one\n")
        z.writestr(nfd, "# two\n")
        link = zipfile.ZipInfo("link.md")
        link.external_attr = 0o120777 << 16
        z.writestr(link, "/etc/passwd")
        z.writestr("inflated.md", "a" * (30 << 20))
    rep = world.run(archive, kb=world.new_kb())
    got = {f.path: (f.status, f.error) for f in rep.files if f.path != nfc}
    assert got["ok.md"][0] == "created"
    assert sorted(f.status for f in rep.files if f.path == nfc) == ["created", "failed"]
    assert "unsafe path" in got["../evil.md"][1] and "unsafe path" in got["abs.md"][1]
    assert "symlink in the zip" in got["link.md"][1]
    assert "zip bomb" in got["inflated.md"][1]
    collided = [f for f in rep.files if f.path == nfc and f.status == "failed"]
    assert collided and "name collision" in collided[0].error


def test_an_archive_over_the_caps_is_refused_whole(world, tmp_path, monkeypatch):
    from openkb.importing import sources

    monkeypatch.setattr(sources, "MAX_ZIP_ENTRIES", 3)
    archive = tmp_path / "many.zip"
    archive.write_bytes(files.zip_of({f"{i}.md": b"# x\n" for i in range(5)}))
    with pytest.raises(ConversionFailed, match="entries"):
        open_source(archive, 10_000)


def test_a_folder_the_caller_cannot_edit_is_refused(world, tmp_path):
    kb = world.new_kb()
    (tmp_path / "a.md").write_text("# a\n")
    with world.units() as s:
        folder = upsert.upsert_by_key(s, world.actor(), kb.id, "target", title="Target", type="folder").document
    with pytest.raises(NotFound):  # outsider: nothing to see, nothing named
        world.run(tmp_path, kb=kb, who=world.outsider, target_id=folder.id)
    with Session(world.engine) as s:
        grant(s, "knowledge_base", kb.id, world.guest, "viewer", tenant_id=world.tenant.id)
        s.commit()
    with pytest.raises(PermissionDenied):  # sees it, may not write
        world.run(tmp_path, kb=kb, who=world.guest, target_id=folder.id)
    with Session(world.engine) as s:
        assert s.get(Document, folder.id) is not None
        assert not [d for d in s.query(Document).filter(Document.knowledge_base_id == kb.id) if d.type == "page"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file(world, tmp_path):
    p = tmp_path / "locked.md"
    p.write_text("# x\n")
    p.chmod(0)
    rep = world.run(tmp_path, kb=world.new_kb())
    assert "permission denied" in by_path(rep)["locked.md"].error


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_file_over_the_page_limit_is_refused_before_its_repair(world, tmp_path, monkeypatch, jobs):
    """The repair is the costly step of a file (docs/importing.md#bad-input): a converted text
    longer than a page may hold fails at once, in the importer and in its worker processes."""
    from openkb.config import get_settings
    from openkb.importing import prepare

    settings = get_settings().model_copy(update={"max_markdown_chars": 2_000})
    repaired: list[int] = []
    real = prepare.import_markdown
    monkeypatch.setattr(prepare, "import_markdown", lambda md, **kw: repaired.append(len(md)) or real(md, **kw))
    (tmp_path / "at-limit.md").write_text("# fits\n\n" + "x" * (1_999 - 8))  # the repair ends it with "\n"
    (tmp_path / "over.md").write_text("# over\n\n" + "\u4e2d" * 2_000)  # characters, not bytes
    (tmp_path / "over.html").write_text("<h1>over</h1><p>" + "y " * 1_500 + "</p>")
    for k in range(8):  # enough files for the worker processes to take some (pipeline._prepare_all)
        (tmp_path / f"small-{k}.md").write_text(f"# small {k}\n")
    rep = by_path(world.run(tmp_path, kb=world.new_kb(), settings=settings, jobs=jobs))
    for name in ("over.md", "over.html"):
        f = rep[name]
        assert f.status == "failed" and f.code == "MARKDOWN_TOO_LARGE", (name, f.status, f.code, f.error)
        assert "characters; a page holds at most 2000 (max_markdown_chars): split the file" in f.error
    assert "the converted Markdown has 2008 characters" in rep["over.md"].error
    assert rep["at-limit.md"].status == "created", rep["at-limit.md"].error
    assert rep["small-0.md"].status == "created"
    if jobs == 1:  # in this process: the refused files never reached the repair
        assert 1_999 in repaired and all(n <= 2_000 for n in repaired), repaired


def test_a_zip_name_needs_zip_bytes(tmp_path):
    """A file named ``.zip`` is imported as an archive only when its bytes are one: anything else
    is refused (CONVERSION_FAILED), not imported as one page; an empty archive imports nothing;
    another name is one file whatever its bytes."""
    from openkb.importing.sources import source_from_bytes

    fake = tmp_path / "backup.ZIP"
    fake.write_bytes(b"# a Markdown file, renamed\n")
    with pytest.raises(ConversionFailed, match="backup.ZIP is not a zip archive"):
        open_source(fake, 100_000)
    with pytest.raises(ConversionFailed, match="upload.zip is not a zip archive"):
        source_from_bytes(b"PK\x03", "upload.zip", 100_000)  # cut short before its header
    empty = tmp_path / "empty.zip"
    zipfile.ZipFile(empty, "w").close()
    assert open_source(empty, 100_000).entries == []
    assert source_from_bytes(empty.read_bytes(), "empty.zip", 100_000).entries == []
    docx_like = tmp_path / "notes.md"
    docx_like.write_bytes(b"PK\x03\x04 not a zip name")
    assert [e.rel for e in open_source(docx_like, 100_000).entries] == ["notes.md"]
