"""Real files for the media tests, made in the tests: a PNG with Pillow, a PDF with pypdf."""

from __future__ import annotations

import io


def png(width: int = 32, height: int = 16, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def pdf(text: str) -> bytes:
    """A one-page PDF whose extracted text is ``text`` (a Helvetica text object, written by pypdf)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    page = writer.add_blank_page(width=300, height=200)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
    )
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    content = DecodedStreamObject()
    content.set_data(f"BT /F1 12 Tf 20 100 Td ({escaped}) Tj ET".encode("latin-1"))
    page[NameObject("/Contents")] = writer._add_object(content)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def png_bomb(width: int = 20_000, height: int = 20_000) -> bytes:
    """A small PNG whose header claims ``width`` x ``height`` pixels (1-bit, compressed)."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("1", (width, height), 0).save(out, format="PNG", optimize=True)
    return out.getvalue()
