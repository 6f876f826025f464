"""Converters of foreign files to Markdown, behind one interface (docs/importing.md#converters).

A converter has a ``name``, says whether it ``supports`` a sniffed file (``sniff.Sniffed``, from
the bytes, not the extension) and ``convert``s bytes to :class:`Converted`: Markdown, the assets
it references by name (embedded images), warnings and a confidence in [0, 1]. The Markdown is
raw: the pipeline runs every result through the dialect's import mode (``repair``) before it
is saved, so converters need not know the editor.

Converters are adapters, not the system's boundary: MarkItDown (Office, CSV), pdfplumber (PDF
text layer with tables; MarkItDown's PDF path finds no tables) and markdownify (HTML) are
called here and nowhere else. None of them downloads anything at run time. OCR of images is
used only when ``rapidocr`` (which ships its models in the wheel) is installed
(``pip install openkb[ocr]``); without it an image becomes a page showing the image.

Failures are :class:`openkb.errors.ConversionFailed` with a reason a user can act on
("password-protected PDF", "damaged DOCX: ..."), never a library's traceback.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import io
import logging
import re
import zipfile
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from openkb.errors import ConversionFailed, UnsupportedFileType
from openkb.importing.sniff import Sniffed

__all__ = ["CONVERTERS", "Converted", "ConvertedAsset", "Converter", "choose", "convert", "html_to_markdown"]

# zip bombs hidden in Office files: checked before a library opens the package
MAX_ZIP_ENTRIES = 10_000
MAX_ZIP_TOTAL = 512 * 1024 * 1024
MAX_ZIP_RATIO = 200
MAX_PDF_IMAGES = 200


@dataclass(frozen=True)
class ConvertedAsset:
    name: str  # how the Markdown refers to it: ![](name)
    data: bytes
    mime: str


@dataclass
class Converted:
    markdown: str
    assets: list[ConvertedAsset] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    confidence: float = 1.0
    title: str | None = None  # a title the file itself names (HTML <title>, DOCX core title)


class Converter(Protocol):
    name: str

    def supports(self, sniffed: Sniffed) -> bool: ...

    def convert(self, data: bytes, name: str) -> Converted: ...


def check_zip(data: bytes, what: str) -> None:
    """Refuse a zip (an Office file, an upload) whose expansion would be a bomb."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ConversionFailed(f"damaged {what}: {exc}") from None
    if len(infos) > MAX_ZIP_ENTRIES:
        raise ConversionFailed(f"{what} has {len(infos)} entries; at most {MAX_ZIP_ENTRIES} are allowed")
    total = sum(i.file_size for i in infos)
    if total > MAX_ZIP_TOTAL:
        raise ConversionFailed(f"{what} expands to {total} bytes; at most {MAX_ZIP_TOTAL} are allowed")
    packed = sum(i.compress_size for i in infos) or 1
    if total > 1 << 20 and total / packed > MAX_ZIP_RATIO:
        raise ConversionFailed(
            f"{what} expands {total // packed}x; a ratio above {MAX_ZIP_RATIO} looks like a zip bomb"
        )


# --- Markdown / plain text ---------------------------------------------------------------------


def decode_text(data: bytes) -> str:
    try:
        return data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConversionFailed(f"not valid UTF-8 (byte {exc.start})") from None


class MarkdownConverter:
    name = "markdown"

    def supports(self, sniffed: Sniffed) -> bool:
        return sniffed.kind in ("markdown", "text", "empty")

    def convert(self, data: bytes, name: str) -> Converted:
        return Converted(decode_text(data), confidence=1.0)


# --- HTML ----------------------------------------------------------------------------------------

_DATA_URI = re.compile(r"\(data:(image/[a-z0-9.+-]+);base64,([A-Za-z0-9+/=\s]+)\)")
_EXT = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/svg+xml": ".svg",
    "image/bmp": ".bmp",
    "image/tiff": ".tif",
    "image/x-emf": ".emf",
    "image/x-wmf": ".wmf",
}


def html_to_markdown(html: str) -> str:
    """HTML -> Markdown written close to what the editor keeps (ATX headings, ``*`` bullets)."""
    from markdownify import markdownify

    return markdownify(
        html,
        heading_style="ATX",
        bullets="*",
        strong_em_symbol="*",
        escape_underscores=False,
        escape_misc=False,
        strip=["script", "style"],
        keep_inline_images_in=["td", "th", "a", "p", "li", "span", "div"],
    )


def extract_data_uris(markdown: str, prefix: str) -> tuple[str, list[ConvertedAsset], list[str]]:
    """Embedded ``data:`` images -> named assets; the Markdown then refers to them by name."""
    assets: list[ConvertedAsset] = []
    warnings: list[str] = []
    seen: dict[str, str] = {}

    def sub(m: re.Match[str]) -> str:
        mime = m.group(1)
        try:
            blob = base64.b64decode(re.sub(r"\s+", "", m.group(2)), validate=True)
        except (binascii.Error, ValueError):
            warnings.append("an embedded image is not valid base64; left out")
            return "()"
        digest = hashlib.sha256(blob).hexdigest()[:16]
        if digest not in seen:
            seen[digest] = f"{prefix}{len(seen) + 1}{_EXT.get(mime, '.bin')}"
            assets.append(ConvertedAsset(seen[digest], blob, mime))
        return f"({seen[digest]})"

    return _DATA_URI.sub(sub, markdown), assets, warnings


