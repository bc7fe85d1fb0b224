"""Connections a stranger can open are bounded: deadlines on headers and bodies, and a budget.

uvicorn times out an idle keep-alive connection but not one that never finishes its
request headers (slowloris) nor one whose body never finishes, and its
``limit_concurrency`` answers 503 only once the headers are complete, so 1,100 half-sent
requests took every descriptor, and 60 bodies sent a byte a second, or 1,000 WebSockets
that never said hello, held every slot (issue 27). This wraps uvicorn's own HTTP protocol
(whichever it picked) at the asyncio seam, below the ASGI app:

- a connection must complete its request headers within ``header_timeout``, from its
  first byte of a request (or from its accept); otherwise it is answered 408 and closed;
- a request body must arrive at ``min_body_rate`` bytes a second on average once
  ``body_timeout`` has passed since its headers; otherwise it is answered 408 and closed;
- every connection is admitted by the ``Budget`` (``budget.py``): unauthenticated ones
  have a budget of their own with a per-address cap, and a newcomer takes the place of
  the oldest one that is only waiting; with nothing to push out, it is answered 503.

A WebSocket upgrade stays in the guard's sight: uvicorn moves the transport to its
WebSocket protocol, and a thin wrapper around that protocol tells the budget when the
socket closes. Its deadline for a hello is the web chat's (``auth_timeout``), which can
close it with a reason the page understands.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

from chatgate.app.http.budget import Budget, ConnectionLimits

log = logging.getLogger(__name__)

_REFUSED = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 12\r\n\r\nserver busy\n"
_TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"

__all__ = ["AcceptErrorThrottle", "ConnectionLimits", "guarded_http"]


class _GuardedHttp(asyncio.Protocol):
    """uvicorn's HTTP protocol, with the deadlines and the budget applied around it."""

    _budget: Budget

    def __init__(self, **uvicorn_args: Any) -> None:
        self._inner: asyncio.Protocol = AutoHTTPProtocol(**uvicorn_args)
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._started = False
        self._upgraded = False
        self._peer: tuple[str, int] | None = None
        self.address = ""
        self.trusted = False
        self._body_of: object | None = None
        """The request (uvicorn's cycle) whose body is being watched, its start and bytes so far."""
        self._body_start = 0.0
        self._body_bytes = 0
        self._body_timer: asyncio.TimerHandle | None = None

    @property
    def limits(self) -> ConnectionLimits:
        return self._budget.limits

    # -- the budget
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self._peer = (str(peer[0]), int(peer[1]))
            self.address = self._peer[0]
        if not self._budget.admit(self, self._peer):
            self._budget.lines.info(
                "http: refused",
                "refused a connection from %s: %d open, none waiting to push out (http.max_connections,"
                " http.max_unauthenticated)",
                self.address,
                self._budget.open,
            )
            transport.write(_REFUSED)
            transport.close()
            return
        self._started = True
        self._inner.connection_made(transport)
        self._await_headers()

    def vouch(self) -> None:
        """The app's word that this connection's client proved who it is (``platforms.kit.trust``)."""
        self._budget.vouch(self)

    def linger(self, seconds: float) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._loop.call_later(seconds, self._close, False)

    def waiting(self) -> bool:
        """Idle, sending its headers, sending its body, or a WebSocket: nothing is being served."""
        if self._upgraded:
            return True
        cycle = getattr(self._inner, "cycle", None)
        if cycle is None or getattr(cycle, "response_complete", True):
            return True
        return bool(getattr(cycle, "more_body", False)) and not getattr(cycle, "response_started", False)

    def push_out(self) -> None:
        self._budget.lines.info(
            "http: pushed out",
            "closed a waiting unauthenticated connection from %s to make room for a new one"
            " (http.max_unauthenticated, http.max_unauthenticated_per_address)",
            self.address,
        )
        self._close(answer=not self._upgraded)

    def _close(self, answer: bool) -> None:
        """Close now (with a 408 when nothing has been answered yet) and free the place at once."""
        self._headers_done()
        self._stop_body_watch()
        self._budget.release(self, self._peer)
        transport = self._transport
        if transport is not None and not transport.is_closing():
            cycle = getattr(self._inner, "cycle", None)
            answering = self._in_request() and getattr(cycle, "response_started", False)
            if answer and not answering:  # (an answer already begun cannot be followed by a 408)
                transport.write(_TIMED_OUT)
            transport.close()

    # -- the header deadline
    def _await_headers(self) -> None:
        if self._deadline is None:
            self._deadline = self._loop.call_later(self.limits.header_timeout, self._close, True)

    def _headers_done(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _in_request(self) -> bool:
        """Headers complete and the response not yet finished (uvicorn's h11 and httptools
        protocols both keep the current request/response cycle as ``cycle``)."""
        cycle = getattr(self._inner, "cycle", None)
        return cycle is not None and not getattr(cycle, "response_complete", True)

    # -- the body's rate
    def _watch_body(self, received: int) -> None:
        cycle = getattr(self._inner, "cycle", None)
        if cycle is None or not getattr(cycle, "more_body", False):
            self._stop_body_watch()
            return
        if self._body_of is not cycle:
            self._stop_body_watch()
            self._body_of, self._body_start, self._body_bytes = cycle, self._loop.time(), 0
            self._body_timer = self._loop.call_later(self.limits.body_timeout, self._check_body)
        self._body_bytes += received

    def _stop_body_watch(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        self._body_of = None

    def _check_body(self) -> None:
        self._body_timer = None
        cycle = getattr(self._inner, "cycle", None)
        if cycle is not self._body_of or cycle is None or not getattr(cycle, "more_body", False):
            self._body_of = None
            return
        due = self._body_start + self.limits.body_timeout + self._body_bytes / self.limits.min_body_rate
        now = self._loop.time()
        flow = getattr(self._inner, "flow", None)
        if getattr(flow, "read_paused", False):
            # We stopped reading (the app has not read what came yet): not the client's fault.
            # Its clock starts again from here, on schedule.
            self._body_start = now - self._body_bytes / self.limits.min_body_rate
            due = now + self.limits.body_timeout
        if now < due:
            self._body_timer = self._loop.call_later(due - now, self._check_body)
            return
        scope = getattr(cycle, "scope", {})
        self._budget.lines.info(
            "http: slow body",
            "cut off a request body arriving slower than %.0f bytes/s (%s %s from %s; %d bytes in %.0f s)",
            self.limits.min_body_rate,
            scope.get("method", "?"),
            str(scope.get("path", "?"))[:100],
            self.address,
            self._body_bytes,
            now - self._body_start,
        )
        self._close(answer=True)

    # -- the data
    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)
        transport = self._transport
        assert transport is not None
        if transport.get_protocol() is not self:
            self._on_upgrade(transport)
        elif self._in_request():
            self._headers_done()  # a request is being served (and its body perhaps read)
            self._watch_body(len(data))
        elif not transport.is_closing():
            self._await_headers()  # bytes of a request whose headers are not all here yet

    def _on_upgrade(self, transport: asyncio.Transport) -> None:
        """A WebSocket now: watch it through a wrapper, so its close frees its place."""
        self._headers_done()
        self._stop_body_watch()
        if not self._upgraded:
            self._upgraded = True
            transport.set_protocol(_WebSocketTail(transport.get_protocol(), self))

    # -- the rest goes straight to uvicorn
    def connection_lost(self, exc: Exception | None) -> None:
        self._headers_done()
        self._stop_body_watch()
        if self._started:
            self._budget.release(self, self._peer)
            self._inner.connection_lost(exc)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._started else None

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class _WebSocketTail(asyncio.Protocol):
    """uvicorn's WebSocket protocol, forwarded to as is; its close releases the connection."""

    def __init__(self, inner: asyncio.BaseProtocol, guard: _GuardedHttp) -> None:
        assert isinstance(inner, asyncio.Protocol)
        self._inner = inner
        self._guard = guard

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard._budget.release(self._guard, self._guard._peer)
        self._inner.connection_lost(exc)


def guarded_http(budget: Budget) -> type[asyncio.Protocol]:
    """The ``http`` protocol class for ``uvicorn.Config``: one budget per server."""

    class GuardedHttp(_GuardedHttp):
        _budget = budget

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
