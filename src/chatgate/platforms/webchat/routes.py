"""The web chat's page at ``/`` and its socket at ``/ws``, with the page's assets."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket

from chatgate.domain.log_budget import LogBudget
from chatgate.platforms.kit.origins import origin_allowed
from chatgate.platforms.webchat.adapter import WebChatAdapter
from chatgate.platforms.webchat.pages import PAGE_HEADERS, chat_page
from chatgate.platforms.webchat.session_gate import Refusal

log = logging.getLogger(__name__)


def page_routes(
    web: WebChatAdapter, allowed_origins: frozenset[str], loopback_bind: bool, agent_name: str = ""
) -> list[BaseRoute]:
    page = chat_page(web.auth, agent_name)
    refusals = LogBudget(log)
    """Refused cross-origin sockets: any page may try, so their lines are budgeted."""

    async def index(request: Request) -> Response:
        if web.gate is not None and isinstance(await web.gate.signed_in(request), Refusal):
            return RedirectResponse("/signin", status_code=303)
        return HTMLResponse(page, headers=PAGE_HEADERS)

    async def favicon(request: Request) -> Response:
        return RedirectResponse("/static/favicon.svg", status_code=301)

    async def ws_endpoint(ws: WebSocket) -> None:
        if not origin_allowed(ws, allowed_origins, loopback_bind):
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
