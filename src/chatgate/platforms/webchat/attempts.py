"""Sign-in attempts: a sliding minute per client address and per account, bounded in memory.

Per address alone was not enough: a client that could name its address (a forged
``X-Forwarded-For``, believed from loopback) or bind a fresh one (127.0.0.2, 127.0.0.3...,
or the 2^64 addresses of an IPv6 /64) got a fresh budget per guess (1,144 guesses a second,
issue 27). So an address is counted by its network where one host owns many (an IPv6 /64),
and every attempt also counts against the account it names, whatever address it came from.

A stranger can make us hold one small entry per key they use, and no more than
``max_clients`` of them. The two tables differ when full: an address table forgets the
least recently seen address (a new address costs an attacker nothing anyway), but an
account table never forgets an account still inside its minute (or a flood of made-up
names would reset the budget of the account under attack); a new name then waits until
the oldest entry's minute is over.
"""

from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Literal

WINDOW = 60.0


def address_key(host: str) -> str:
    """The unit one client controls: an IPv4 address, or the /64 of an IPv6 one."""
    try:
        ip = ipaddress.ip_address(host.removeprefix("::ffff:"))
    except ValueError:
        return host
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class SignInAttempts:
    def __init__(
        self,
        per_minute: int,
        *,
        max_clients: int = 10_000,
        when_full: Literal["forget", "refuse"] = "forget",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_minute = per_minute
        self.max_clients = max_clients
        self.when_full = when_full
        self._clock = clock
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()

    def admit(self, client: str) -> float | None:
        """Count an attempt for ``client``; None when it may go on, else seconds to wait."""
        now = self._clock()
        self._expire(now)
        window = self._seen.pop(client, None)
        if window is None:
            if len(self._seen) >= self.max_clients and self.when_full == "refuse":
                oldest = next(iter(self._seen.values()))
                return max(1.0, oldest[-1] + WINDOW - now)
            window = deque()
        while window and window[0] <= now - WINDOW:
            window.popleft()
        self._seen[client] = window
        if len(window) >= self.per_minute:
            return max(0.0, window[0] + WINDOW - now)
        window.append(now)
        while len(self._seen) > self.max_clients:
            self._seen.popitem(last=False)
        return None

    def _expire(self, now: float) -> None:
        """Forget the keys whose last attempt is a minute old (least recent first: cheap)."""
        while self._seen:
            key, window = next(iter(self._seen.items()))
            if window and window[-1] > now - WINDOW:
                return
            del self._seen[key]

    def __len__(self) -> int:
        return len(self._seen)
