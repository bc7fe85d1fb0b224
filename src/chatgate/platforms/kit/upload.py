"""A stored file as an HTTP request part that aiohttp writes piece by piece as the request goes
out: an upload to Telegram, Discord or Slack holds one piece of the blob at a time, never the
whole file (``domain.media.FileBody``)."""

from __future__ import annotations

from typing import Any

from aiohttp.payload import AsyncIterablePayload

from chatgate.domain.media import FileBody


class FilePayload(AsyncIterablePayload):
    """The file's pieces with their total length known, so the request carries a
    ``Content-Length`` (a part of unknown size makes the whole request chunked, which not every
    upload endpoint takes)."""

    def __init__(self, body: FileBody, mime: str, **kwargs: Any) -> None:
        super().__init__(body.pieces(), content_type=mime, **kwargs)
        self._size = body.size
