"""uvicorn serving the gateway's ASGI app on the socket the gateway bound.

``Gateway.start`` imports this module in a thread once the platforms poll: uvicorn,
starlette and the web chat are a large share of the start's imports, and a
restart's first ``getUpdates`` need not wait for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Iterator

import uvicorn
from starlette.routing import BaseRoute, Mount, WebSocketRoute
from starlette.types import ASGIApp

from chatgate.app.config.model import HttpConfig
from chatgate.app.http.budget import Budget, ConnectionLimits, networks
from chatgate.app.http.edge import Edge
from chatgate.app.http.guard import guarded_http

TICK_SECONDS = 1.0


class HttpServer(uvicorn.Server):
    """uvicorn without its own signal handling (the gateway owns shutdown), ticking once a
    second instead of ten times: an idle gateway's every wakeup costs CPU, and the tick only
    refreshes the ``Date`` header (to the second) and looks for ``should_exit``, which
    ``request_exit`` now signals at once."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._exit = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def request_exit(self) -> None:
        self.should_exit = True
        self._exit.set()

    async def main_loop(self) -> None:
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 10) % 864000  # uvicorn's own tick counts tenths: a date each time
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exit.wait(), TICK_SECONDS)


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
