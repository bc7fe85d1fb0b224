"""Who holds the server's connections, and who gives one up when someone new arrives.

Every connection starts unauthenticated and stays so until the app vouches for it (a web
chat hello with the right token, a session cookie, an API key, a signed delivery). The
unauthenticated ones have a budget of their own, ``max_unauthenticated``. When a newcomer
finds it full (or ``max_connections`` reached), the address holding the most of them gives
up its oldest connection that is only waiting (for headers, a body, a hello): a stranger's
flood pushes out its own connections first, and a probe, a user or an API client arriving
always gets a place. Authenticated connections are never pushed out.

One address may hold at most ``max_unauthenticated_per_address`` of them: past that share,
its newcomer takes the place of its own oldest waiting connection that has waited at least
``SETTLED`` seconds (a client opening many connections at once is not pushed out by its own
burst before a single request could arrive; the budget still bounds the burst). A trusted
proxy's connections have no such share: its clients are many.

Issue 27 (findings 5, 6): 1,000 idle WebSockets, or 60 bodies sent a byte a second, held
every slot for a minute and more; everyone else got 503.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable, Iterable
from typing import Protocol

import msgspec

from chatgate.domain.log_budget import LogBudget

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
SETTLED = 1.0
"""Seconds a connection must have waited before its own address's newcomer may push it out."""


class ConnectionLimits(msgspec.Struct, frozen=True):
    max_connections: int
    header_timeout: float
    max_unauthenticated: int | None = None
    """None: ``max_connections`` (no budget of its own; the per-address cap still applies)."""
    max_unauthenticated_per_address: int | None = None
    body_timeout: float = 5.0
    """Seconds a request body may take before ``min_body_rate`` applies to it."""
    min_body_rate: float = 1024.0
    """Bytes a second a body must average after ``body_timeout``, or it is cut off (408)."""
    trusted_proxies: tuple[Network, ...] = ()


class Holder(Protocol):
    """A connection as the budget sees it (the guard's protocol object)."""

    address: str
    trusted: bool

    def waiting(self) -> bool:
        """Only waiting for the client (headers, a body, a hello): it may be pushed out."""
        ...

    def push_out(self) -> None:
        """Close it now, telling the client why if the protocol allows."""
        ...

    def vouch(self) -> None:
        """Its client proved who it is (the app's word, through the ASGI scope)."""
        ...

    def linger(self, seconds: float) -> None:
        """Close it in ``seconds`` if it is still open (the app is done with it)."""
        ...


def networks(values: Iterable[str]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(v, strict=False) for v in values)


class Budget:
    """The connections of one server: all of them, the unauthenticated ones, and those per address."""

    def __init__(self, limits: ConnectionLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.open = 0
        """Connections admitted and not yet released (pushed out or closed)."""
        self.unauthenticated: dict[Holder, float] = {}
        """Each with when it was admitted, oldest first."""
        self.by_address: dict[str, dict[Holder, float]] = {}
        self.by_peer: dict[tuple[str, int], Holder] = {}
        """By the client's (host, port): how the app's vouching finds its connection."""
        self.pushed_out = 0
        self.refused = 0
        self._proxies = limits.trusted_proxies
        self._clock = clock
        self.lines = LogBudget(logging.getLogger("chatgate.app.http.guard"))
        """What strangers cause here (refusals, push-outs, cut bodies) is logged within a budget."""

    @property
    def max_unauthenticated(self) -> int:
        return self.limits.max_unauthenticated or self.limits.max_connections

    def admit(self, holder: Holder, peer: tuple[str, int] | None) -> bool:
        """Make room for a new (unauthenticated) connection; False when there is none to make."""
        now = self._clock()
        if self.open >= self.limits.max_connections and not self._make_room():
            return self._refuse()
        cap = self.limits.max_unauthenticated_per_address
        mine = self.by_address.get(holder.address)
        if cap is not None and mine is not None and len(mine) >= cap and not self._proxy(holder.address):
            self._push_out_of(mine, settled_before=now - SETTLED)  # none settled: the budget bounds it
        if len(self.unauthenticated) >= self.max_unauthenticated and not self._make_room():
            return self._refuse()
        self.open += 1
        self.unauthenticated[holder] = now
        self.by_address.setdefault(holder.address, {})[holder] = now
        if peer is not None:
            self.by_peer[peer] = holder
        return True

    def vouch(self, holder: Holder) -> None:
        """The app says this connection's client proved who it is: it leaves the budget."""
        if holder.trusted or holder not in self.unauthenticated:
            return
        holder.trusted = True
        self._forget(holder)

    def release(self, holder: Holder, peer: tuple[str, int] | None) -> bool:
        """The connection is gone (or being closed): free its place. True the first time."""
        if peer is not None and self.by_peer.get(peer) is holder:
            del self.by_peer[peer]
        known = holder in self.unauthenticated or holder.trusted
        self._forget(holder)
        if known:
            holder.trusted = False
            self.open -= 1
        return known

    def _forget(self, holder: Holder) -> None:
        self.unauthenticated.pop(holder, None)
        mine = self.by_address.get(holder.address)
        if mine is not None:
            mine.pop(holder, None)
            if not mine:
                del self.by_address[holder.address]

    def _make_room(self) -> bool:
        """Push out the oldest waiting connection of the address holding the most; False if none waits."""
        for pool in sorted(self.by_address.values(), key=len, reverse=True):
            if self._push_out_of(pool):
                return True
        return False

    def _push_out_of(self, pool: dict[Holder, float], settled_before: float | None = None) -> bool:
        """Close the oldest connection of ``pool`` that is only waiting; False if none is."""
        victim = next(
            (
                h
                for h, since in pool.items()
                if h.waiting() and (settled_before is None or since <= settled_before)
            ),
            None,
        )
        if victim is None:
            return False
        self.pushed_out += 1
        victim.push_out()  # releases it (the guard's push_out calls release)
        return True

    def _refuse(self) -> bool:
        self.refused += 1
        return False

    def _proxy(self, address: str) -> bool:
        if not self._proxies:
            return False
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self._proxies)
