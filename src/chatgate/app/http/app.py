"""The one ASGI app: the web chat page and socket, health and metrics, and the platforms' own routes."""

from __future__ import annotations

import contextlib
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket

from chatgate.app.http.hooks import hook_routes
from chatgate.app.netaddr import hostname, is_loopback
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.log_budget import LogBudget
from chatgate.domain.store_roles import Inbox
from chatgate.engine.metrics import GatewayMetrics
from chatgate.engine.webhooks import Webhooks
from chatgate.platforms.webchat.adapter import WebChatAdapter
from chatgate.platforms.webchat.pages import PAGE_HEADERS, chat_page
from chatgate.platforms.webchat.session_gate import Refusal

log = logging.getLogger(__name__)


ReadyCheck = Callable[[], Awaitable[list[str]]]
StatusReport = Callable[[], Awaitable[dict[str, Any]]]


def _is_local(request: Request) -> bool:
    """Loopback, or a connection from this host to one of its own addresses."""
    host = (request.client.host if request.client else "").removeprefix("::ffff:")
    server = request.scope.get("server")
    own = str(server[0]).removeprefix("::ffff:") if server else None
    return is_loopback(host) or (bool(host) and host == own)


def _names_this_host(request: HTTPConnection, allowed: frozenset[str]) -> bool:
    """The ``Host`` asked for is a loopback name, an IP literal, or an allowed origin's host.

    A DNS-rebinding page (a name of the attacker's that resolves to this machine) always
    asks for a name of the attacker's; an operator's ``curl`` asks for an address or
    ``localhost``.
    """
    host = hostname(request.headers.get("host", ""))
    if is_loopback(host) or host in {hostname(urlsplit(o).netloc) for o in allowed}:
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _origin_allowed(ws: HTTPConnection, allowed: frozenset[str], loopback_bind: bool) -> bool:
    """Refuse cross-site WebSockets: a page elsewhere must not drive this gateway (and its tools).

    Browsers always send ``Origin`` on a WebSocket; other clients usually send none, and
    a client that can set headers can reach the port anyway. Same-origin means the
    ``Host`` the browser asked for; on a loopback bind that host must itself be a
    loopback name, or DNS rebinding (a name of the attacker's that resolves to
    127.0.0.1) would pass as same-origin.
    """
    origin = ws.headers.get("origin")
    if origin is None or origin.rstrip("/") in allowed:
        return True
    host = ws.headers.get("host", "").lower()
    parsed = urlsplit(origin)
    if not parsed.netloc or parsed.netloc.lower() != host:
        return False
    return not loopback_bind or is_loopback(hostname(host))


def _web_chat_routes(
    web: WebChatAdapter | None, allowed_origins: frozenset[str], loopback_bind: bool
) -> list[BaseRoute]:
    """The page at ``/`` and its socket at ``/ws`` (both say so when the web chat is disabled)."""
    page = chat_page(web.auth if web is not None else "none")
    refusals = LogBudget(log)

    async def index(request: Request) -> Response:
        if web is None:
            return Response("the web chat is disabled (platforms.web.enabled: false)\n", status_code=404)
        if web.gate is not None and isinstance(await web.gate.signed_in(request), Refusal):
            return RedirectResponse("/signin", status_code=303)
        return HTMLResponse(page, headers=PAGE_HEADERS)

    async def favicon(request: Request) -> Response:
        return RedirectResponse("/static/favicon.svg", status_code=301)

    async def ws_endpoint(ws: WebSocket) -> None:
        if web is None:
            await ws.close(code=1008, reason="web chat disabled")
            return
        if not _origin_allowed(ws, allowed_origins, loopback_bind):
            refusals.warning(
                "cross-origin socket",
                "refused a cross-origin web chat connection from %s (platforms.web.allowed_origins)",
                str(ws.headers.get("origin"))[:200],
            )
            await ws.close(code=1008, reason="cross-origin connection refused")
            return
        await web.serve(ws)

    assets = StaticFiles(packages=[("chatgate.platforms.webchat", "static")])
    return [
        Route("/", index),
        Route("/favicon.ico", favicon),
        Mount("/static", assets, name="static"),
        WebSocketRoute("/ws", ws_endpoint),
    ]


def build_app(
    store: Inbox,
    metrics: GatewayMetrics,
    web: WebChatAdapter | None,
    *,
    ready: ReadyCheck | None = None,
    status: StatusReport | None = None,
    allowed_origins: frozenset[str] = frozenset(),
    loopback_bind: bool = True,
    refresh_gauges: Callable[[], None] = lambda: None,
    routes: Sequence[BaseRoute] = (),
    hooks: Webhooks | None = None,
) -> Starlette:
    refusals = LogBudget(log)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        reasons = await ready() if ready is not None else []
        if reasons:
            return JSONResponse({"status": "unavailable", "reasons": reasons}, status_code=503)
        return JSONResponse({"status": "ready"})

    async def status_endpoint(request: Request) -> Response:
        if not _is_local(request):
            return JSONResponse({"error": "status is only served to local clients"}, status_code=403)
        if not _names_this_host(request, allowed_origins) or not _origin_allowed(
            request, allowed_origins, loopback_bind
        ):
            refusals.warning(
                "status host",
                "refused /status for Host %r (DNS rebinding?); ask for 127.0.0.1 or localhost",
                str(request.headers.get("host"))[:200],
            )
            return JSONResponse(
                {"error": "status is only served under a loopback name or an IP address (Host header)"},
                status_code=403,
            )
        return JSONResponse(await status() if status is not None else {"running": True})

    async def metrics_endpoint(request: Request) -> Response:
        # On an outage the gauge keeps its last known value.
        with contextlib.suppress(StoreUnavailable):
            metrics.queue_depth.set(await store.queue_depth())
        refresh_gauges()
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/status", status_endpoint),
            Route("/metrics", metrics_endpoint),
            *_web_chat_routes(web, allowed_origins, loopback_bind),
            *routes,
            *hook_routes(hooks),
        ]
    )
