"""Sign-in attempts per client address: a sliding window per address, bounded in memory.

A stranger can make us hold one small entry per address they use, and no more than
``max_clients`` of them: beyond that the least recently seen address is forgotten (it may
then try again early, which costs it nothing it could not get from a new address anyway).
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable


class SignInAttempts:
    def __init__(
        self,
        per_minute: int,
        *,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_minute = per_minute
        self.max_clients = max_clients
        self._clock = clock
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()

    def admit(self, client: str) -> float | None:
        """Count an attempt from ``client``; None when it may go on, else seconds to wait."""
        now = self._clock()
        window = self._seen.pop(client, None) or deque()
        while window and window[0] <= now - 60.0:
            window.popleft()
        self._seen[client] = window
        if len(window) >= self.per_minute:
            return max(0.0, window[0] + 60.0 - now)
        window.append(now)
        while len(self._seen) > self.max_clients:
            self._seen.popitem(last=False)
        return None

    def __len__(self) -> int:
        return len(self._seen)
