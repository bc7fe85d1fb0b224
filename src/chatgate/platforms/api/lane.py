"""One request's way through the pipeline: admit it, then follow its turn to the answer.

A request is an ``Inbound`` of platform ``api`` whose delivery id is the hash of the key
id and the client's ``Idempotency-Key`` (else random): a retry is a redelivery, which
the store recognizes and never runs twice. Its chat is the conversation (named, or the
request's own), so a conversation is a session with the history the store keeps.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
import uuid
from collections.abc import AsyncGenerator
from typing import Any, Literal

import msgspec

from chatgate.domain.api_keys import ApiExchange, ApiKeyRecord
from chatgate.domain.inbound import Attachment, Inbound
from chatgate.domain.persona import INSTRUCTIONS_KEY
from chatgate.domain.profiles import PROFILE_KEY
from chatgate.domain.source import Source
from chatgate.platforms.api.adapter import PLATFORM, ApiAdapter
from chatgate.platforms.api.errors import ApiError
from chatgate.platforms.api.file_links import with_links
from chatgate.platforms.api.waiters import Waiter

Endpoint = Literal["chat", "responses"]
POLL_SECONDS = 5.0
"""How often a waiting request reads its exchange (a turn that ends without an answer: stopped,
silent) and sends a keep-alive comment on a stream."""
_DELIVERY_ID = re.compile(r"[0-9a-f]{32}")
PREFIXES = ("resp_", "chatcmpl-")


def delivery_id_for(key_id: str, idempotency_key: str | None) -> str:
    """The dedupe key: the same key and Idempotency-Key give the same id, nothing else does."""
    if idempotency_key is None:
        return uuid.uuid4().hex
    return hashlib.sha256(f"{key_id}\0{idempotency_key}".encode()).hexdigest()[:32]


def delivery_id_of(ident: str) -> str | None:
    """``resp_<id>`` or ``chatcmpl-<id>`` back to the delivery id; None for anything else."""
    for prefix in PREFIXES:
        if ident.startswith(prefix) and _DELIVERY_ID.fullmatch(ident[len(prefix) :]):
            return ident[len(prefix) :]
    return None


def chat_for(key_id: str, conversation: str | None, delivery_id: str) -> str:
    """A named conversation of this key, or the request's own: two keys never share a chat."""
    return f"{key_id}/c:{conversation}" if conversation is not None else f"{key_id}/r:{delivery_id}"


class Ask(msgspec.Struct, frozen=True):
    key: ApiKeyRecord
    delivery_id: str
    chat_id: str
    text: str
    endpoint: Endpoint
    model: str
    conversation: str | None = None
    previous: str | None = None
    request: str = ""
    """The digest of the request body (``bodies.request_digest``): what an Idempotency-Key binds."""
    instructions: dict[str, str] | None = None
    """The persona rule for this request (``asks.instructions``), for the engine."""
    profile: str | None = None
    """The model profile the request's ``model`` named, for this turn (None: the session's)."""
    attachments: tuple[Attachment, ...] = ()
    """The request's files, already in the blob store (``files.py``)."""

    def inbound(self) -> Inbound:
        meta: dict[str, str | None] = {"endpoint": self.endpoint, "model": self.model}
        meta |= {"conversation": self.conversation, "previous_response_id": self.previous}
        meta["request"] = self.request
        payload: dict[str, object] = {"api": meta}
        if self.instructions:
            payload[INSTRUCTIONS_KEY] = self.instructions
        if self.profile is not None:
            payload[PROFILE_KEY] = self.profile
        return Inbound(
            transport=PLATFORM,
            delivery_id=self.delivery_id,
            source=Source(
                platform=PLATFORM,
                chat_id=self.chat_id,
                chat_type="dm",
                user_id=self.key.key_id,
                user_name=self.key.name,
            ),
            text=self.text,
            message_ref=self.delivery_id,
            received_at=time.time(),
            payload=payload,
            attachments=self.attachments,
        )


def owner_of(exchange: ApiExchange) -> str | None:
    source = exchange.inbound_json.get("source")
    return str(source.get("user_id")) if isinstance(source, dict) else None


def meta_of(exchange: ApiExchange) -> dict[str, Any]:
    payload = exchange.inbound_json.get("payload")
    meta = payload.get("api") if isinstance(payload, dict) else None
    return meta if isinstance(meta, dict) else {}


def chat_of(exchange: ApiExchange) -> str:
    source = exchange.inbound_json.get("source")
    return str(source.get("chat_id") or "") if isinstance(source, dict) else ""


async def owned_exchange(adapter: ApiAdapter, key: ApiKeyRecord, ident: str) -> ApiExchange | None:
    """The exchange ``ident`` names if this key made it (another key's is as absent as none)."""
    delivery_id = delivery_id_of(ident)
    if delivery_id is None:
        return None
    exchange = await adapter.exchange(delivery_id)
    if exchange is None or owner_of(exchange) != key.key_id:
        return None
    return exchange


