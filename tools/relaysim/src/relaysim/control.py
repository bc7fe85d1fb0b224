"""JSON control routes under ``/sim/``: the in-process test API, over HTTP, for loopback clients.

They let a person (or a test in another process) inject deliveries, read what
the gateway sent, and change the result policy of a running ``chatgate-relay-sim``.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from chatgate.app.netaddr import is_loopback
from relaysim.buffer import BufferUnavailable
from relaysim.state import RESULT_MODES

if TYPE_CHECKING:
    from relaysim.server import RelaySimulator

log = logging.getLogger(__name__)
Handler = Callable[[Request], Awaitable[Response]]


class BadRequest(Exception):
    """A control request the simulator cannot act on; answered 400 with the reason."""


class _ControlApi:
    """The simulator's JSON control API: one method per route."""

    def __init__(self, sim: RelaySimulator) -> None:
        self.sim = sim

    def guarded(self, handler: Handler) -> Handler:
        async def run(request: Request) -> Response:
            client = request.client.host if request.client else None
            if not self.sim.allow_remote_control and not is_loopback(client):
                log.warning("control request from %s refused: loopback only", client)
                return JSONResponse({"error": "the control API answers loopback clients only"}, 403)
            try:
                return await handler(request)
            except BadRequest as exc:
                log.warning("control request refused: %s", exc, extra={"path": request.url.path})
                return JSONResponse({"error": str(exc)}, status_code=400)
            except BufferUnavailable as exc:
                log.error("control request failed: %s", exc, extra={"path": request.url.path})
                return JSONResponse({"error": str(exc)}, status_code=503)

        return run

    async def inbound(self, request: Request) -> Response:
        body = await _json(request)
        event = body.get("event")
        if not isinstance(event, dict):
            raise BadRequest("event must be a JSON object")
        buffer_id = await self.sim.inject_inbound(_gateway(body), event)
        return JSONResponse({"bufferId": buffer_id})

    async def passthrough(self, request: Request) -> Response:
        body = await _json(request)
        raw = _passthrough_body(body)
        platform = body.get("platform", "discord")
        bot_id = body.get("botId")
        if not isinstance(platform, str) or (bot_id is not None and not isinstance(bot_id, str)):
            raise BadRequest("platform and botId must be strings")
        buffer_id = await self.sim.inject_passthrough(_gateway(body), raw, platform=platform, bot_id=bot_id)
        return JSONResponse({"bufferId": buffer_id})

    async def ops(self, request: Request) -> Response:
        gateway_id = _gateway(dict(request.query_params))
        return JSONResponse({"ops": [op.to_json() for op in self.sim.ops(gateway_id)]})

    async def messages(self, request: Request) -> Response:
        gateway_id = _gateway(dict(request.query_params))
        return JSONResponse({"messages": [m.to_json() for m in self.sim.messages(gateway_id)]})

    async def unacked(self, request: Request) -> Response:
        return JSONResponse({"unacked": self.sim.unacked(_gateway(dict(request.query_params)))})

    async def revoke(self, request: Request) -> Response:
        gateway_id = _gateway(await _json(request))
        self.sim.revoke(gateway_id)
        return JSONResponse({"revoked": gateway_id})

    async def results(self, request: Request) -> Response:
        body = await _json(request)
        mode, delay = body.get("mode"), body.get("delay", 0)
        if mode not in RESULT_MODES:
            raise BadRequest(f"mode must be one of {', '.join(RESULT_MODES)}")
        if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
            raise BadRequest("delay must be a non-negative number of seconds")
        self.sim.set_result_policy(_gateway(body), mode, float(delay))
        return JSONResponse({"mode": mode, "delay": float(delay)})

    async def interrupt(self, request: Request) -> Response:
        body = await _json(request)
        key, chat_id = body.get("session_key"), body.get("chat_id")
        if not isinstance(key, str) or not isinstance(chat_id, str):
            raise BadRequest("session_key and chat_id must be strings")
        return JSONResponse({"sent": await self.sim.send_interrupt(_gateway(body), key, chat_id)})

    async def drop(self, request: Request) -> Response:
        return JSONResponse({"dropped": await self.sim.drop_connection(_gateway(await _json(request)))})

    async def status(self, request: Request) -> Response:
        gateways = {
            gw: {
                "connected": self.sim.connected(gw),
                "idle": self.sim.idle(gw),
                "unacked": self.sim.unacked(gw),
                "counters": self.sim.counters(gw).to_json(),
                "hellos": [asdict(h) for h in self.sim.hellos(gw)],
            }
            for gw in self.sim.gateway_ids()
        }
        return JSONResponse(
            {"relay_url": self.sim.relay_url, "gateways": gateways, "totals": self.sim.counters().to_json()}
        )

    def routes(self) -> list[BaseRoute]:
        table: list[tuple[str, Handler, str]] = [
            ("/sim/inbound", self.inbound, "POST"),
            ("/sim/passthrough", self.passthrough, "POST"),
            ("/sim/ops", self.ops, "GET"),
            ("/sim/messages", self.messages, "GET"),
            ("/sim/unacked", self.unacked, "GET"),
            ("/sim/revoke", self.revoke, "POST"),
            ("/sim/results", self.results, "POST"),
            ("/sim/interrupt", self.interrupt, "POST"),
            ("/sim/drop", self.drop, "POST"),
            ("/sim/status", self.status, "GET"),
        ]
        return [Route(path, self.guarded(handler), methods=[method]) for path, handler, method in table]


def control_routes(sim: RelaySimulator) -> list[BaseRoute]:
    return _ControlApi(sim).routes()


async def _json(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body())
    except (ValueError, RecursionError):
        raise BadRequest("the request body must be a JSON object") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


def _gateway(body: dict[str, Any]) -> str:
    gateway_id = body.get("gateway_id")
    if not isinstance(gateway_id, str) or not gateway_id:
        raise BadRequest("gateway_id is required")
    return gateway_id


def _passthrough_body(body: dict[str, Any]) -> bytes:
    """``bodyB64`` (the exact bytes) or ``body`` (a JSON object, serialized compactly)."""
    if "bodyB64" in body:
        encoded = body["bodyB64"]
        if not isinstance(encoded, str):
            raise BadRequest("bodyB64 must be a base64 string")
        try:
            return base64.b64decode(encoded, validate=True)
        except binascii.Error:
            raise BadRequest("bodyB64 is not valid base64") from None
    if isinstance(body.get("body"), dict):
        return json.dumps(body["body"], separators=(",", ":"), ensure_ascii=False).encode()
    raise BadRequest("give bodyB64 (base64 of the raw body) or body (a JSON object)")
