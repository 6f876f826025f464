"""File names the import must decode (docs/importing.md#file-names-in-zips-and-folders): a zip
that does not flag its names UTF-8 (Linux's and macOS's zip tools write UTF-8 without the flag,
Windows in Chinese or Japanese writes GBK, Big5 or Shift-JIS; Python reads them all as code page
437), and a folder whose names on disk are not UTF-8. The import recovers the real names, leaves a Western Windows zip's names as
code page 437 reads them, and fails a name it cannot read on its own."""

from __future__ import annotations

import io
import os
import struct
import unicodedata
import zipfile
import zlib
from pathlib import Path

import pytest
from sqlmodel import Session

from openkb.importing.sources import source_from_bytes
from openkb.models import Document, DocumentVersion
from tests.importing.conftest import by_path


def legacy_zip(members: dict[bytes, bytes], *, unicode_path: dict[bytes, str] | None = None) -> bytes:
    """A zip whose names are the given bytes, stored as they are and not flagged UTF-8 (what
    Info-ZIP without a UTF-8 locale, macOS's Archive Utility and Windows' Explorer write). A
    name in ``unicode_path`` also gets an Info-ZIP Unicode Path field with that name."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for n, (raw, data) in enumerate(members.items()):
            info = zipfile.ZipInfo(f"~{n}~".ljust(len(raw), "~"))  # a same-length ASCII stand-in, swapped below
            if unicode_path and raw in unicode_path:
                name = unicode_path[raw].encode()
                body = b"\x01" + struct.pack("<I", zlib.crc32(raw)) + name
                info.extra = struct.pack("<HH", 0x7075, len(body)) + body
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    out = buf.getvalue()
    for n, raw in enumerate(members):
        stand_in = f"~{n}~".ljust(len(raw), "~").encode()
        assert out.count(stand_in) == 2  # the local header and the central directory
        out = out.replace(stand_in, raw)
    return out


def names(data: bytes) -> set[str]:
    src = source_from_bytes(data, "export.zip", 10 << 20)
    try:
        return {e.rel for e in src.entries}
    finally:
        src.close()


def test_utf8_names_without_the_flag_are_read_as_utf8():
    """Linux's zip and macOS (which also writes NFD: the page keys are NFC)."""
    nfd = unicodedata.normalize("NFD", "Café/résumé.md").encode()
    data = legacy_zip({"笔记/会议纪要.md".encode(): b"# a\n", nfd: b"# b\n", b"plain.md": b"# c\n"})
    assert names(data) == {"笔记", "笔记/会议纪要.md", "Café", "Café/résumé.md", "plain.md"}


def test_gbk_names_from_windows_in_chinese_are_read_as_gbk():
    data = legacy_zip(
        {"项目/会议纪要（第一次）.md".encode("gbk"): b"# a\n", "项目/周报·草稿.md".encode("gbk"): b"# b\n"}
    )
    assert names(data) == {"项目", "项目/会议纪要（第一次）.md", "项目/周报·草稿.md"}


def test_big5_names_from_windows_in_traditional_chinese_are_read_as_big5():
    data = legacy_zip(
        {
            "專案/會議紀錄（第一次）.md".encode("cp950"): b"# a\n",
            "專案/使用者手冊.md".encode("cp950"): b"# b\n",
            "週報‧草稿.md".encode("cp950"): b"# c\n",
        }
    )
    assert names(data) == {"專案", "專案/會議紀錄（第一次）.md", "專案/使用者手冊.md", "週報‧草稿.md"}


@pytest.mark.parametrize(
    "name", ["プロジェクト.md", "仕様書.md", "お客様.md", "テスト.md", "年度計画.md", "セキュリティ.md", "東京.md"]
)
def test_a_japanese_name_alone_is_read_as_shift_jis(name):
    """Katakana and many kanji have an ASCII letter for a second byte (``プロジェクト`` is
    ``âvâìâWâFâNâg`` in code page 437), which looked like a Western name's accented letters: such
    a name alone was imported in code page 437. Three or more two-byte characters in a row are
    a word of their own (no Western name alternates accented letters with single letters three
    times over)."""
    assert names(legacy_zip({name.encode("cp932"): b"# a\n"})) == {name}


