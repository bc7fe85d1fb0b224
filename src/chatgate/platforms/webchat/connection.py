"""One browser connection: an outgoing queue, bounded in bytes, drained by one writer task.

Frames are produced by several tasks (the reader, the delivery worker, turn
drafts, the hello's backlog sync); a single writer per socket keeps them whole
and in order. What a client that does not read can make us hold is the byte
bound: drafts are coalesced (a preview's latest text replaces the one still
waiting), the backlog waits for room, and any other frame over the bound closes
the socket with a reason. The client resyncs on its next hello: every unconfirmed
reply is in the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable
from typing import Any

from starlette.websockets import WebSocket

from chatgate.domain.accounts import SignedIn
from chatgate.domain.source import Source
from chatgate.platforms.webchat.protocol import encode

log = logging.getLogger(__name__)

DEFAULT_MAX_QUEUED_BYTES = 4 * 1024 * 1024
TOO_SLOW = 4008
"""Close code for a client over the byte bound (4000-4999: the application's own codes)."""
SIGNED_OUT = 4401
"""Close code for a socket whose session ended (signed out, revoked, expired) or never was."""
NO_HELLO = 4408
"""Close code for a socket that sent no accepted hello within ``http.auth_timeout_seconds``."""


class _Draft:
    """A preview waiting in the queue; later drafts of the same reply replace its text."""

    __slots__ = ("key", "size", "text")

    def __init__(self, key: str, text: str, size: int) -> None:
        self.key = key
        self.text = text
        self.size = size


class _Slot:
    """A place kept in the queue for a frame sent later (``send_after``): what is queued after
    it waits behind it until it is filled."""

    __slots__ = ("filled", "size", "text")

    def __init__(self) -> None:
        self.text = ""
        self.size = 0
        self.filled = False


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


class Connection:
    def __init__(self, ws: WebSocket, max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES) -> None:
        self.ws = ws
        self.chat_id: str | None = None
        self.user_id: str | None = None
        self.user_name: str | None = None
        self.signed: SignedIn | None = None
        """The account this socket signed in as (``auth: accounts``), decided by its cookie."""
        self.titled = False
        self.greeted = False
        """An accepted hello came (the socket's deadline for one is over)."""
        self.syncing = False
        self.held: list[dict[str, Any]] = []
        self.awaiting_receipt: set[str] = set()
        """Message ids framed on this socket and not yet confirmed by the client."""
        self.max_queued_bytes = max_queued_bytes
        self.queued_bytes = 0
        self._queue: deque[tuple[str, int] | _Draft | _Slot] = deque()
        self._drafts: dict[str, _Draft] = {}
        self._changed = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self.closed = False
        self._close_reason: str | None = None
        self._close_code = TOO_SLOW

    def source(self, platform: str) -> Source:
        """Who speaks on this socket, as the events it sends carry it."""
        return Source(platform, self.chat_id, "dm", user_id=self.user_id, user_name=self.user_name)

    def start(self) -> None:
        self._writer = asyncio.create_task(self._write_loop(), name="chatgate-web-writer")

    async def close(self) -> None:
        """Stop the writer; one closing a client over the bound is left to send its close frame.

        That frame waits for the client to read (or for the socket to die: uvicorn's ping
        timeout, or the server's shutdown); the queue it would have held is already freed.
        """
        self.closed = True
        self._changed.set()
        if self._writer is not None:
            if self._close_reason is None:
                self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)

    def send(self, frame: dict[str, Any]) -> bool:
        """Queue a frame; ``False`` when the socket is gone or was over its byte bound."""
        if self.closed:
            return False
        text = encode(frame)
        size = _size(text)
        final = frame.get("type") in ("final", "notice")
        if final and frame["message_id"] in self.awaiting_receipt:
            return True  # framed on this socket already (live and in the hello backlog): once
        if final:
            superseded = self._drafts.pop(str(frame.get("in_reply_to")), None)
            if superseded is not None:  # the final replaces its preview; the stale one is not sent
                self.queued_bytes -= superseded.size
                superseded.text, superseded.size = "", 0
        if self._queue and self.queued_bytes + size > self.max_queued_bytes:
            self._overflow(size)
            return False
        if final:
            self.awaiting_receipt.add(frame["message_id"])
        self._queue.append((text, size))
        self.queued_bytes += size
        self._changed.set()
        return True

    def send_draft(self, in_reply_to: str | None, text: str) -> None:
        """Queue a preview, or update the one of the same reply still waiting to be written."""
        if self.closed:
            return
        frame = encode({"type": "draft", "in_reply_to": in_reply_to, "text": text})
        size = _size(frame)
        key = str(in_reply_to)
        waiting = self._drafts.get(key)
        if waiting is not None:
            self.queued_bytes += size - waiting.size
            waiting.text, waiting.size = frame, size
            return
        if self._queue and self.queued_bytes + size > self.max_queued_bytes:
            return  # a preview is expendable: the final follows, and it is what counts
        draft = _Draft(key, frame, size)
        self._drafts[key] = draft
        self._queue.append(draft)
        self.queued_bytes += size
        self._changed.set()

    async def send_after(self, work: Awaitable[object] | None, frame: dict[str, Any]) -> None:
        """Queue ``frame`` once ``work`` is done, in the place it has now: what is queued
        meanwhile (a draft of the reply to the message it acknowledges) follows it. The reader
        takes one frame at a time, so a connection holds at most one such place."""
        slot = _Slot()
        if not self.closed:
            self._queue.append(slot)
        try:
            if work is not None:
                await work
        finally:
            slot.text = encode(frame)
            slot.size = _size(slot.text)
            slot.filled = True
            if not self.closed:
                self.queued_bytes += slot.size
            self._changed.set()

    async def room(self, need: int = 0) -> bool:
        """Wait until the queue is at most half full and ``need`` more bytes fit (or it is
        empty): the client is reading. ``False`` once the connection is closed."""
        while not self.closed and (
            self.queued_bytes > self.max_queued_bytes // 2
            or (self._queue and self.queued_bytes + need > self.max_queued_bytes)
        ):
            self._changed.clear()
            await self._changed.wait()
        return not self.closed

    async def send_paced(self, frame: dict[str, Any]) -> bool:
        """Queue a frame once there is room for it (flow control for the backlog sync)."""
        return await self.room(_size(encode(frame))) and self.send(frame)

    def _overflow(self, size: int) -> None:
        log.warning(
            "web client for chat %s is not reading (%d bytes queued, limit %d); closing it",
            self.chat_id,
            self.queued_bytes + size,
            self.max_queued_bytes,
            extra={"code": "too_slow"},
        )
        self.close_with(TOO_SLOW, "too_slow: over the send bound; reconnect to resync")

    def close_with(self, code: int, reason: str) -> None:
        """Drop what is queued and let the writer send a close frame with ``code``."""
        self.closed = True
        self._queue.clear()
        self._drafts.clear()
        self.queued_bytes = 0
        self._close_code, self._close_reason = code, reason
        self._changed.set()

    async def _next(self) -> str | None:
        """The next frame's text; ``None`` once the connection is closed."""
        while not self._queue or (isinstance(self._queue[0], _Slot) and not self._queue[0].filled):
            if self.closed:
                return None
            self._changed.clear()
            await self._changed.wait()
        item = self._queue.popleft()
        if isinstance(item, _Slot):
            text, size = item.text, item.size
        elif isinstance(item, _Draft):
            if self._drafts.get(item.key) is not item:
                return ""  # superseded by its final (its bytes were released then)
            del self._drafts[item.key]
            text, size = item.text, item.size
        else:
            text, size = item
        self.queued_bytes -= size
        self._changed.set()
        return text

    async def _write_loop(self) -> None:
        while True:
            text = await self._next()
            if text is None:
                if self._close_reason is not None:
                    with contextlib.suppress(Exception):
                        await self.ws.close(code=self._close_code, reason=self._close_reason)
                return
            if not text:
                continue
            try:
                await self.ws.send_text(text)
            except Exception:  # the peer went away; the reader notices and cleans up
                self.closed = True
                self._changed.set()
                return
