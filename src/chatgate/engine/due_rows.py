"""When the rows the delivery worker put back fall due: one timer, always at the earliest.

A row settled back to ``pending`` with a ``next_attempt_at`` (a rate-limit wait, a 429, a
retry's backoff, a client away) is claimable only from then on. Polling to find it costs up
to a poll interval of idle platform per row (issue 33: Telegram ran at half its budget), so
the worker records each such due time here; one loop timer stands at the earliest, and is
moved after every claim to the next one still ahead. The poll stays only as a fallback, for
rows this process did not put back (another process's, or those a restart found).
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable

MAX_DUE = 100_000
"""Due times remembered at once; past that, a later one waits for the poll."""
MARGIN = 0.002
"""The timer fires this much after a due time, so the claim's clock has passed it (a loop timer
may fire a clock tick early, and the store compares ``next_attempt_at <= now``)."""


class DueRows:
    """A bounded min-heap of wall-clock due times and one ``call_at`` timer at its head."""

    def __init__(self, wake: Callable[[], None], limit: int = MAX_DUE) -> None:
        self._wake = wake
        self._limit = limit
        self._due: list[float] = []
        self._timer: asyncio.TimerHandle | None = None
        self._armed_for: float | None = None

    def __len__(self) -> int:
        return len(self._due)

    @property
    def next_due(self) -> float | None:
        """The earliest due time still waiting for a claim (wall clock), if any."""
        return self._due[0] if self._due else None

    def add(self, when: float) -> None:
        """A row is claimable from ``when`` (``time.time()`` scale): wake the worker then."""
        if len(self._due) >= self._limit and when >= self._due[0]:
            return  # full: the poll finds it (the head, the next to fire, is never dropped)
        heapq.heappush(self._due, when)
        self._arm()

    def claimed(self, started: float) -> None:
        """A claim that began at ``started`` took every row due by then: forget those times and
        stand the timer at the next one. Only after a claim that really asked the store, so a
        worker with no room does not spin on a due time it cannot act on."""
        while self._due and self._due[0] <= started:
            heapq.heappop(self._due)
        self._arm()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._armed_for = None, None

    def _arm(self) -> None:
        if not self._due:
            self.cancel()
            return
        head = self._due[0]
        if self._armed_for == head and self._timer is not None and not self._timer.cancelled():
            return
        self.cancel()
        loop = asyncio.get_running_loop()
        delay = max(0.0, head - time.time()) + MARGIN
        self._timer = loop.call_at(loop.time() + delay, self._fire)
        self._armed_for = head

    def _fire(self) -> None:
        self._timer, self._armed_for = None, None
        self._wake()
