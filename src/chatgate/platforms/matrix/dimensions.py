"""An image's width and height for an ``m.image`` event's ``info`` (``w``, ``h``), so a client can
lay out the picture before it downloads it. Only the header is read: the first piece of the
stored blob (about 1 MB), which Pillow parses without decoding any pixel."""

from __future__ import annotations

import asyncio
import io
import warnings
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import cast

from chatgate.domain.media import FileBody

HEAD_BYTES = 256 * 1024
"""Enough for any PNG, GIF or WebP header, and a JPEG's frame header after usual metadata."""


async def image_dimensions(body: FileBody) -> tuple[int, int] | None:
    """``(width, height)``, or None when the head does not say (an unusual layout, a huge EXIF
    block): the event then goes without them, which clients take."""
    head = b""
    stream = cast(AsyncGenerator[bytes, None], body.pieces())  # closed early: the blob's reader too
    async with aclosing(stream) as pieces:
        async for piece in pieces:
            head += piece[: HEAD_BYTES - len(head)]
            if len(head) >= HEAD_BYTES:
                break
    return await asyncio.to_thread(dimensions_of, head)  # Pillow's import and its header parse


def dimensions_of(head: bytes) -> tuple[int, int] | None:
    from PIL import Image  # lazily, as engine/media_ingest.py does

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(head)) as img:  # the header only: no pixel is decoded
                width, height = img.size
    except Exception:  # Pillow raises many types for a header it cannot read (cut short, unknown)
        return None
    return (width, height) if width > 0 and height > 0 else None
