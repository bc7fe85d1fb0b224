"""uvicorn serving the gateway's ASGI app on the socket the gateway bound.

``Gateway.start`` imports this module in a thread once the platforms poll: uvicorn,
starlette and the web chat are a large share of the start's imports, and a
restart's first ``getUpdates`` need not wait for them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp

from chatgate.app.config.model import HttpConfig
from chatgate.app.http.guard import ConnectionLimits, guarded_http


class HttpServer(uvicorn.Server):
    """uvicorn without its own signal handling: the gateway owns shutdown."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def http_server(app: ASGIApp, http: HttpConfig) -> HttpServer:
    config = uvicorn.Config(
        app,
        log_config=None,
        lifespan="off",
        ws_max_size=4 * 1024 * 1024,
        ws_ping_interval=20.0,
        http=guarded_http(ConnectionLimits(http.max_connections, http.header_timeout_seconds)),
        timeout_keep_alive=http.keep_alive_seconds,
    )
    return HttpServer(config)
