"""One browser connection: an outgoing queue drained by one writer task.

Frames are produced by several tasks (the reader, the delivery worker, turn
drafts); a single writer per socket keeps them whole and in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from starlette.websockets import WebSocket

from chatgate.platforms.webchat.protocol import encode

log = logging.getLogger(__name__)


class Connection:
    def __init__(self, ws: WebSocket, max_queued: int = 2000) -> None:
        self.ws = ws
        self.chat_id: str | None = None
        self.user_id: str | None = None
        self.user_name: str | None = None
        self.syncing = False
        self.held: list[dict[str, Any]] = []
        self.awaiting_receipt: set[str] = set()
        """Message ids framed on this socket and not yet confirmed by the client."""
        self._queue: asyncio.Queue[str | None] = asyncio.Queue(max_queued)
        self._writer: asyncio.Task[None] | None = None
        self.closed = False

    def start(self) -> None:
        self._writer = asyncio.create_task(self._write_loop(), name="chatgate-web-writer")

    async def close(self) -> None:
        self.closed = True
        if self._writer is not None:
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)

    def send(self, frame: dict[str, Any]) -> bool:
        """Queue a frame; ``False`` when the socket is gone or hopelessly behind."""
        if self.closed:
            return False
        if frame.get("type") in ("final", "notice"):
            if frame["message_id"] in self.awaiting_receipt:
                return True  # framed on this socket already (live and in the hello backlog): once
            self.awaiting_receipt.add(frame["message_id"])
        try:
            self._queue.put_nowait(encode(frame))
        except asyncio.QueueFull:
            log.warning("web client for chat %s is not reading; closing it", self.chat_id)
            self.closed = True
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait(None)
            return False
        return True

    async def _write_loop(self) -> None:
        while True:
            text = await self._queue.get()
            if text is None:
                with contextlib.suppress(Exception):
                    await self.ws.close(code=1008, reason="client too slow")
                return
            try:
                await self.ws.send_text(text)
            except Exception:  # the peer went away; the reader notices and cleans up
                self.closed = True
                return
