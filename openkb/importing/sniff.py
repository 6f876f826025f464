"""What a file really is, from its bytes: magic numbers, zip member names, a UTF-8 check.

The extension is only a tie-breaker between text formats (``.csv`` vs ``.md``); it never makes
binary content Markdown. A PNG renamed ``notes.md`` is an image, random bytes named ``.md`` are
``binary`` (the import refuses them), and a ``.docx`` that is really a zip of something else is a
plain ``zip``. Encrypted Office files are CFB containers holding an ``EncryptedPackage`` stream:
recognised here so the failure says "password-protected" instead of "corrupt".

Only the head of a file is needed for most kinds; zips are opened to read the member names
(the central directory), never decompressed here.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass

__all__ = ["OFFICE_KINDS", "TEXT_KINDS", "Sniffed", "sniff"]

_CFB = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_IMAGES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_MD_EXT = {".md", ".markdown", ".mdown", ".mkd", ".mdx"}
_HTML_EXT = {".html", ".htm", ".xhtml"}
TEXT_KINDS = frozenset({"markdown", "text", "html", "csv"})
OFFICE_KINDS = frozenset({"docx", "pptx", "xlsx", "xls"})


def _utf16(s: str) -> bytes:
    return s.encode("utf-16-le")


@dataclass(frozen=True)
class Sniffed:
    kind: str  # markdown|text|html|csv|pdf|docx|pptx|xlsx|xls|image|zip|encrypted|binary|empty
    mime: str
    name: str
    detail: str = ""  # why: "zip with word/document.xml", "invalid UTF-8 at byte 12", ...

    @property
    def ext(self) -> str:
        dot = self.name.rfind(".")
        return self.name[dot:].lower() if dot > 0 else ""


def _ext(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    dot = base.rfind(".")
    return base[dot:].lower() if dot > 0 else ""


# a zip archive's first bytes: a local file header, or the end record of an empty archive
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def sniff(data: bytes, name: str) -> Sniffed:
    """Classify ``data`` (the whole file); ``name`` only breaks ties between text formats."""
    ext = _ext(name)
    if not data:
        return Sniffed("empty", "text/plain", name, "empty file")
    head = data[:16]
    if head.startswith(b"%PDF-"):
        return Sniffed("pdf", "application/pdf", name)
    for magic, mime in _IMAGES:
        if head.startswith(magic):
            return Sniffed("image", mime, name)
    if head[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return Sniffed("image", "image/webp", name)
    if head.startswith(_CFB):
        return _cfb(data, name)
    if head.startswith(ZIP_MAGIC):
        return _zip(data, name)
    if ext == ".zip":  # named an archive, holding something else: refused, not read as text
        return Sniffed("corrupt", "application/zip", name, "not a zip archive")
    return _text(data, name, ext)


def _cfb(data: bytes, name: str) -> Sniffed:
    """OLE compound file: legacy Excel, or an encrypted OOXML package (Office's password files)."""
    if _utf16("EncryptedPackage") in data:
        return Sniffed("encrypted", "application/octet-stream", name, "password-protected Office file")
    if _utf16("Workbook") in data or _utf16("Book") in data:
        return Sniffed("xls", "application/vnd.ms-excel", name)
    return Sniffed("binary", "application/octet-stream", name, "legacy Office file (only .xls is supported)")


def _zip(data: bytes, name: str) -> Sniffed:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            names = set(z.namelist())
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        return Sniffed("corrupt", "application/zip", name, f"damaged zip archive ({exc})")
    if "word/document.xml" in names:
        return Sniffed(
            "docx",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            name,
            "zip with word/document.xml",
        )
    if "ppt/presentation.xml" in names:
        return Sniffed(
            "pptx",
            "application/vnd.openxmlformats-officedocument.presentationml.presentation",
            name,
            "zip with ppt/presentation.xml",
        )
    if "xl/workbook.xml" in names:
        return Sniffed(
            "xlsx",
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            name,
            "zip with xl/workbook.xml",
        )
    return Sniffed("zip", "application/zip", name)


def _text(data: bytes, name: str, ext: str) -> Sniffed:
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    if b"\x00" in body[:8192]:
        return Sniffed("binary", "application/octet-stream", name, "binary content (NUL bytes)")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Sniffed(
            "binary",
            "application/octet-stream",
            name,
            f"not valid UTF-8 (byte {exc.start}: {body[exc.start : exc.start + 1].hex()})",
        )
    control = sum(1 for ch in text[:4096] if ord(ch) < 32 and ch not in "\t\n\r\f")
    if control > 8:
        return Sniffed("binary", "application/octet-stream", name, "binary content (control characters)")
    if ext == ".csv":
        return Sniffed("csv", "text/csv", name)
    lead = text.lstrip()[:200].lower()
    if ext in _HTML_EXT or (ext not in _MD_EXT and lead.startswith(("<!doctype html", "<html"))):
        return Sniffed("html", "text/html", name)
    if ext in _MD_EXT:
        return Sniffed("markdown", "text/markdown", name)
    return Sniffed("text", "text/plain", name)