def _reused_for(existing: ApiExchange, ask: Ask) -> str | None:
    """What differs between the request an Idempotency-Key first named and this one, if anything.

    The key binds the endpoint, the conversation (the chat the request went to) and the whole
    body; an exchange stored before the body's digest was recorded is compared by its text."""
    meta = meta_of(existing)
    if meta.get("endpoint") != ask.endpoint:
        return f"another endpoint ({_PATHS.get(str(meta.get('endpoint')), 'another')})"
    if chat_of(existing) != ask.chat_id:
        return "another conversation"
    recorded = meta.get("request")
    same = recorded == ask.request if recorded else existing.inbound_json.get("text") == ask.text
    return None if same else "another request body"


_PATHS = {"chat": "POST /v1/chat/completions", "responses": "POST /v1/responses"}


class Started(msgspec.Struct):
    """An admitted request with its waiter; ``existing`` is what a retry found already stored."""

    ask: Ask
    waiter: Waiter
    existing: ApiExchange | None
    created: int = msgspec.field(default_factory=lambda: int(time.time()))
    base: str = ""
    """The API's own URL as the client reached it: where the answer's file links point."""

    def done(self, exchange: ApiExchange | None, text: str) -> Done:
        """The answer, with a link to each file the turn sent (``file_links.py``)."""
        return Done(exchange, with_links(text, exchange, self.ask.delivery_id, self.base))


async def begin(adapter: ApiAdapter, ask: Ask, base: str = "") -> Started:
    """Wait for the answer from before admission (so it cannot slip by), then admit."""
    waiter = adapter.waiters.open(ask.chat_id, ask.delivery_id)
    try:
        admitted = await adapter.submit(ask.inbound())
        existing = None if admitted.new else await adapter.exchange(ask.delivery_id)
        reuse = None if existing is None else _reused_for(existing, ask)
        if reuse is not None:
            raise ApiError(
                409,
                "idempotency_key_reused",
                f"this Idempotency-Key was used for {reuse}; a retry must repeat its request exactly"
                " (use a new key for a new request)",
                param="Idempotency-Key",
            )
    except BaseException:
        adapter.waiters.close(waiter)
        raise
    created = int(existing.admitted_at) if existing is not None else int(time.time())
    return Started(ask, waiter, existing, created, base)


class Draft(msgspec.Struct, frozen=True):
    text: str


class Event(msgspec.Struct, frozen=True):
    body: dict[str, Any]


class Keepalive(msgspec.Struct, frozen=True):
    pass


class Done(msgspec.Struct, frozen=True):
    exchange: ApiExchange | None
    text: str

    @property
    def state(self) -> str:
        return self.exchange.state if self.exchange is not None else "completed"


class Closed(msgspec.Struct, frozen=True):
    code: str
    reason: str


Update = Draft | Event | Keepalive | Done | Closed


async def _settled(adapter: ApiAdapter, delivery_id: str) -> ApiExchange | None:
    """The exchange if its turn is over; None while it runs or when the store cannot tell now."""
    try:
        exchange = await adapter.exchange(delivery_id)
    except ApiError:
        return None
    return exchange if exchange is not None and exchange.state != "in_progress" else None


async def follow(adapter: ApiAdapter, started: Started) -> AsyncGenerator[Update, None]:
    """Drafts, approval events and keep-alives until the answer (``Done``) or ``Closed``."""
    existing, waiter = started.existing, started.waiter
    if existing is not None and existing.state != "in_progress":
        yield started.done(existing, existing.answer or "")
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + adapter.settings.wait_seconds
    shown = ""
    while True:
        while waiter.events:
            yield Event(waiter.events.popleft())
        if waiter.answered is not None:
            found = await _settled(adapter, waiter.ref)
            yield started.done(found, found.answer if found and found.answer is not None else waiter.answered)
            return
        if waiter.closed is not None:
            yield Closed("shutting_down", waiter.closed)
            return
        if waiter.draft != shown:
            shown = waiter.draft
            yield Draft(shown)
        left = deadline - loop.time()
        if left <= 0:
            yield Closed("answer_timeout", _timeout_text(started))
            return
        if not await waiter.changed(min(POLL_SECONDS, left)):
            found = await _settled(adapter, waiter.ref)
            if found is not None:
                yield started.done(found, found.answer or "")
                return
            yield Keepalive()


def _timeout_text(started: Started) -> str:
    return (
        "no answer within platforms.api.wait_seconds; the request keeps running: fetch it with"
        f" GET /v1/responses/resp_{started.ask.delivery_id} or retry with the same Idempotency-Key"
    )


def finish(adapter: ApiAdapter, started: Started) -> None:
    adapter.waiters.close(started.waiter)
