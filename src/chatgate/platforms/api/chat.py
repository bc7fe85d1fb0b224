"""``POST /v1/chat/completions`` (JSON or an SSE stream) and ``GET /v1/chat/completions/{id}``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from chatgate.platforms.api import shapes
from chatgate.platforms.api.adapter import ApiAdapter
from chatgate.platforms.api.asks import chat_ask
from chatgate.platforms.api.bodies import ChatCompletionRequest, parse, read_json, request_digest
from chatgate.platforms.api.errors import ApiError
from chatgate.platforms.api.lane import (
    Closed,
    Done,
    Draft,
    Event,
    Keepalive,
    Started,
    begin,
    delivery_id_of,
    finish,
    follow,
    meta_of,
    owned_exchange,
)

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def closed_error(update: Closed) -> ApiError:
    return ApiError(504 if update.code == "answer_timeout" else 503, update.code, update.reason)


def finish_reason(done: Done) -> str:
    return "stop" if done.state == "completed" else "error"


async def create(adapter: ApiAdapter, request: Request) -> Response:
    key = await adapter.authenticate(request)
    data = await read_json(request, adapter.settings.max_body_bytes)
    body = parse(ChatCompletionRequest, data)
    started = await begin(adapter, chat_ask(adapter, key, body, request.headers, request_digest(data)))
    if body.stream:
        return StreamingResponse(
            _stream(adapter, started),
            media_type="text/event-stream",
            headers=SSE_HEADERS,
            background=BackgroundTask(finish, adapter, started),
        )
    try:
        async with contextlib.aclosing(follow(adapter, started)) as updates:
            async for update in updates:
                if isinstance(update, Done):
                    ident, model = f"chatcmpl-{started.ask.delivery_id}", started.ask.model
                    return JSONResponse(
                        shapes.completion(ident, started.created, model, update.text, finish_reason(update))
                    )
                if isinstance(update, Closed):
                    raise closed_error(update)
    finally:
        finish(adapter, started)
    raise ApiError(
        503, "no_answer", "the request ended without an answer; retry with the same Idempotency-Key"
    )


async def _stream(adapter: ApiAdapter, started: Started) -> AsyncIterator[str]:
    ident, created, model = f"chatcmpl-{started.ask.delivery_id}", started.created, started.ask.model
    try:
        yield shapes.sse(shapes.chunk(ident, created, model, {"role": "assistant", "content": ""}))
        shown = ""
        async for update in follow(adapter, started):
            if isinstance(update, Draft) and update.text.startswith(shown) and len(update.text) > len(shown):
                yield shapes.sse(shapes.chunk(ident, created, model, {"content": update.text[len(shown) :]}))
                shown = update.text
            elif isinstance(update, Event):
                body = shapes.approval_chunk(ident, created, model, update.body)
                yield shapes.sse(body, event=f"chatgate.{update.body['type']}")
            elif isinstance(update, Keepalive):
                yield shapes.KEEPALIVE
            elif isinstance(update, Done):
                rest = update.text[len(shown) :] if update.text.startswith(shown) else update.text
                if rest:
                    yield shapes.sse(shapes.chunk(ident, created, model, {"content": rest}))
                yield shapes.sse(shapes.chunk(ident, created, model, {}, finish_reason(update)))
            elif isinstance(update, Closed):
                yield shapes.sse(closed_error(update).body(), event="error")
        yield shapes.sse("[DONE]")
    finally:
        finish(adapter, started)


async def retrieve(adapter: ApiAdapter, request: Request) -> Response:
    key = await adapter.authenticate(request)
    ident = request.path_params["completion_id"]
    exchange = await owned_exchange(adapter, key, ident)
    if exchange is None:
        raise ApiError(404, "not_found", f"no chat completion {ident[:60]!r} was made with this API key")
    delivery_id = delivery_id_of(ident) or ""
    if exchange.state == "in_progress":
        raise ApiError(
            409, "in_progress", f"still running; GET /v1/responses/resp_{delivery_id} shows its progress"
        )
    done = Done(exchange, exchange.answer or "")
    model = str(meta_of(exchange).get("model") or adapter.settings.model)
    created = int(exchange.admitted_at)
    body = shapes.completion(f"chatcmpl-{delivery_id}", created, model, done.text, finish_reason(done))
    return JSONResponse(body)
