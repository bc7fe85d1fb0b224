"""The one ASGI app: health, status and metrics, webhooks, and the routes the platforms bring."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from chatgate.app.http.hooks import hook_routes
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.log_budget import LogBudget
from chatgate.domain.store_roles import Inbox
from chatgate.engine.metrics import GatewayMetrics
from chatgate.engine.webhooks import Webhooks
from chatgate.platforms.kit.origins import is_loopback, names_this_host, origin_allowed

log = logging.getLogger(__name__)


ReadyCheck = Callable[[], Awaitable[list[str]]]
StatusReport = Callable[[], Awaitable[dict[str, Any]]]


def _is_local(request: Request) -> bool:
    """Loopback, or a connection from this host to one of its own addresses."""
    host = (request.client.host if request.client else "").removeprefix("::ffff:")
    server = request.scope.get("server")
    own = str(server[0]).removeprefix("::ffff:") if server else None
    return is_loopback(host) or (bool(host) and host == own)


def build_app(
    store: Inbox,
    metrics: GatewayMetrics,
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
    """Refused /status requests: anyone may send them, so their lines are budgeted."""

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
        if not names_this_host(request, allowed_origins) or not origin_allowed(
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
            *routes,
            *hook_routes(hooks),
        ]
    )
