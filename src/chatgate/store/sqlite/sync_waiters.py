"""The writer's ``sync`` callers: each waits for every commit before it to reach the disk.

A caller (a lane about to acknowledge relaxed admissions upstream) joins when the writer
takes it off its queue, after the writes queued before it committed. If nothing relaxed is
unsynced then, it is answered at once; otherwise at the writer's next fsync of the WAL: a
durable commit's, or the writer's own once the oldest caller has waited ``linger``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec

Answer = tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Any, BaseException | None]
"""What the writer hands back to a caller: its loop, its future, the result or the error."""


class SyncCall(msgspec.Struct):
    """One ``sync`` caller, queued to the writer like a write."""

    future: asyncio.Future[None]
    loop: asyncio.AbstractEventLoop


class SyncWaiters:
    """Callers waiting for an fsync (touched by the writer thread only)."""

    def __init__(self, hand_back: Callable[[list[Answer]], None]) -> None:
        self._hand_back = hand_back
        self._waiting: list[SyncCall] = []
        self.due: float | None = None
        """When the oldest caller stops waiting for a durable commit (monotonic)."""

    def __bool__(self) -> bool:
        return bool(self._waiting)

    def wait(self, calls: list[SyncCall], now: float, linger: float) -> None:
        self._waiting.extend(calls)
        if self.due is None:
            self.due = now + linger

    def release(self, error: BaseException | None) -> None:
        """Answer every caller: the WAL was fsynced (``error`` None), or it never will be."""
        calls, self._waiting, self.due = self._waiting, [], None
        self._hand_back([(call.loop, call.future, None, error) for call in calls])
