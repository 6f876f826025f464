"""The export's zip writer (openkb/exporting/zipwriter.py) against Python's own zip reader: whole
and streamed members, stored and deflated, non-ASCII names, and the Zip64 forms (the limit is
forced down so small members take them), byte-identical for the same members."""

from __future__ import annotations

import hashlib
import io
import zipfile
import zlib

import pytest

from openkb.exporting import zipwriter
from openkb.exporting.zipwriter import Deflated, ZipStream


def build() -> bytes:
    parts: list[bytes] = []
    z = ZipStream(parts.append)
    z.folder("笔记 Notes/")
    z.file("笔记 Notes/页面.md", "# 页面\n\nhello\n".encode() * 5)
    ahead = b"ahead " * 20
    pre = Deflated(zlib.crc32(ahead), len(ahead), zlib.compress(ahead, 1, wbits=-15), hashlib.sha256(ahead).hexdigest())
    z.deflated("a.md", pre)
    m = z.open("assets/0123/图.png", compress=False, planned_size=64)
    for chunk in (b"\x89PNG" + b"x" * 30, b"y" * 30):
        m.write(chunk)
    m.close()
    m = z.open("assets/4567/notes.txt", compress=True, planned_size=300)
    m.write(b"text " * 60)
    m.close()
    z.file("openkb-export.json", b"{}\n")
    z.close()
    return b"".join(parts)


def check(data: bytes) -> None:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.testzip() is None
        assert zf.namelist() == [
            "笔记 Notes/",
            "笔记 Notes/页面.md",
            "a.md",
            "assets/0123/图.png",
            "assets/4567/notes.txt",
            "openkb-export.json",
        ]
        assert zf.read("a.md") == b"ahead " * 20
        assert zf.read("assets/0123/图.png") == b"\x89PNG" + b"x" * 30 + b"y" * 30
        assert zf.getinfo("assets/0123/图.png").compress_type == zipfile.ZIP_STORED
        assert zf.getinfo("assets/4567/notes.txt").compress_type == zipfile.ZIP_DEFLATED
        assert zf.getinfo("笔记 Notes/").is_dir()
        assert zf.getinfo("a.md").date_time == (1980, 1, 1, 0, 0, 0)


def test_members_read_back_and_bytes_repeat():
    data = build()
    check(data)
    assert build() == data
    assert b"PK\x06\x06" not in data  # no Zip64 record when nothing needs one


def test_zip64_forms(monkeypatch):
    monkeypatch.setattr(zipwriter, "ZIP64_LIMIT", 200)  # offsets and the planned 300 bytes pass it
    data = build()
    check(data)
    assert b"PK\x06\x06" in data and b"PK\x06\x07" in data


def test_a_member_larger_than_planned_past_the_limit_is_refused(monkeypatch):
    monkeypatch.setattr(zipwriter, "ZIP64_LIMIT", 100)
    z = ZipStream(lambda b: None)
    m = z.open("big.bin", compress=False, planned_size=10)
    m.write(b"x" * 150)
    with pytest.raises(ValueError, match="planned"):
        m.close()
