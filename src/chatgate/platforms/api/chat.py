"""``POST /v1/chat/completions`` (JSON or an SSE stream) and ``GET /v1/chat/completions/{id}``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from chatgate.domain.api_keys import FAILURE_STATUS, ApiExchange
from chatgate.platforms.api import shapes
from chatgate.platforms.api.adapter import ApiAdapter
from chatgate.platforms.api.asks import chat_ask
from chatgate.platforms.api.bodies import ChatCompletionRequest, parse, read_json, request_digest
from chatgate.platforms.api.errors import ApiError
from chatgate.platforms.api.file_links import file_objects, with_links
from chatgate.platforms.api.lane import (
    Closed,
    Done,
    Draft,
    Event,
    Keepalive,
    Started,
    Update,
    begin,
    delivery_id_of,
    finish,
    follow,
    meta_of,
    owned_exchange,
)
from chatgate.platforms.api.unsupported import check_chat
from chatgate.platforms.api.usage import chat_usage, usage_of

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def closed_error(update: Closed) -> ApiError:
    return ApiError(504 if update.code == "answer_timeout" else 503, update.code, update.reason)


FINISH_REASON = "stop"
"""A turn that answered ends with ``stop`` (a stopped turn too: its text is what it said);
one that did not is an HTTP error (``failure_error``), never a ``finish_reason`` OpenAI lacks."""

_FAILURE_CODES = {502: "model_error", 503: "model_unavailable", 504: "model_timeout"}


def failure_error(done: Done) -> ApiError:
    """A turn that got no answer, as OpenAI reports an upstream failure: 502, 503 (unreachable,
    overloaded) or 504 (timed out). The message is what a chat user reads: a short reason and the
    error id the operator finds in the log, never a host, a port or exception text."""
    outcome = done.exchange.outcome if done.exchange is not None else None
    status = FAILURE_STATUS.get(outcome or "", 502)
    return ApiError(status, _FAILURE_CODES[status], done.text or "the agent could not answer")


def approval_required(started: Started, approval: dict[str, object]) -> ApiError:
    """A non-streaming completion that needs an approval answers at once (a chat completion has
    no field for it): 409 naming the approval and where to fetch the answer once it is given."""
    ident = f"chatcmpl-{started.ask.delivery_id}"
    error = ApiError(
        409,
        "approval_required",
        f"a tool call waits for approval {approval['prompt_id']}: answer it with POST"
        f" {approval['answer_url']}, then fetch the answer with GET /v1/chat/completions/{ident}"
        " (or send the request with stream=true to see it as an event)",
        param=None,
    )
    error.extra = {"approval": approval, "completion_id": ident, "status": "requires_approval"}
    return error


def failed(update: Update) -> ApiError | None:
    """The error to answer with if ``update`` ends the request without an answer."""
    if isinstance(update, Done) and update.state == "failed":
        return failure_error(update)
    if isinstance(update, Closed):
        return closed_error(update)
    return None


def _with_files(
    body: dict[str, Any], exchange: ApiExchange | None, delivery_id: str, base: str
) -> dict[str, Any]:
    """The completion with the files the turn sent, typed (their links end its text already)."""
    files = file_objects(exchange, delivery_id, base)
    if files:
        body["chatgate_files"] = files
    return body


async def create(adapter: ApiAdapter, request: Request) -> Response:
    key = await adapter.authenticate(request)
    data = await read_json(request, adapter.settings.max_body_bytes)
    body = parse(ChatCompletionRequest, data)
    check_chat(data)
    ask = await chat_ask(adapter, key, body, request.headers, request_digest(data))
    started = await begin(adapter, ask, str(request.base_url))
    handed_off = False
    try:
        updates = follow(adapter, started)
        # The first update comes within ``POLL_SECONDS`` (a keep-alive at the latest): a turn that
        # fails at once is answered with its HTTP status, streamed or not.
        first = await anext(updates, None)
        error = None if first is None else failed(first)
        if error is not None:
            await updates.aclose()
            raise error
        if body.stream:
            streaming = StreamingResponse(
                _stream(
                    started, first, updates, bool(body.stream_options and body.stream_options.include_usage)
                ),
                media_type="text/event-stream",
                headers=SSE_HEADERS,
                background=BackgroundTask(finish, adapter, started),
            )
            handed_off = True  # the response's background task finishes it
            return streaming
        async with contextlib.aclosing(updates):
            update = first
            while update is not None:
                error = failed(update)
                if error is not None:
                    raise error
                if isinstance(update, Event) and update.body.get("type") == "approval_required":
                    raise approval_required(started, update.body["approval"])
                if isinstance(update, Done):
                    ident, model = f"chatcmpl-{started.ask.delivery_id}", started.ask.model
                    usage = chat_usage(usage_of(update.exchange, started.ask.text, update.text))
                    answer = shapes.completion(
                        ident, started.created, model, update.text, FINISH_REASON, usage
                    )
                    return JSONResponse(
                        _with_files(answer, update.exchange, started.ask.delivery_id, started.base)
                    )
                update = await anext(updates, None)
    finally:
        if not handed_off:
            finish(adapter, started)
    raise ApiError(
        503, "no_answer", "the request ended without an answer; retry with the same Idempotency-Key"
    )


async def _stream(
    started: Started, first: Update | None, rest: AsyncIterator[Update], include_usage: bool
) -> AsyncIterator[str]:
    ident, created, model = f"chatcmpl-{started.ask.delivery_id}", started.created, started.ask.model

    async def updates() -> AsyncIterator[Update]:
        if first is not None:
            yield first
        async for update in rest:
            yield update

    async with contextlib.aclosing(updates()) as stream:  # type: ignore[type-var]
        yield shapes.sse(shapes.chunk(ident, created, model, {"role": "assistant", "content": ""}))
        shown = ""
        async for update in stream:
            if isinstance(update, Draft) and update.text.startswith(shown) and len(update.text) > len(shown):
                yield shapes.sse(shapes.chunk(ident, created, model, {"content": update.text[len(shown) :]}))
                shown = update.text
            elif isinstance(update, Event):
                body = shapes.approval_chunk(ident, created, model, update.body)
                yield shapes.sse(body, event=f"chatgate.{update.body['type']}")
            elif isinstance(update, Keepalive):
                yield shapes.KEEPALIVE
            elif (error := failed(update)) is not None:
                # Mid-stream, the status is sent: OpenAI's clients raise on an ``error`` object.
                yield shapes.sse(error.body())
            elif isinstance(update, Done):
                # Drafts only ever extend (no status lines on this platform): the rest completes them.
                left = update.text[len(shown) :] if update.text.startswith(shown) else ""
                if left:
                    yield shapes.sse(shapes.chunk(ident, created, model, {"content": left}))
                yield shapes.sse(shapes.chunk(ident, created, model, {}, FINISH_REASON))
                if include_usage:
                    usage = chat_usage(usage_of(update.exchange, started.ask.text, update.text))
                    yield shapes.sse(shapes.usage_chunk(ident, created, model, usage))
        yield shapes.sse("[DONE]")


async def retrieve(adapter: ApiAdapter, request: Request) -> Response:
    key = await adapter.authenticate(request)
    ident = request.path_params["completion_id"]
    exchange = await owned_exchange(adapter, key, ident)
    if exchange is None:
        raise ApiError(404, "not_found", f"no chat completion {ident[:60]!r} was made with this API key")
    delivery_id, base = delivery_id_of(ident) or "", str(request.base_url)
    if exchange.state == "in_progress":
        raise ApiError(
            409, "in_progress", f"still running; GET /v1/responses/resp_{delivery_id} shows its progress"
        )
    done = Done(exchange, with_links(exchange.answer or "", exchange, delivery_id, base))
    if done.state == "failed":
        raise failure_error(done)
    model = str(meta_of(exchange).get("model") or adapter.settings.model)
    created = int(exchange.admitted_at)
    usage = chat_usage(usage_of(exchange, "", done.text))
    body = shapes.completion(f"chatcmpl-{delivery_id}", created, model, done.text, FINISH_REASON, usage)
    return JSONResponse(_with_files(body, exchange, delivery_id, base))
