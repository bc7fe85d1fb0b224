"""The API's routes on the gateway's one ASGI app; every failure is an OpenAI-shaped error."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match, Route

from chatgate.platforms.api import approvals, chat, outfiles, responses, shapes
from chatgate.platforms.api.adapter import ApiAdapter
from chatgate.platforms.api.errors import ApiError
from chatgate.platforms.api.openapi import openapi_document

log = logging.getLogger(__name__)
Handler = Callable[[ApiAdapter, Request], Awaitable[Response]]
_ANY_METHOD = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _guarded(adapter: ApiAdapter, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(adapter, request)
        except ApiError as exc:
            return exc.response(adapter.refusals)
        except Exception:
            log.exception("api request failed: %s %s", request.method, request.url.path)
            return ApiError(
                500, "internal_error", "the gateway failed on this request; see its log"
            ).response()

    return endpoint


async def _models(adapter: ApiAdapter, request: Request) -> Response:
    await adapter.authenticate(request)
    settings = adapter.settings
    return JSONResponse(shapes.model_list((settings.model, *settings.profiles), adapter.started))


def api_routes(adapter: ApiAdapter) -> list[BaseRoute]:
    document = openapi_document(adapter.settings.model, adapter.settings.profiles)
    adapter.started = int(time.time())

    async def openapi(request: Request) -> Response:
        return JSONResponse(document)

    def route(path: str, handler: Handler, method: str) -> Route:
        return Route(path, _guarded(adapter, handler), methods=[method])

    served = [
        Route("/openapi.json", openapi, methods=["GET"]),
        route("/v1/models", _models, "GET"),
        route("/v1/chat/completions", chat.create, "POST"),
        route("/v1/chat/completions/{completion_id}", chat.retrieve, "GET"),
        route("/v1/responses", responses.create, "POST"),
        route("/v1/responses/{response_id}", responses.retrieve, "GET"),
        route("/v1/approvals/{prompt_id}", approvals.answer, "POST"),
        route("/v1/files/{file_id}/content", outfiles.content, "GET"),
    ]
    return [*served, Route("/v1/{rest:path}", _unrouted(served, adapter), methods=list(_ANY_METHOD))]


def _unrouted(served: list[Route], adapter: ApiAdapter) -> Callable[[Request], Awaitable[Response]]:
    """The rest of ``/v1/``: an OpenAI-shaped 405 (with ``Allow``) for a served path, else 404."""

    async def endpoint(request: Request) -> Response:
        allowed = sorted(
            {m for r in served if r.matches(request.scope)[0] is Match.PARTIAL for m in r.methods or ()}
        )
        if allowed:
            error = ApiError(
                405, "method_not_allowed", f"{request.method} is not served here; use {', '.join(allowed)}"
            )
            response = error.response(adapter.refusals)
            response.headers["Allow"] = ", ".join(allowed)
            return response
        return ApiError(
            404, "unknown_endpoint", f"{request.url.path} is not an endpoint of this API (see /openapi.json)"
        ).response(adapter.refusals)

    return endpoint
