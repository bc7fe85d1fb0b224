"""Fire-and-forget frames that became ready in the same loop tick go out as one WebSocket message.

Under a flood every ``inbound_ack`` used to be its own WebSocket message: one
permessage-deflate pass, one socket write and one trip through the send lock
each, a third of the event loop in a relay flood (issue 11). Commits of one
group commit resolve their callers in the same loop iteration, so their acks
become ready together. ``FrameCoalescer.send`` queues a frame and schedules one
flush with ``call_soon``: it runs right after the callbacks already ready, so
every ack that became ready in this tick joins the same message and none waits
for a later event (an ack is never held past the tick its commit resolved in).

The wire allows it: frames are newline-terminated lines and a WebSocket message
may carry several (docs/relay-protocol.md, "Frames"); each ack is still its own
``{"type":"inbound_ack","bufferId"}`` line, so a connector sees exactly the
frames it saw before, fewer messages.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

MAX_LINES_PER_MESSAGE = 256
"""A bound on one coalesced message (an ack line is ~50 bytes: well under the wire's limits)."""


class FrameCoalescer:
    def __init__(self, write: Callable[[str], Awaitable[bool]]) -> None:
        """``write`` sends one WebSocket text message; ``False`` when it could not."""
        self._write = write
        self._lines: list[str] = []
        self._waiters: list[asyncio.Future[bool]] = []
        self._scheduled = False
        self._flushes: set[asyncio.Task[None]] = set()
        self.messages = 0
        """WebSocket messages written (for tests and the benchmark's figures)."""

    async def send(self, line: str) -> bool:
        """Send ``line`` (one encoded frame) with the others ready in this tick; ``True`` once
        written, ``False`` when the message could not be written (nothing is retried)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bool] = loop.create_future()
        self._lines.append(line)
        self._waiters.append(done)
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._start_flush)
        return await done

    def _start_flush(self) -> None:
        self._scheduled = False
        lines, waiters = self._lines, self._waiters
        self._lines, self._waiters = [], []
        task = asyncio.get_running_loop().create_task(self._flush(lines, waiters), name="relay-coalesced")
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def _flush(self, lines: list[str], waiters: list[asyncio.Future[bool]]) -> None:
        ok = True
        try:
            for start in range(0, len(lines), MAX_LINES_PER_MESSAGE):
                if not await self._write("".join(lines[start : start + MAX_LINES_PER_MESSAGE])):
                    ok = False
                    break
                self.messages += 1
        except Exception:  # a bug in the writer: the frames are reported unsent, the loop goes on
            log.exception("relay: writing coalesced frames failed")
            ok = False
        finally:
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(ok)

    async def aclose(self) -> None:
        """Wait for the flushes in flight (each is bounded by the socket's own close)."""
        if self._flushes:
            await asyncio.gather(*list(self._flushes), return_exceptions=True)
