"""uvicorn serving the gateway's ASGI app on the socket the gateway bound.

``Gateway.start`` imports this module in a thread once the platforms poll: uvicorn,
starlette and the web chat are a large share of the start's imports, and a
restart's first ``getUpdates`` need not wait for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Iterator
from email.utils import formatdate

import uvicorn
from starlette.routing import BaseRoute, Mount, WebSocketRoute
from starlette.types import ASGIApp
from uvicorn.server import ServerState

from chatgate.app.config.model import HttpConfig
from chatgate.app.http.budget import Budget, ConnectionLimits, networks
from chatgate.app.http.edge import Edge
from chatgate.app.http.guard import guarded_http


class DatedOnAsk(ServerState):
    """uvicorn's state shared by its connections, whose ``Date`` header is made when an answer
    reads it (at most once a second) instead of by a tick of the server's loop."""

    def __init__(self, config: uvicorn.Config) -> None:
        self._config = config
        self._second = -1
        self._headers: list[tuple[bytes, bytes]] = []
        super().__init__()

    @property
    def default_headers(self) -> list[tuple[bytes, bytes]]:
        now = int(time.time())
        if now != self._second:
            date = [(b"date", formatdate(now, usegmt=True).encode())] if self._config.date_header else []
            self._headers, self._second = date + self._config.encoded_headers, now
        return self._headers

    @default_headers.setter
    def default_headers(self, value: list[tuple[bytes, bytes]]) -> None:
        """uvicorn assigns it (``ServerState()``, its tick); here it is made on reading instead."""


class HttpServer(uvicorn.Server):
    """uvicorn without its own signal handling (the gateway owns shutdown) and without its tick.

    uvicorn's main loop wakes ten times a second to refresh the ``Date`` header and look for
    ``should_exit``. An idle gateway's every wakeup costs CPU, and its probes come seconds
    apart: the date is made when an answer asks for it (``DatedOnAsk``), and the loop waits
    only for ``request_exit``."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.server_state = DatedOnAsk(config)
        self._exit = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def request_exit(self) -> None:
        self.should_exit = True
        self._exit.set()

    async def main_loop(self) -> None:
        await self._exit.wait()


def connection_budget(http: HttpConfig) -> Budget:
    return Budget(
        ConnectionLimits(
            max_connections=http.max_connections,
            header_timeout=http.header_timeout_seconds,
            max_unauthenticated=http.max_unauthenticated,
            max_unauthenticated_per_address=http.max_unauthenticated_per_address,
            body_timeout=http.body_timeout_seconds,
            min_body_rate=http.min_body_bytes_per_second,
            trusted_proxies=networks(http.trusted_proxies),
        )
    )


def has_websockets(routes: Iterable[BaseRoute]) -> bool:
    """Whether any route (in any ``Mount``) takes WebSocket connections."""
    return any(
        isinstance(r, WebSocketRoute) or (isinstance(r, Mount) and has_websockets(r.routes)) for r in routes
    )


class UpgradeRefused(logging.Filter):
    """uvicorn without a WebSocket protocol warns of each upgrade request, and tells the operator
    to install a WebSocket library: advice that is wrong here (none is needed) and a warning any
    stranger could write, and that would become ``/status``'s last error. Such a request is
    answered 404; its lines go to DEBUG."""

    LINES = ("Unsupported upgrade request.", "No supported WebSocket library detected.")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and str(record.msg).startswith(self.LINES):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


UPGRADE_REFUSED = UpgradeRefused()


def http_server(app: ASGIApp, http: HttpConfig, websockets: bool = True) -> HttpServer:
    """``websockets=False`` (no platform brought a WebSocket route) keeps uvicorn from importing
    its WebSocket protocol and the ``websockets`` library, about 1 MB; an upgrade request is
    then answered as plain HTTP (404), quietly (``UpgradeRefused``)."""
    if not websockets:
        logging.getLogger("uvicorn.error").addFilter(UPGRADE_REFUSED)  # once: the same instance
    budget = connection_budget(http)
    config = uvicorn.Config(
        Edge(app, budget, list(http.trusted_proxies)),
        log_config=None,
        lifespan="off",
        ws="auto" if websockets else "none",
        proxy_headers=False,  # uvicorn's default believes X-Forwarded-For from 127.0.0.1; Edge decides
        ws_max_size=4 * 1024 * 1024,
        ws_ping_interval=20.0,
        http=guarded_http(budget),
        timeout_keep_alive=http.keep_alive_seconds,
    )
    return HttpServer(config)
