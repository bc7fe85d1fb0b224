"""Requests waiting for their answer: what the adapter's outbound side hands each of them.

A waiter holds only the latest draft, whether the answer has arrived, and a short,
bounded list of approval events, so a client that reads slowly costs a fixed amount of
memory; the number of waiters is bounded too (``max_waiting``). The answer itself is
read from the store when a waiter learns it arrived, so a waiter never needs the rows.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from chatgate.platforms.api.errors import ApiError

MAX_EVENTS = 32
"""Approval events kept per waiter beyond what its client has read (the oldest drop first)."""


class Waiter:
    def __init__(self, chat_id: str, ref: str) -> None:
        self.chat_id = chat_id
        self.ref = ref
        self.draft = ""
        self.answered: str | None = None
        """The text of the row that answered (a fallback when the store cannot be read)."""
        self.events: deque[dict[str, Any]] = deque(maxlen=MAX_EVENTS)
        self.closed: str | None = None
        self._changed = asyncio.Event()

    def poke(self) -> None:
        self._changed.set()

    async def changed(self, timeout: float) -> bool:
        """Wait until something changed (True) or ``timeout`` passed (False)."""
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            return False
        self._changed.clear()
        return True


class Waiters:
    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._by_chat: dict[str, set[Waiter]] = {}
        self._count = 0
        self._shut: str | None = None

    @property
    def count(self) -> int:
        return self._count

    def open(self, chat_id: str, ref: str) -> Waiter:
        if self._shut is not None:
            raise ApiError(503, "shutting_down", self._shut)
        if self._count >= self._limit:
            raise ApiError(
                429,
                "too_many_waiting",
                f"{self._limit} requests are already waiting for answers (platforms.api.max_waiting);"
                " retry later",
            )
        waiter = Waiter(chat_id, ref)
        self._by_chat.setdefault(chat_id, set()).add(waiter)
        self._count += 1
        return waiter

    def close(self, waiter: Waiter) -> None:
        peers = self._by_chat.get(waiter.chat_id)
        if peers is not None and waiter in peers:
            peers.discard(waiter)
            self._count -= 1
            if not peers:
                del self._by_chat[waiter.chat_id]

    def _of(self, chat_id: str, ref: str | None = None) -> list[Waiter]:
        return [w for w in self._by_chat.get(chat_id, ()) if ref is None or w.ref == ref]

    def draft(self, chat_id: str, ref: str | None, text: str) -> None:
        for waiter in self._of(chat_id, ref or ""):
            waiter.draft = text
            waiter.poke()

    def answer(self, chat_id: str, ref: str | None, text: str) -> None:
        for waiter in self._of(chat_id, ref or ""):
            waiter.answered = text
            waiter.poke()

    def event(self, chat_id: str, event: dict[str, Any]) -> None:
        """An approval event for every request waiting in the chat (the turn's own request)."""
        for waiter in self._of(chat_id):
            waiter.events.append(event)
            waiter.poke()

    def shut(self, reason: str) -> None:
        self._shut = reason
        for peers in list(self._by_chat.values()):
            for waiter in peers:
                waiter.closed = reason
                waiter.poke()
