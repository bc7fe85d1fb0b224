"""Connections a stranger can open are bounded: a header deadline and a connection cap.

uvicorn times out an idle keep-alive connection but not one that never finishes its
request headers (slowloris), and its ``limit_concurrency`` answers 503 only once the
headers are complete, so 1,100 half-sent requests took every descriptor and the
gateway accepted nothing. This wraps uvicorn's own HTTP protocol (whichever it
picked) at the asyncio seam, below the ASGI app:

- a connection must complete its request headers within ``header_timeout``, from its
  first byte of a request (or from its accept); otherwise it is answered 408 and closed;
- at ``max_connections`` (HTTP and WebSocket together), a new connection takes the
  place of the one that has waited longest for its headers (a real client sends
  its headers at once, so the slow ones go first); with none such, it is answered 503.

A WebSocket upgrade leaves the guard: uvicorn moves the transport to its WebSocket
protocol, which has its own ping timeout.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

log = logging.getLogger(__name__)

_REFUSED = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 12\r\n\r\nserver busy\n"
_TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int
    header_timeout: float


class _Guard:
    """What all connections of one server share: who is waiting for headers, oldest first."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.waiting: dict[_GuardedHttp, None] = {}
        self.evicted = 0
        self.refused = 0


class _GuardedHttp(asyncio.Protocol):
    """uvicorn's HTTP protocol, with the header deadline and the cap applied around it."""

    _guard: _Guard

    def __init__(self, **uvicorn_args: Any) -> None:
        self._inner: asyncio.Protocol = AutoHTTPProtocol(**uvicorn_args)
        self._connections: set[object] = uvicorn_args["server_state"].connections
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._started = False

    # -- the cap
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if len(self._connections) >= self._guard.limits.max_connections and not self._evict_one():
            self._guard.refused += 1
            log.debug("refused a connection: %d open (http.max_connections)", len(self._connections))
            transport.write(_REFUSED)
            transport.close()
            return
        self._started = True
        self._inner.connection_made(transport)
        self._await_headers()

    def _evict_one(self) -> bool:
        victim = next(iter(self._guard.waiting), None)
        if victim is None:
            return False
        self._guard.evicted += 1
        victim._expire()
        return True

    # -- the header deadline
    def _await_headers(self) -> None:
        if self._deadline is None:
            self._deadline = self._loop.call_later(self._guard.limits.header_timeout, self._expire)
            self._guard.waiting[self] = None

    def _headers_done(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._guard.waiting.pop(self, None)

    def _expire(self) -> None:
        self._headers_done()
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(_TIMED_OUT)
            self._transport.close()

    def _in_request(self) -> bool:
        """Headers complete and the response not yet finished (uvicorn's h11 and httptools
        protocols both keep the current request/response cycle as ``cycle``)."""
        cycle = getattr(self._inner, "cycle", None)
        return cycle is not None and not getattr(cycle, "response_complete", True)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)
        assert self._transport is not None
        if self._transport.get_protocol() is not self or self._in_request():
            self._headers_done()  # upgraded to a WebSocket, or a request is being served
        elif not self._transport.is_closing():
            self._await_headers()  # bytes of a request whose headers are not all here yet

    # -- the rest goes straight to uvicorn
    def connection_lost(self, exc: Exception | None) -> None:
        self._headers_done()
        if self._started:
            self._inner.connection_lost(exc)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._started else None

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


def guarded_http(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """The ``http`` protocol class for ``uvicorn.Config``: one guard per server."""

    class GuardedHttp(_GuardedHttp):
        _guard = _Guard(limits)

    return GuardedHttp


class AcceptErrorThrottle:
    """Loop exception handler: "socket.accept() out of system resource" at most once a period.

    At the descriptor limit asyncio reports every failed ``accept()`` (one per pending
    connection, each retry): ~15,000 lines a second. This keeps one line per period
    with the count of the ones it left out; every other report goes to the default.
    """

    MESSAGE = "socket.accept() out of system resource"

    def __init__(self, period: float = 10.0) -> None:
        self.period = period
        self._last = -float("inf")
        self.suppressed = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != self.MESSAGE:
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - self._last < self.period:
            self.suppressed += 1
            return
        self._last = now
        log.error(
            "cannot accept connections: out of file descriptors (%s); %d more like this in the last"
            " %.0fs were not logged; lower http.max_connections or raise LimitNOFILE",
            context.get("exception"),
            self.suppressed,
            self.period,
        )
        self.suppressed = 0