@pytest.mark.parametrize("name", ["臺灣.md", "台灣.md", "臺北.md", "資料.md"])
def test_a_short_big5_name_alone_is_read_as_big5(name):
    """One short name is little evidence: ``臺灣`` (BB 4F C6 57) has a letter for every trail
    byte, which looked like a Western accented letter and its neighbour (it was imported as
    ``╗O╞W.md``); its lead bytes are box-drawing in code page 437, which no Western name holds."""
    assert names(legacy_zip({name.encode("cp950"): b"# a\n"})) == {name}


def test_shift_jis_names_from_windows_in_japanese_are_read_as_shift_jis():
    """Kana (half-width too), kanji, full-width punctuation."""
    data = legacy_zip(
        {
            "資料/会議メモ（第1回）.md".encode("cp932"): b"# a\n",
            "プロジェクト/週報・下書き.md".encode("cp932"): b"# b\n",
            "議事録.md".encode("cp932"): b"# c\n",
            "ｱﾝｹｰﾄ結果.md".encode("cp932"): b"# d\n",
        }
    )
    assert names(data) == {
        "資料",
        "資料/会議メモ（第1回）.md",
        "プロジェクト",
        "プロジェクト/週報・下書き.md",
        "議事録.md",
        "ｱﾝｹｰﾄ結果.md",
    }


@pytest.mark.parametrize(
    "name",
    [
        "Über.md",
        "naïve.md",
        "Año.md",
        "Résumé.md",
        "Ñoño.md",
        "Café crème.md",
        "Zürich/Genève.md",
        "Açaí.md",
        "Größe.md",
        "Grüße aus Zürich.md",
        "Müller Größe.md",
        "théâtre.md",
        "créée.md",
        "éléphant.md",
        "Ñoño Sénégal.md",
    ],
)
def test_a_western_windows_zip_stays_code_page_437(name):
    """GB18030 reads ``Über`` as a rare ideograph and ``naïve`` as 'na媣e', Big5 reads ``Año`` as
    'A寸' and Shift-JIS ``naïve`` as 'na久e': none is taken for a Chinese or Japanese name (their
    bytes are no everyday characters of that code page, or an accented letter's byte followed by
    a letter or ß, which a two-byte character's trail rarely is). ``Größe`` (94 E1) was read as
    Shift-JIS 'Gr批e': every realistic name with ö, ü or ä before ß was."""
    got = names(legacy_zip({name.encode("cp437"): b"# a\n"}))
    assert name in got


def test_one_archive_one_encoding():
    """A name only GB18030 fits does not turn the UTF-8 names of the same archive into GBK, and
    one UTF-8 name among GBK ones does not either: the archive is read with one code page."""
    mixed = legacy_zip({"会议.md".encode(): b"# a\n", "会议.md".encode("gbk") + b"x": b"# b\n"})
    got = names(mixed)
    assert "会议.md" not in got  # no single code page fits both: both stay as code page 437 reads them
    assert got == {"会议.md".encode().decode("cp437"), ("会议.md".encode("gbk") + b"x").decode("cp437")}


def test_the_unicode_path_field_wins_when_it_belongs_to_the_name():
    raw = "会议.md".encode("gbk")
    data = legacy_zip({raw: b"# a\n", b"Other.md": b"# b\n"}, unicode_path={raw: "会议纪要.md"})
    assert names(data) == {"会议纪要.md", "Other.md"}
    stale = legacy_zip({b"renamed.md": b"# a\n"}, unicode_path={b"renamed.md": "x"})
    body = stale.replace(struct.pack("<I", zlib.crc32(b"renamed.md")), struct.pack("<I", zlib.crc32(b"other")))
    assert names(body) == {"renamed.md"}  # a field left from before a rename is ignored


def test_flagged_utf8_names_are_kept_as_they_are():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("目录/页面.md", "# a\n")  # Python flags non-ASCII names UTF-8
    assert names(buf.getvalue()) == {"目录", "目录/页面.md"}


