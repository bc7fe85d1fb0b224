"""``POST /hooks/<route>``: the HTTP side of webhooks in (the rules are ``engine/webhooks.py``).

The body is read with its bound: a ``Content-Length`` over it is refused before reading, and
a body that streams past it is cut off there, so a sender cannot make the gateway hold more
than ``max_body_bytes`` per request.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from chatgate.engine.webhooks import HookRoute, Webhooks
from chatgate.platforms.kit.bodies import bounded_body
from chatgate.platforms.kit.trust import vouch


def hook_routes(hooks: Webhooks | None) -> list[BaseRoute]:
    async def receive(request: Request) -> Response:
        name = request.path_params["route"]
        route: HookRoute | None = hooks.routes.get(name) if hooks is not None else None
        if hooks is None or route is None:
            return JSONResponse(
                {"error": "no_route", "message": f"no webhook route {name!r}"}, status_code=404
            )
        body = await bounded_body(request, route.max_body_bytes)
        if body is None:
            kind, limit = f"webhook {name}: too_large", route.max_body_bytes
            hooks.refusals.warning(kind, "webhook %s: refused a body over %d bytes (413)", name, limit)
            message = f"the body is over {route.max_body_bytes} bytes (hooks.routes.{name}.max_body_bytes)"
            return JSONResponse({"error": "too_large", "message": message}, status_code=413)
        headers = {k.lower(): v for k, v in request.headers.items()}
        answer = await hooks.receive(route, headers, body)
        if answer.status < 400:
            vouch(request)  # a signed (or bearer) delivery: its sender's connection is no stranger's
        return JSONResponse(answer.body, status_code=answer.status)

    return [Route("/hooks/{route}", receive, methods=["POST"])]
