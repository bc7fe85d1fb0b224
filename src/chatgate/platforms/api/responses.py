"""``POST /v1/responses`` (JSON or its named stream events) and ``GET /v1/responses/{id}``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from chatgate.domain.api_keys import ApiExchange
from chatgate.domain.errors import StoreUnavailable
from chatgate.platforms.api import shapes
from chatgate.platforms.api.adapter import PLATFORM, ApiAdapter
from chatgate.platforms.api.approval_items import ApprovalItems, approval_item
from chatgate.platforms.api.asks import response_ask
from chatgate.platforms.api.bodies import ResponseRequest, parse, read_json, request_digest
from chatgate.platforms.api.chat import SSE_HEADERS, closed_error, failure_error
from chatgate.platforms.api.errors import ApiError
from chatgate.platforms.api.file_links import file_objects, with_links
from chatgate.platforms.api.lane import (
    Closed,
    Done,
    Draft,
    Event,
    Keepalive,
    Started,
    begin,
    chat_of,
    delivery_id_of,
    finish,
    follow,
    meta_of,
    owned_exchange,
)
from chatgate.platforms.api.unsupported import check_responses
from chatgate.platforms.api.usage import response_usage, usage_of

_ENDED = {"completed": "response.completed", "failed": "response.failed", "cancelled": "response.incomplete"}


def _object(
    started: Started,
    status: str,
    text: str | None = None,
    extra: dict[str, Any] | None = None,
    done: Done | None = None,
    items: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    ask = started.ask
    usage = None
    if done is not None and done.state == "completed":
        usage = response_usage(usage_of(done.exchange, ask.text, done.text))
    body = shapes.response(
        ask.delivery_id,
        started.created,
        ask.model,
        status,
        text=text,
        previous=ask.previous,
        conversation=ask.conversation,
        extra=extra,
        usage=usage,
    )
    body["output"].extend(items or ())
    files = file_objects(done.exchange if done is not None else None, ask.delivery_id, started.base)
    if files:
        body["chatgate_files"] = files
    return body


async def create(adapter: ApiAdapter, request: Request) -> Response:
    key = await adapter.authenticate(request)
    data = await read_json(request, adapter.settings.max_body_bytes)
    body = parse(ResponseRequest, data)
    check_responses(data)
    ask = await response_ask(adapter, key, body, request.headers, request_digest(data))
    started = await begin(adapter, ask, str(request.base_url))
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
                if isinstance(update, Event) and update.body.get("type") == "approval_required":
                    # Not streaming, a client cannot answer while it waits: it gets the approval now,
                    # answers it (POST /v1/approvals/{id}) and fetches the response when it is done.
                    approval = update.body["approval"]
                    extra = {"pending_approvals": [approval]}
                    items = [approval_item(approval)]
                    return JSONResponse(_object(started, "in_progress", extra=extra, items=items))
                if isinstance(update, Done) and update.state == "failed":
                    raise failure_error(update)  # 502/503/504, as OpenAI reports an upstream failure
                if isinstance(update, Done):
                    return JSONResponse(_object(started, update.state, update.text, done=update))
                if isinstance(update, Closed):
                    raise closed_error(update)
    finally:
        finish(adapter, started)
    raise ApiError(
        503, "no_answer", "the request ended without an answer; retry with the same Idempotency-Key"
    )


class _Events:
    """The stream's events, each with the next ``sequence_number``."""

    def __init__(self) -> None:
        self.seq = 0

    def __call__(self, kind: str, **fields: Any) -> str:
        body = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return shapes.sse(body, event=kind)


def _opening(started: Started, event: _Events, item_id: str) -> Iterator[str]:
    yield event("response.created", response=_object(started, "in_progress"))
    yield event("response.in_progress", response=_object(started, "in_progress"))
    item = shapes.message_item(started.ask.delivery_id, "", "in_progress")
    item["content"] = []
    yield event("response.output_item.added", output_index=0, item=item)
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    yield event("response.content_part.added", item_id=item_id, output_index=0, content_index=0, part=part)


