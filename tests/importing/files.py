"""Real files made by real libraries, for the import tests."""

from __future__ import annotations

import io
import zipfile

from PIL import Image, ImageDraw, ImageFont


def png(color: str = "red", size: tuple[int, int] = (8, 8)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def text_png(text: str) -> bytes:
    img = Image.new("RGB", (520, 110), "white")
    try:
        font = ImageFont.load_default(size=40)
    except TypeError:  # Pillow < 10.1
        font = ImageFont.load_default()
    ImageDraw.Draw(img).text((12, 30), text, fill="black", font=font)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def docx() -> bytes:
    from docx import Document
    from docx.shared import Inches

    d = Document()
    d.core_properties.title = "季度报告 Q3"
    d.add_heading("季度报告", 1)
    d.add_paragraph("收入增长了 12%。")
    t = d.add_table(rows=2, cols=2)
    for (r, c), v in {(0, 0): "地区", (0, 1): "销售额", (1, 0): "华东", (1, 1): "300"}.items():
        t.cell(r, c).text = v
    d.add_picture(io.BytesIO(png("green", (20, 20))), width=Inches(1))
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def pptx() -> bytes:
    from pptx import Presentation

    p = Presentation()
    s = p.slides.add_slide(p.slide_layouts[1])
    s.shapes.title.text = "路线图"
    s.placeholders[1].text = "第一季度：导入"
    buf = io.BytesIO()
    p.save(buf)
    return buf.getvalue()


def xlsx() -> bytes:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "预算"
    ws.append(["项目", "金额"])
    ws.append(["服务器", 1200])
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def xls() -> bytes:
    """A real legacy Excel file (BIFF8, written by xlwt), CJK sheet name and cells."""
    import xlwt

    wb = xlwt.Workbook(encoding="utf-8")
    ws = wb.add_sheet("预算 Budget")
    for r, row in enumerate([["项目 Item", "金额 Amount"], ["服务器", 1200], ["Licences", 300.5]]):
        for c, v in enumerate(row):
            ws.write(r, c, v)
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def pdf_with_table() -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.cell(text="Quarterly numbers")
    pdf.ln(12)
    with pdf.table() as table:
        for row in (("Region", "Sales"), ("North", "100"), ("South", "200")):
            r = table.row()
            for cell in row:
                r.cell(cell)
    return bytes(pdf.output())


def encrypted_pdf() -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_encryption(owner_password="o", user_password="secret")
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.cell(text="hidden")
    return bytes(pdf.output())


def encrypted_office() -> bytes:
    """The shape of a password-protected DOCX: an OLE compound file with an EncryptedPackage."""
    head = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504
    return (
        head
        + "EncryptedInfo".encode("utf-16-le")
        + b"\x00" * 64
        + "EncryptedPackage".encode("utf-16-le")
        + b"\x00" * 512
    )


def zip_of(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()
