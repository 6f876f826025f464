"""Converters on real files (python-docx, python-pptx, openpyxl, fpdf2, Pillow), chosen by the
bytes, and each result through the dialect's import mode (no database needed)."""

from __future__ import annotations

import pytest

from openkb.errors import ConversionFailed, UnsupportedFileType
from openkb.importing.converters import check_zip, convert, ocr_available
from openkb.importing.repair import import_markdown
from openkb.importing.sniff import sniff
from openkb.markdown import validate
from tests.importing import files


def _saved(data: bytes, name: str):
    _s, conv, out = convert(data, name)
    rep = import_markdown(out.markdown)
    assert not [i for i in validate(rep.markdown) if i.severity == "error"]  # what a save accepts
    return conv, out, rep


def test_docx_headings_table_and_embedded_image():
    conv, out, rep = _saved(files.docx(), "报告.docx")
    assert conv.name == "markitdown" and out.title == "季度报告 Q3"
    assert "# 季度报告" in rep.markdown and "收入增长了 12%。" in rep.markdown
    assert "| 华东" in rep.markdown and "300" in rep.markdown
    [img] = out.assets
    assert img.mime == "image/png" and img.data[:4] == b"\x89PNG" and f"]({img.name})" in rep.markdown


def test_pptx_and_xlsx_and_csv():
    _c, _o, slides = _saved(files.pptx(), "deck.pptx")
    assert "路线图" in slides.markdown and "第一季度：导入" in slides.markdown and "<!--" not in slides.markdown
    _c, _o, sheet = _saved(files.xlsx(), "budget.xlsx")
    assert "## 预算" in sheet.markdown and "| 服务器" in sheet.markdown and "1200" in sheet.markdown
    _c, _o, csv = _saved("名称,数量\n苹果,3\n".encode(), "fruit.csv")
    assert "| 名称" in csv.markdown and "| 苹果" in csv.markdown


def test_legacy_xls():
    data = files.xls()
    assert data[:8] == b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an OLE2 compound file, not a renamed xlsx
    assert sniff(data, "budget.bin").kind == "xls"  # by the bytes
    conv, _out, sheet = _saved(data, "budget.xls")
    assert conv.name == "markitdown"
    assert "## 预算 Budget" in sheet.markdown
    assert "| 服务器" in sheet.markdown and "1200" in sheet.markdown and "300.5" in sheet.markdown


def test_pdf_text_and_table_as_gfm():
    conv, _out, rep = _saved(files.pdf_with_table(), "numbers.pdf")
    assert conv.name == "pdfplumber"
    assert "Quarterly numbers" in rep.markdown
    lines = [ln.replace(" ", "") for ln in rep.markdown.splitlines()]
    assert "|Region|Sales|" in lines and "|North|100|" in lines and "|South|200|" in lines


def test_html_with_embedded_image_and_title():
    html = (
        "<html><head><title>导出页</title></head><body><h2>小节</h2><p>Text <b>bold</b></p>"
        '<img src="data:image/png;base64,' + __import__("base64").b64encode(files.png()).decode() + '"></body></html>'
    )
    conv, out, rep = _saved(html.encode(), "page.html")
    assert conv.name == "html" and out.title == "导出页"
    assert "## 小节" in rep.markdown and "**bold**" in rep.markdown
    assert out.assets[0].data == files.png() and "data:" not in rep.markdown


def test_html_nested_past_what_the_converter_walks_fails_with_a_reason():
    """One file of an import fails, in words, not as a RecursionError's name; the others go on."""
    from openkb.importing.prepare import prepare_bytes

    deep = ("<div>" * 5000 + "x" + "</div>" * 5000).encode()
    p = prepare_bytes("deep.html", deep)
    assert p.code == "CONVERSION_FAILED" and p.error.startswith("nested too deeply to convert")
    assert prepare_bytes("ok.html", b"<p>fine</p>").error is None


def test_sniffing_goes_by_bytes_not_names():
    assert sniff(files.png(), "notes.md").kind == "image"
    assert sniff(files.docx(), "renamed.bin").kind == "docx"
    assert sniff(files.pdf_with_table(), "x.md").kind == "pdf"
    assert sniff(b"\x00\x01\x02binary\x00", "fake.md").kind == "binary"
    assert "UTF-8" in sniff("caf\u00e9".encode("latin-1"), "latin.md").detail
    assert sniff(b"# hi\n", "x.txt").kind == "text" and sniff(b"<!doctype html><p>x", "x").kind == "html"


@pytest.mark.parametrize(
    ("data", "name", "error", "needle"),
    [
        (b"\x00\x01\x02binary\x00", "fake.md", UnsupportedFileType, "NUL"),
        ("caf\u00e9".encode("latin-1"), "latin.md", UnsupportedFileType, "not valid UTF-8"),
        (files.encrypted_office(), "secret.docx", ConversionFailed, "password-protected"),
        (b"PK\x03\x04 this is no zip", "broken.docx", ConversionFailed, "damaged"),
        (b"%PDF-1.7\n garbage", "broken.pdf", ConversionFailed, "damaged PDF"),
        # a file in an import named as an archive but holding text: refused, never a page of it
        (b"# renamed notes\n", "notes.ZIP", ConversionFailed, "not a zip archive"),
    ],
)
def test_bad_files_fail_with_a_reason(data, name, error, needle):
    with pytest.raises(error) as exc:
        convert(data, name)
    assert needle in exc.value.detail


def test_encrypted_pdf_says_password():
    with pytest.raises(ConversionFailed, match="password-protected PDF"):
        convert(files.encrypted_pdf(), "secret.pdf")


def test_office_zip_bomb_is_refused_before_unpacking():
    bomb = files.zip_of({"word/document.xml": b"<w/>", "word/bomb.xml": b"0" * (40 << 20)})
    with pytest.raises(ConversionFailed, match="zip bomb"):
        check_zip(bomb, "DOCX")
    with pytest.raises(ConversionFailed, match="zip bomb"):
        convert(bomb, "bomb.docx")


@pytest.mark.skipif(not ocr_available(), reason="OCR engine not installed (pip install openkb[ocr])")
def test_image_text_is_recognised():
    conv, out, rep = _saved(files.text_png("Hello OpenKB 2026"), "scan.png")
    assert conv.name == "image" and out.assets[0].name == "scan.png"
    assert "OpenKB" in rep.markdown
