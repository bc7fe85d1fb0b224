"""Streaming ingest with real files: bounded, hashed, fsynced to a temp file; the checks look at
the content (Pillow for images, pypdf for PDFs) and refuse what they cannot trust."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chatgate.domain.media import MediaLimits, MediaRefused
from chatgate.engine.media_ingest import check, extract_pdf_text, ingest
from support.media_files import pdf, png, png_bomb


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


async def pieces(data: bytes, size: int = 10_000) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def test_ingest_streams_to_a_file_with_its_sha(tmp_path: Path) -> None:
    data = png(640, 480)
    got = await ingest(pieces(data), tmp_path, limit=10_000_000)
    assert got.sha == hashlib.sha256(data).hexdigest()
    assert got.size == len(data)
    assert read(got.path) == data
    assert os.path.dirname(got.path) == str(tmp_path)
    assert check(got, "anything.txt", MediaLimits()) == "image/png"  # the content, not the name


async def test_past_the_limit_it_stops_and_leaves_no_file(tmp_path: Path) -> None:
    with pytest.raises(MediaRefused, match=r"larger than 50\.0 kB"):
        await ingest(pieces(b"x" * 200_000), tmp_path, limit=50_000)
    assert os.listdir(tmp_path) == []


async def test_a_failed_stream_leaves_no_file(tmp_path: Path) -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield b"abc"
        raise ConnectionResetError("peer went away")

    with pytest.raises(ConnectionResetError):
        await ingest(broken(), tmp_path, limit=1000)
    assert os.listdir(tmp_path) == []


async def checked(tmp_path: Path, data: bytes, name: str = "f", limits: MediaLimits | None = None) -> str:
    return check(await ingest(pieces(data), tmp_path, 10**9), name, limits or MediaLimits())


async def test_bad_files_are_refused_with_a_reason(tmp_path: Path) -> None:
    with pytest.raises(MediaRefused, match="SVG"):
        await checked(tmp_path, b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')
    with pytest.raises(MediaRefused, match="empty"):
        await checked(tmp_path, b"")
    with pytest.raises(MediaRefused, match="corrupt"):
        await checked(tmp_path, png()[:40])  # a PNG cut short
    with pytest.raises(MediaRefused, match="PDF could not be read"):
        await checked(tmp_path, b"%PDF-1.7\n garbage that is no PDF")
    with pytest.raises(MediaRefused, match="pixels"):
        await checked(tmp_path, png_bomb(8000, 8000), limits=MediaLimits(max_pixels=40_000_000))


async def test_text_and_pdf_pass_with_their_types(tmp_path: Path) -> None:
    assert await checked(tmp_path, b"a,b\n1,2\n", "data.csv") == "text/csv"
    assert await checked(tmp_path, b"# Title\n", "notes.md") == "text/markdown"
    assert await checked(tmp_path, b"<script>x</script>", "page.html") == "text/plain"
    assert await checked(tmp_path, pdf("Hello PDF")) == "application/pdf"
    assert extract_pdf_text(pdf("Quarterly revenue rose"), 1000) == ("Quarterly revenue rose", False)
    assert extract_pdf_text(pdf("Quarterly revenue rose"), 9) == ("Quarterly", True)
