"""A streaming, deterministic zip writer for the export (docs/export.md#the-zip).

Why not ``zipfile``: per member it builds a ``ZipInfo``, opens a writer object, deflates through
a fresh compressor and (on a stream that cannot seek) writes a data descriptor — ~40 µs of Python
per member, as much as reading the page. This writer does only what the export needs:

* a page is written whole (its bytes are in memory): CRC, deflate once, one local header with the
  sizes in it — no data descriptor;
* an asset is streamed chunk by chunk from the blob store: its CRC and size are known only at
  the end, so it gets a data descriptor (flag bit 3), the form any zip written to a pipe has;
* folders are empty stored entries; the central directory and end records close the zip;
  Zip64 records appear only when a size, an offset or the member count needs them.

Deterministic: fixed time (1980-01-01), Unix attributes, flag bit 11 for non-ASCII names — the
same bytes for the same members. Output goes to ``out(bytes)`` as it is produced; the writer
keeps only the central directory (~100 bytes per member).

Trap: the deflate stream of each member is independent (``zlib.compress`` with raw wbits), so a
reader can open any member alone; sizes above 4 GiB need Zip64 fields in the local header
*before* the data is known, so a streamed member announces Zip64 when its planned size is near
the limit (``tests/export/test_zipwriter.py`` forces the limit down to check both forms).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["Deflated", "ZipStream"]

ZIP64_LIMIT = (1 << 31) - 1  # as zipfile: past this a size or offset is written as Zip64
_DOS_TIME = 0  # 00:00:00
_DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01
_FILE_ATTR = (0o100644 << 16) & 0xFFFFFFFF
_DIR_ATTR = ((0o40755 << 16) | 0x10) & 0xFFFFFFFF
_LOCAL = struct.Struct("<4sHHHHHLLLHH")
_CENTRAL = struct.Struct("<4sBBHHHHHLLLHHHHHLL")
_END = struct.Struct("<4sHHHHLLH")
_END64 = struct.Struct("<4sQHHLLQQQQ")
_LOCATOR64 = struct.Struct("<4sLQL")
_DESC = struct.Struct("<4sLLL")
_DESC64 = struct.Struct("<4sLQQ")


class Deflated(NamedTuple):
    """A member's bytes deflated ahead of writing. A named tuple: one is made per page, and a
    frozen dataclass's ``__init__`` cost three times as much."""

    crc: int
    size: int
    body: bytes
    sha256: str


