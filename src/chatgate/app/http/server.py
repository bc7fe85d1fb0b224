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
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from chatgate.app.config.model import HttpConfig
from chatgate.app.http.guard import ConnectionLimits, guarded_http


class HttpServer(uvicorn.Server):
    """uvicorn without its own signal handling: the gateway owns shutdown."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def http_server(app: ASGIApp, http: HttpConfig) -> HttpServer:
    if http.trusted_proxies:  # the client and scheme a trusted proxy forwarded; nobody else's
        app = ProxyHeadersMiddleware(app, trusted_hosts=list(http.trusted_proxies))  # type: ignore[arg-type,assignment]
    config = uvicorn.Config(
        app,
        log_config=None,
        lifespan="off",
        proxy_headers=False,  # uvicorn's default believes X-Forwarded-For from 127.0.0.1
        ws_max_size=4 * 1024 * 1024,
        ws_ping_interval=20.0,
        http=guarded_http(ConnectionLimits(http.max_connections, http.header_timeout_seconds)),
        timeout_keep_alive=http.keep_alive_seconds,
    )
    return HttpServer(config)
