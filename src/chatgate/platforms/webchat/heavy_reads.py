"""Reads one user cannot queue in front of everyone else's (issue 27, finding 7).

The conversation list and its search read through the store's few reader threads (two on
SQLite), which every conversation's turn reads through too. Without a gate, one user firing
searches in parallel holds them all and everyone else waits behind. Here each user has one
such read at a time (the rest of theirs wait in their own line, at most ``waiting_per_user``,
then 429), and searches, the costly kind, run ``searches_at_once`` at a time across all users,
so a reader is always left for the others' lists, histories and turns.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from chatgate.domain.errors import ChatgateError


class TooManyReads(ChatgateError):
    """This user already has as many list or search requests waiting as they may."""


@dataclass
class _Line:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    holders: int = 0


class HeavyReads:
    def __init__(self, searches_at_once: int = 1, waiting_per_user: int = 4) -> None:
        self._searches = asyncio.Semaphore(searches_at_once)
        self._waiting = waiting_per_user
        self._lines: dict[str, _Line] = {}
        """Only users with a read running or waiting: the map is bounded by the requests in flight."""

    @asynccontextmanager
    async def hold(self, user_id: str, search: bool = False) -> AsyncIterator[None]:
        line = self._lines.setdefault(user_id, _Line())
        if line.holders > self._waiting:
            raise TooManyReads(
                f"{line.holders} list or search requests of yours are still running or waiting"
            )
        line.holders += 1
        try:
            async with line.lock:
                if search:
                    async with self._searches:
                        yield
                else:
                    yield
        finally:
            line.holders -= 1
            if line.holders == 0:
                self._lines.pop(user_id, None)