class ZipStream:
    """Members are added in the order they should appear; ``close()`` writes the directory."""

    def __init__(self, out: Callable[[bytes], object], *, level: int = 1) -> None:
        self._out = out
        self._level = level
        self.offset = 0
        self._central: list[bytes] = []

    def _write(self, b: bytes) -> None:
        self._out(b)
        self.offset += len(b)

    @staticmethod
    def _name(path: str) -> tuple[bytes, int]:
        # flag bit 11: the name is UTF-8 (checked, not tried: a caught UnicodeEncodeError per
        # CJK path cost more than the rest of a folder's entry)
        return path.encode(), 0 if path.isascii() else 0x800

    def _record(
        self, name: bytes, flags: int, method: int, crc: int, csize: int, size: int, offset: int, attr: int
    ) -> None:
        version, extra = 20, b""
        if size > ZIP64_LIMIT or csize > ZIP64_LIMIT or offset > ZIP64_LIMIT:  # rare: one test forces it
            fields = [v for v in (size, csize, offset) if v > ZIP64_LIMIT]  # in this order (APPNOTE 4.5.3)
            extra = struct.pack(f"<HH{len(fields)}Q", 1, 8 * len(fields), *fields)
            version = 45
            csize, size, offset = (0xFFFFFFFF if v > ZIP64_LIMIT else v for v in (csize, size, offset))
        self._central.append(
            _CENTRAL.pack(
                b"PK\x01\x02",
                version,
                3,  # made on Unix, whatever the exporting machine is
                version,
                flags,
                method,
                _DOS_TIME,
                _DOS_DATE,
                crc,
                csize,
                size,
                len(name),
                len(extra),
                0,
                0,
                0,
                attr,
                offset,
            )
            + name
            + extra
        )

    def folder(self, path: str) -> None:
        name, flags = self._name(path)
        offset = self.offset
        self._write(_LOCAL.pack(b"PK\x03\x04", 20, flags, 0, _DOS_TIME, _DOS_DATE, 0, 0, 0, len(name), 0) + name)
        self._record(name, flags, 0, 0, 0, 0, offset, _DIR_ATTR)

    def file(self, path: str, data: bytes, *, compress: bool = True) -> None:
        """A member whose bytes are all here (a page, the manifest)."""
        name, flags = self._name(path)
        crc = zlib.crc32(data)
        method = 8 if compress else 0
        body = zlib.compress(data, self._level, wbits=-15) if compress else data
        if len(body) > ZIP64_LIMIT or len(data) > ZIP64_LIMIT:
            raise ValueError(f"{path}: a member written whole must stay under 2 GiB")
        offset = self.offset
        self._write(
            _LOCAL.pack(b"PK\x03\x04", 20, flags, method, _DOS_TIME, _DOS_DATE, crc, len(body), len(data), len(name), 0)
            + name
        )
        self._write(body)
        self._record(name, flags, method, crc, len(body), len(data), offset, _FILE_ATTR)

    def deflated(self, path: str, d: Deflated) -> None:
        """A member deflated ahead (an export form's page, ``openkb/exporting/forms.py``)."""
        if len(d.body) > ZIP64_LIMIT or d.size > ZIP64_LIMIT:
            raise ValueError(f"{path}: a member written whole must stay under 2 GiB")
        name, flags = self._name(path)
        offset = self.offset
        self._write(
            _LOCAL.pack(b"PK\x03\x04", 20, flags, 8, _DOS_TIME, _DOS_DATE, d.crc, len(d.body), d.size, len(name), 0)
            + name
        )
        self._write(d.body)
        self._record(name, flags, 8, d.crc, len(d.body), d.size, offset, _FILE_ATTR)

    def open(self, path: str, *, compress: bool, planned_size: int) -> _Member:
        """A member written chunk by chunk (an asset): ``write`` each chunk, then ``close``.
        Bytes go out as they are produced, so a caller that hands them on between chunks keeps
        memory flat."""
        name, flags = self._name(path)
        flags |= 0x08  # sizes and CRC in a data descriptor after the data
        zip64 = planned_size > ZIP64_LIMIT * 0.9  # decided before the data: the header goes first
        extra = struct.pack("<HHQQ", 1, 16, 0, 0) if zip64 else b""
        m = _Member(self, path, name, flags, compress, zip64, planned_size)
        self._write(
            _LOCAL.pack(
                b"PK\x03\x04",
                45 if zip64 else 20,
                flags,
                m.method,
                _DOS_TIME,
                _DOS_DATE,
                0,
                0xFFFFFFFF if zip64 else 0,
                0xFFFFFFFF if zip64 else 0,
                len(name),
                len(extra),
            )
            + name
            + extra
        )
        return m

    def close(self) -> None:
        start, n = self.offset, len(self._central)
        for entry in self._central:
            self._write(entry)
        self._central = []
        size = self.offset - start
        if n > 0xFFFF or start > ZIP64_LIMIT or size > ZIP64_LIMIT:
            end64 = self.offset
            self._write(_END64.pack(b"PK\x06\x06", 44, 45, 45, 0, 0, n, n, size, start))
            self._write(_LOCATOR64.pack(b"PK\x06\x07", 0, end64, 1))
        self._write(
            _END.pack(
                b"PK\x05\x06",
                0,
                0,
                min(n, 0xFFFF),
                min(n, 0xFFFF),
                min(size, 0xFFFFFFFF),
                min(start, 0xFFFFFFFF),
                0,
            )
        )


class _Member:
    """One member being streamed into a ``ZipStream``."""

    def __init__(
        self, z: ZipStream, path: str, name: bytes, flags: int, compress: bool, zip64: bool, planned: int
    ) -> None:
        self._z, self._path, self._name, self._flags, self._zip64, self._planned = z, path, name, flags, zip64, planned
        self.method = 8 if compress else 0
        self._offset = z.offset
        self._comp = zlib.compressobj(z._level, zlib.DEFLATED, -15) if compress else None
        self.crc, self.size, self.csize = 0, 0, 0

    def write(self, chunk: bytes) -> None:
        self.crc = zlib.crc32(chunk, self.crc)
        self.size += len(chunk)
        out = self._comp.compress(chunk) if self._comp is not None else chunk
        if out:
            self.csize += len(out)
            self._z._write(out)

    def close(self) -> None:
        if self._comp is not None:
            tail = self._comp.flush()
            self.csize += len(tail)
            self._z._write(tail)
        if not self._zip64 and (self.size > ZIP64_LIMIT or self.csize > ZIP64_LIMIT):
            raise ValueError(f"{self._path}: {self.size} bytes, far more than the {self._planned} planned")
        desc = _DESC64 if self._zip64 else _DESC
        self._z._write(desc.pack(b"PK\x07\x08", self.crc, self.csize, self.size))
        self._z._record(self._name, self._flags, self.method, self.crc, self.csize, self.size, self._offset, _FILE_ATTR)
