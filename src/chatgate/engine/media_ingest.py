"""Streaming an attachment to disk, bounded, and checking what it really is.

``ingest`` reads an async byte stream into a temporary file in ``scratch`` (the blob store's
own directory where it has one, so taking it in is a rename), hashing as it goes and stopping
at the size limit: a download is never held whole in memory, and the file work runs in a
thread. ``check`` then looks at the content, never the name: the type from its first bytes
(``domain.media.sniff``), images opened with Pillow (pixel bound against decompression bombs,
``verify``), PDFs opened with pypdf, SVG refused (it can carry script). Pillow and pypdf are
imported here, lazily, so a gateway that never sees a file never loads them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
import warnings
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import BinaryIO

import msgspec

from chatgate.domain.media import MediaLimits, MediaRefused, classify, human_size, refine_text, sniff

HEAD_BYTES = 4096
FLUSH_BYTES = 256 * 1024
"""Bytes gathered before one write in a thread (a thread hop per 16 kB network chunk costs more)."""


class TooLarge(MediaRefused):
    """A download past its byte limit (``engine/media_quota.py`` names a quota's instead)."""


class Ingested(msgspec.Struct, frozen=True):
    """A downloaded file, complete and fsynced: its temporary path, sha256, size and first bytes."""

    path: str
    sha: str
    size: int
    head: bytes


def _open_scratch(scratch: Path) -> tuple[BinaryIO, str]:
    scratch.mkdir(parents=True, exist_ok=True)
    fd, path = tempfile.mkstemp(dir=scratch, prefix="in-", suffix=".part")
    return os.fdopen(fd, "wb"), path


def _write(f: BinaryIO, update: Callable[[bytes], None], data: bytes) -> None:
    update(data)
    f.write(data)


def _finish(f: BinaryIO) -> None:
    f.flush()
    os.fsync(f.fileno())
    f.close()


def _discard(f: BinaryIO, path: str) -> None:
    f.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


async def ingest(chunks: AsyncIterator[bytes], scratch: Path, limit: int) -> Ingested:
    """Stream ``chunks`` into a new file under ``scratch``; ``MediaRefused`` past ``limit`` bytes.

    On any failure (cancellation included) the partial file is removed."""
    f, path = await asyncio.to_thread(_open_scratch, scratch)
    digest = hashlib.sha256()
    size = 0
    head = bytearray()
    pending = bytearray()
    try:
        async for chunk in chunks:
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"it is larger than {human_size(limit)}, the most accepted")
            if len(head) < HEAD_BYTES:
                head += chunk[: HEAD_BYTES - len(head)]
            pending += chunk
            if len(pending) >= FLUSH_BYTES:
                data, pending = bytes(pending), bytearray()
                await asyncio.to_thread(_write, f, digest.update, data)
        if pending:
            await asyncio.to_thread(_write, f, digest.update, bytes(pending))
        await asyncio.to_thread(_finish, f)
    except BaseException:
        await asyncio.shield(asyncio.to_thread(_discard, f, path))
        raise
    return Ingested(path, digest.hexdigest(), size, bytes(head))


def check(ingested: Ingested, name: str, limits: MediaLimits) -> str:
    """The content's MIME type once it passed the checks for its kind, else ``MediaRefused``.

    Blocking (it parses the file): call it in a thread."""
    if ingested.size == 0:
        raise MediaRefused("the file is empty")
    mime = sniff(ingested.head)
    if mime == "image/svg+xml":
        raise MediaRefused("SVG images are not accepted (they can carry script)")
    kind = classify(mime)
    if kind == "image":
        return _check_image(ingested.path, limits.max_pixels)
    if kind == "pdf":
        _check_pdf(ingested.path)
    if kind == "text":
        return refine_text(mime, name)
    return mime


def _check_image(path: str, max_pixels: int) -> str:
    from PIL import Image  # lazily: only a gateway that receives images loads Pillow

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as img:  # reads the header only: the size before any decoding
                width, height = img.size
                if width * height > max_pixels:
                    raise MediaRefused(
                        f"the image is {width}x{height} pixels, more than the {max_pixels:,} accepted"
                    )
                img.verify()
                fmt = img.format or ""
    except MediaRefused:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise MediaRefused("the image decodes to too many pixels (a decompression bomb)") from exc
    except Exception as exc:  # Pillow raises many types for a corrupt file
        raise MediaRefused(f"the image is corrupt or not a supported format ({type(exc).__name__})") from exc
    mime = Image.MIME.get(fmt)
    if mime is None or mime == "image/svg+xml":
        raise MediaRefused(f"the image format {fmt or 'unknown'} is not supported")
    return mime


def _check_pdf(path: str) -> None:
    from pypdf import PdfReader  # lazily: only a gateway that receives PDFs loads pypdf

    try:
        pages = len(PdfReader(path).pages)
    except Exception as exc:  # pypdf raises many types for a malformed file
        raise MediaRefused(f"the PDF could not be read ({type(exc).__name__})") from exc
    if pages == 0:
        raise MediaRefused("the PDF has no pages")


def extract_pdf_text(data: bytes, max_chars: int) -> tuple[str, bool]:
    """A PDF's text, page by page, stopping past ``max_chars``; and whether it was cut.
    Blocking: call it in a thread."""
    import io

    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    parts: list[str] = []
    total = 0
    for page in reader.pages:
        text = page.extract_text() or ""
        parts.append(text)
        total += len(text)
        if total > max_chars:
            break
    joined = "\n\n".join(p.strip() for p in parts if p.strip())
    return joined[:max_chars], len(joined) > max_chars or len(parts) < len(reader.pages)