class HtmlConverter:
    name = "html"

    def supports(self, sniffed: Sniffed) -> bool:
        return sniffed.kind == "html"

    def convert(self, data: bytes, name: str) -> Converted:
        text = decode_text(data)
        m = re.search(r"<title[^>]*>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
        title = " ".join(m.group(1).split()) if m else None
        body = re.sub(r"<title[^>]*>.*?</title>", "", text, flags=re.IGNORECASE | re.DOTALL)
        md, assets, warnings = extract_data_uris(html_to_markdown(body), "image")
        return Converted(md, assets, warnings, confidence=0.8, title=title or None)


# --- Office and CSV through MarkItDown -----------------------------------------------------------


class MarkItDownConverter:
    """DOCX, PPTX, XLSX, XLS and CSV. Embedded images come back as ``data:`` URIs
    (``keep_data_uris``) and become assets; a workbook's sheets become sections."""

    name = "markitdown"
    kinds: ClassVar[dict[str, str]] = {"docx": ".docx", "pptx": ".pptx", "xlsx": ".xlsx", "xls": ".xls", "csv": ".csv"}

    def supports(self, sniffed: Sniffed) -> bool:
        return sniffed.kind in self.kinds

    def convert(self, data: bytes, name: str) -> Converted:
        from openkb.importing.sniff import sniff

        kind = sniff(data, name).kind
        if kind in ("docx", "pptx", "xlsx"):
            check_zip(data, kind.upper())
        conv = _markitdown_converter(kind)
        from markitdown import StreamInfo

        try:
            result = conv.convert(io.BytesIO(data), StreamInfo(extension=self.kinds[kind]), keep_data_uris=True)
        except Exception as exc:  # noqa: BLE001 - the libraries raise anything on a damaged file
            raise ConversionFailed(f"damaged {kind.upper()}: {type(exc).__name__}: {str(exc)[:200]}") from None
        md, assets, warnings = extract_data_uris(result.markdown or "", "image")
        if kind in ("pptx",):
            md = re.sub(r"(?m)^<!-- Slide number: (\d+) -->$", r"## Slide \1", md)
        return Converted(md, assets, warnings, confidence=0.85, title=result.title or _core_title(data))


def _core_title(data: bytes) -> str | None:
    """``dc:title`` of an Office package's ``docProps/core.xml`` (the document's own title)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            xml = z.read("docProps/core.xml").decode("utf-8", "replace")
    except (KeyError, zipfile.BadZipFile, OSError, ValueError):
        return None
    m = re.search(r"<dc:title>([^<]*)</dc:title>", xml)
    if not m:
        return None
    from html import unescape

    return " ".join(unescape(m.group(1)).split()) or None


def _markitdown_converter(kind: str):  # -> markitdown.DocumentConverter
    from markitdown.converters import (
        CsvConverter,
        DocxConverter,
        PptxConverter,
        XlsConverter,
        XlsxConverter,
    )

    return {
        "docx": DocxConverter,
        "pptx": PptxConverter,
        "xlsx": XlsxConverter,
        "xls": XlsConverter,
        "csv": CsvConverter,
    }[kind]()


# --- PDF through pdfplumber ----------------------------------------------------------------------


def _cell(v: object) -> str:
    s = " ".join(str(v).split()) if v is not None else ""
    return s.replace("|", "\\|")


def _table_md(rows: list[list[object]]) -> str:
    rows = [r for r in rows if r and any(c not in (None, "") for c in r)]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    cells = [[_cell(c) for c in r] + [""] * (width - len(r)) for r in rows]
    out = ["| " + " | ".join(cells[0]) + " |", "| " + " | ".join(["---"] * width) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in cells[1:]]
    return "\n".join(out)


class PdfConverter:
    """The text layer, page by page, with tables found by pdfplumber written as GFM tables and
    images cut out of the page as PNG assets. A scanned PDF (no text layer) converts to its page
    images with a low confidence and a warning."""

    name = "pdfplumber"

    def supports(self, sniffed: Sniffed) -> bool:
        return sniffed.kind == "pdf"

    def convert(self, data: bytes, name: str) -> Converted:
        import pdfplumber
        from pdfminer.pdfdocument import PDFPasswordIncorrect

        parts: list[str] = []
        assets: list[ConvertedAsset] = []
        warnings: list[str] = []
        chars = 0
        try:
            pdf = pdfplumber.open(io.BytesIO(data))
        except PDFPasswordIncorrect:
            raise ConversionFailed("password-protected PDF") from None
        except Exception as exc:  # noqa: BLE001
            if "password" in str(exc).lower() or "encrypt" in str(exc).lower() or "PDFPassword" in repr(exc):
                raise ConversionFailed("password-protected PDF") from None
            raise ConversionFailed(f"damaged PDF: {type(exc).__name__}: {str(exc)[:200]}") from None
        try:
            with pdf:
                for pno, page in enumerate(pdf.pages, 1):
                    tables = page.find_tables()
                    outside = page
                    for t in tables:
                        outside = outside.outside_bbox(t.bbox)
                    blocks: list[tuple[float, str]] = []
                    text = outside.extract_text() or ""
                    chars += len(text.strip())
                    for t in tables:
                        md = _table_md(t.extract())
                        if md:
                            blocks.append((t.bbox[1], md))
                    paras = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
                    page_parts = ["\n".join(line.strip() for line in p.splitlines()) for p in paras]
                    # tables after the text of their page: the text layer has no reliable order
                    page_parts += [md for _y, md in sorted(blocks)]
                    for img in page.images:
                        if len(assets) >= MAX_PDF_IMAGES:
                            warnings.append(f"more than {MAX_PDF_IMAGES} images; the rest are left out")
                            break
                        png = _crop_png(page, img)
                        if png:
                            an = f"page{pno}-image{len(assets) + 1}.png"
                            assets.append(ConvertedAsset(an, png, "image/png"))
                            page_parts.append(f"![]({an})")
                    if page_parts:
                        parts.append("\n\n".join(page_parts))
        except ConversionFailed:
            raise
        except Exception as exc:  # noqa: BLE001
            raise ConversionFailed(f"damaged PDF: {type(exc).__name__}: {str(exc)[:200]}") from None
        confidence = 0.8
        if chars == 0:
            warnings.append("no text layer (a scan?): only the page images were kept")
            confidence = 0.2
        return Converted("\n\n***\n\n".join(parts), assets, warnings, confidence)


def _crop_png(page: object, img: dict) -> bytes | None:
    try:
        x0, top, x1, bottom = (
            max(0, img["x0"]),
            max(0, img["top"]),
            min(page.width, img["x1"]),  # type: ignore[attr-defined]
            min(page.height, img["bottom"]),
        )  # type: ignore[attr-defined]
        if x1 - x0 < 2 or bottom - top < 2:
            return None
        pic = page.crop((x0, top, x1, bottom)).to_image(resolution=110).original  # type: ignore[attr-defined]
        buf = io.BytesIO()
        pic.save(buf, format="PNG")
        return buf.getvalue()
    except Exception:  # noqa: BLE001 - an image that does not render is left out, the text stays
        return None


# --- images ----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _ocr_engine():  # -> rapidocr engine or None
    """RapidOCR when installed (``openkb[ocr]``); it ships its models, so nothing is downloaded.
    Built once per process (loading the models takes seconds); its INFO chatter is silenced."""
    try:
        from rapidocr import RapidOCR  # type: ignore[import-not-found]
    except ImportError:
        return None
    logging.getLogger("RapidOCR").setLevel(logging.ERROR)
    engine = RapidOCR()
    logging.getLogger("RapidOCR").setLevel(logging.ERROR)
    return engine


def ocr_available() -> bool:
    return _ocr_engine() is not None


class ImageConverter:
    name = "image"

    def supports(self, sniffed: Sniffed) -> bool:
        return sniffed.kind == "image"

    def convert(self, data: bytes, name: str) -> Converted:
        from openkb.importing.sniff import sniff

        base = name.rsplit("/", 1)[-1]
        mime = sniff(data, name).mime
        md = f"![]({base})"
        warnings: list[str] = []
        confidence = 0.5
        engine = _ocr_engine()
        if engine is None:
            warnings.append("no OCR engine installed (pip install openkb[ocr]): the image is kept without its text")
        else:
            try:
                result = engine(data)
                lines = [str(t) for t in (getattr(result, "txts", None) or ())]
            except Exception as exc:  # noqa: BLE001
                lines = []
                warnings.append(f"OCR failed: {type(exc).__name__}")
            if lines:
                md += "\n\n" + "\n\n".join(lines)
                confidence = 0.7
        return Converted(md, [ConvertedAsset(base, data, mime)], warnings, confidence)


CONVERTERS: tuple[Converter, ...] = (
    MarkdownConverter(),
    HtmlConverter(),
    MarkItDownConverter(),
    PdfConverter(),
    ImageConverter(),
)

_REFUSED = {
    "encrypted": "password-protected Office file",
    "binary": "not a supported document",
    "zip": "a zip archive inside the import (unpack it, or import it on its own)",
    "corrupt": "damaged file",
}


def choose(sniffed: Sniffed) -> Converter:
    for c in CONVERTERS:
        if c.supports(sniffed):
            return c
    reason = _REFUSED.get(sniffed.kind, "unsupported file type")
    if sniffed.detail:
        reason = f"{reason}: {sniffed.detail}" if sniffed.detail not in reason else reason
    if sniffed.kind in ("encrypted", "corrupt"):
        raise ConversionFailed(reason)
    raise UnsupportedFileType(reason)


def convert(data: bytes, name: str) -> tuple[Sniffed, Converter, Converted]:
    from openkb.importing.sniff import sniff

    s = sniff(data, name)
    c = choose(s)
    return s, c, c.convert(data, name)