def _closing(
    started: Started, event: _Events, item_id: str, done: Done, approvals: ApprovalItems
) -> Iterator[str]:
    where = {"item_id": item_id, "output_index": 0, "content_index": 0}
    part = {"type": "output_text", "text": done.text, "annotations": [], "logprobs": []}
    yield event("response.output_text.done", **where, text=done.text, logprobs=[])
    yield event("response.content_part.done", **where, part=part)
    item = shapes.message_item(started.ask.delivery_id, done.text)
    yield event("response.output_item.done", output_index=0, item=item)
    yield event(
        _ENDED.get(done.state, "response.completed"),
        response=_object(started, done.state, done.text, done=done, items=approvals.output()),
    )


def _approval_events(event: _Events, body: dict[str, Any], approvals: ApprovalItems) -> Iterator[str]:
    """An approval as a typed output item: added when asked, done when answered."""
    yield event(f"chatgate.{body['type']}", **{k: v for k, v in body.items() if k != "type"})
    if body["type"] == "approval_required":
        index, item = approvals.added(body["approval"])
        yield event("response.output_item.added", output_index=index, item=item)
    elif body["type"] == "approval_resolved":
        answered = approvals.answered(str(body["prompt_id"]), str(body["outcome"]))
        if answered is not None:
            yield event("response.output_item.done", output_index=answered[0], item=answered[1])


async def _stream(adapter: ApiAdapter, started: Started) -> AsyncIterator[str]:
    event, item_id = _Events(), f"msg_{started.ask.delivery_id}"
    approvals = ApprovalItems()
    where = {"item_id": item_id, "output_index": 0, "content_index": 0}
    try:
        for line in _opening(started, event, item_id):
            yield line
        shown = ""
        async for update in follow(adapter, started):
            if isinstance(update, Draft) and update.text.startswith(shown) and len(update.text) > len(shown):
                yield event(
                    "response.output_text.delta", **where, delta=update.text[len(shown) :], logprobs=[]
                )
                shown = update.text
            elif isinstance(update, Event):
                for line in _approval_events(event, update.body, approvals):
                    yield line
            elif isinstance(update, Keepalive):
                yield shapes.KEEPALIVE
            elif isinstance(update, Done):
                rest = update.text[len(shown) :] if update.text.startswith(shown) else update.text
                if rest:
                    yield event("response.output_text.delta", **where, delta=rest, logprobs=[])
                for line in _closing(started, event, item_id, update, approvals):
                    yield line
            elif isinstance(update, Closed):
                error = closed_error(update)
                yield event("error", code=error.code, message=error.message, param=None)
    finally:
        finish(adapter, started)


async def _pending(adapter: ApiAdapter, exchange: ApiExchange) -> list[dict[str, Any]]:
    try:
        records = await adapter.store.open_approvals(PLATFORM, chat_of(exchange))
    except StoreUnavailable:
        return []
    return [shapes.approval(r.prompt()) for r in records if r.inbox_seq == exchange.seq]


async def retrieve(adapter: ApiAdapter, request: Request) -> Response:
    """A client that disconnected fetches the answer here; a running one says ``in_progress``."""
    key = await adapter.authenticate(request)
    ident = request.path_params["response_id"]
    exchange = await owned_exchange(adapter, key, ident)
    if exchange is None:
        raise ApiError(404, "not_found", f"no response {ident[:60]!r} was made with this API key")
    meta = meta_of(exchange)
    state = exchange.state
    pending = await _pending(adapter, exchange) if state == "in_progress" else []
    extra = {"pending_approvals": pending} if state == "in_progress" else None
    delivery_id, base = delivery_id_of(ident) or "", str(request.base_url)
    answer = with_links(exchange.answer or "", exchange, delivery_id, base)
    usage = response_usage(usage_of(exchange, "", answer)) if state == "completed" else None
    previous, conversation = meta.get("previous_response_id"), meta.get("conversation")
    body = shapes.response(
        delivery_id,
        int(exchange.admitted_at),
        str(meta.get("model") or adapter.settings.model),
        state,
        text=None if state == "in_progress" else answer,
        previous=previous if isinstance(previous, str) else None,
        conversation=conversation if isinstance(conversation, str) else None,
        extra=extra,
        usage=usage,
    )
    body["output"].extend(approval_item(approval) for approval in pending)
    files = file_objects(exchange, delivery_id, base)
    if files:
        body["chatgate_files"] = files
    return JSONResponse(body)