@pytest.mark.parametrize(
    ("code_page", "folder", "page", "linked", "body"),
    [
        ("gbk", "会议", "周会纪要", "待办", "# 周会\n\n见[待办](待办.md)。\n"),
        ("cp950", "會議", "週會紀錄", "待辦事項", "# 週會\n\n見[待辦](待辦事項.md)。\n"),
        ("cp932", "会議", "週次ミーティング", "宿題リスト", "# 週次\n\n[宿題](宿題リスト.md)を見る。\n"),
    ],
)
def test_a_windows_zip_imports_with_its_titles_tree_and_links(world, tmp_path, code_page, folder, page, linked, body):
    """Zips from Windows in Simplified Chinese, Traditional Chinese and Japanese."""
    archive = tmp_path / "windows.zip"
    archive.write_bytes(
        legacy_zip(
            {
                f"{folder}/{page}.md".encode(code_page): body.encode(),
                f"{folder}/{linked}.md".encode(code_page): "# 一\n\n- 一\n".encode(),
            }
        )
    )
    rep = world.run(archive, kb=world.new_kb())
    got = by_path(rep)
    assert {p: f.status for p, f in got.items()} == {
        folder: "created",
        f"{folder}/{page}.md": "created",
        f"{folder}/{linked}.md": "created",
    }
    with Session(world.engine) as s:
        doc = s.get(Document, got[f"{folder}/{page}.md"].document_id)
        assert (doc.title, s.get(Document, doc.parent_id).title) == (page, folder)
        stored = s.get(DocumentVersion, doc.current_version_id).markdown
        assert f"openkb://document/{got[f'{folder}/{linked}.md'].document_id}" in stored  # the link between them holds


def test_a_folder_with_gbk_or_undecodable_names_imports_what_it_can(world, tmp_path):
    """A folder unzipped by a tool that kept a Chinese Windows zip's GBK names: Linux hands over
    bytes that are not UTF-8. GBK names are read as such; a name that is neither fails alone
    with its reason (no traceback, the rest goes on)."""
    root = tmp_path / "unzipped"
    root.mkdir()
    folder = os.fsencode(root) + b"/" + "周报".encode("gbk")
    os.mkdir(folder)
    with open(folder + b"/" + "第一周.md".encode("gbk"), "wb") as f:
        f.write("# 第一周\n\n完成。\n".encode())
    with open(os.fsencode(root) + b"/caf\xe9\xff.md", "wb") as f:  # Latin-1 bytes: no code page guessed
        f.write(b"# cafe\n")
    (root / "ok.md").write_text("# ok\n")
    with open(os.fsencode(root) + b"/" + "議事録.md".encode("cp932"), "wb") as f:  # Japanese Windows
        f.write("# 議事録\n".encode())
    rep = world.run(root, kb=world.new_kb())
    got = {f.path: (f.status, f.error) for f in rep.files}
    assert got["周报"][0] == "created" and got["周报/第一周.md"][0] == "created" and got["ok.md"][0] == "created"
    assert got["議事録.md"][0] == "created"
    assert got["caf\\xe9\\xff.md"] == (
        "failed",
        "the file name is neither UTF-8 nor GBK, Big5 or Shift-JIS text; rename it and import again",
    )


def test_one_file_or_zip_with_a_gbk_or_undecodable_name(world, tmp_path):
    base = os.fsencode(tmp_path)
    with open(base + b"/" + "会议.md".encode("gbk"), "wb") as f:
        f.write("# 会议\n".encode())
    with open(base + b"/bad\xff.md", "wb") as f:
        f.write(b"# bad\n")
    with open(base + b"/" + "归档.zip".encode("gbk"), "wb") as f:
        f.write(legacy_zip({"纪要.md".encode("gbk"): "# 纪要\n".encode()}))
    kb = world.new_kb()
    one = world.run(Path(os.fsdecode(base + b"/" + "会议.md".encode("gbk"))), kb=kb)
    assert [(f.path, f.status) for f in one.files] == [("会议.md", "created")]
    bad = world.run(Path(os.fsdecode(base + b"/bad\xff.md")), kb=kb)
    assert [(f.path, f.status) for f in bad.files] == [("bad\\xff.md", "failed")]
    archive = world.run(Path(os.fsdecode(base + b"/" + "归档.zip".encode("gbk"))), kb=kb)
    assert [(f.path, f.status) for f in archive.files] == [("纪要.md", "created")]
