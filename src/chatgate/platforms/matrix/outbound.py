"""Message operations on Matrix (``EditablePlatform``, reaction prompts, notices) and their results.

- ok -> ``Delivered(event_id)``;
- ``M_LIMIT_EXCEEDED`` -> ``RetryLater`` for ``retry_after_ms``, scope ``platform``: a
  homeserver limits a user's messages across all its rooms, so the whole platform waits;
- 401 (``M_UNKNOWN_TOKEN``) -> ``RetryLater`` a minute later, naming the token;
- any other refusal (403 not in the room, 404, 400) -> ``Rejected``;
- never left -> ``RetryLater``; a send that may have been made (5xx, timeout) ->
  ``Ambiguous``, the same for an edit -> ``RetryLater`` (repeating an edit is harmless).

Sends are ``PUT /send/{type}/{txnId}``. An outbox row's sends use a transaction id of its
own (``row_transaction``: this database's namespace and the row id), so a resend after an
ambiguous send is recognized by the homeserver and answered with the first event instead of
showing the reply twice; previews and notices use fresh ones.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from chatgate.domain.errors import NotSent, PlatformCallError
from chatgate.domain.outbound import Ambiguous, Delivered, DeliveryResult, Rejected, RetryLater
from chatgate.domain.outfiles import OutFile
from chatgate.domain.prompts import Prompt
from chatgate.platforms.matrix.errors import ApiRefused, RateLimited
from chatgate.platforms.matrix.prompts import REACTIONS, PromptRef, bare, prompt_content

log = logging.getLogger(__name__)
Call = Callable[..., Awaitable[dict[str, Any]]]
"""``call(method, path, body, query=..., timeout=...)``: ``api.MatrixApi.call`` once started."""
REMEMBERED = 4096
_MSGTYPES = {"image": "m.image", "audio": "m.audio", "video": "m.video"}
_ROW_TXN: contextvars.ContextVar[str | None] = contextvars.ContextVar("matrix_row_txn", default=None)


@contextlib.contextmanager
def row_transaction(txn: str) -> Iterator[None]:
    """Sends made inside use ``txn`` (plus the operation), so the homeserver deduplicates a
    resend of the same outbox row; one delivery runs in one task, so the context is its own."""
    token = _ROW_TXN.set(txn)
    try:
        yield
    finally:
        _ROW_TXN.reset(token)


def classify(exc: PlatformCallError, *, sending: bool) -> DeliveryResult:
    reason = str(exc)
    if isinstance(exc, RateLimited):
        return RetryLater(reason, exc.retry_after, scope="platform")
    if isinstance(exc, NotSent):
        return RetryLater(reason, 0.0)
    if isinstance(exc, ApiRefused) and exc.status < 500:
        if exc.status == 401:
            return RetryLater(f"the access token was refused ({reason}); check platforms.matrix", 60.0)
        return Rejected(reason)
    return Ambiguous(reason) if sending else RetryLater(reason, 0.0)


def relates_to(target: Mapping[str, str], reply_to: str | None) -> dict[str, Any] | None:
    """A reply in a thread is ``m.thread`` (with the reply as ``m.in_reply_to``, or the
    fallback to the thread's root); outside a thread, a plain ``m.in_reply_to``."""
    root = target.get("thread_id")
    if root:
        return {
            "rel_type": "m.thread",
            "event_id": root,
            "is_falling_back": reply_to is None,
            "m.in_reply_to": {"event_id": reply_to or root},
        }
    return {"m.in_reply_to": {"event_id": reply_to}} if reply_to else None


class Remembered:
    """A bounded record of what this process sent: the bot's event ids (a reply to one is for
    the bot) and its prompts (a reaction on one is an answer)."""

    def __init__(self) -> None:
        self.events: OrderedDict[str, None] = OrderedDict()
        self.prompts: OrderedDict[str, PromptRef] = OrderedDict()

    def event(self, event_id: str) -> None:
        self.events[event_id] = None
        while len(self.events) > REMEMBERED:
            self.events.popitem(last=False)

    def prompt(self, event_id: str, ref: PromptRef) -> None:
        self.prompts[event_id] = ref
        while len(self.prompts) > REMEMBERED:
            self.prompts.popitem(last=False)


class MatrixOutbound:
    def __init__(self, call: Call, bot_id: Callable[[], str]) -> None:
        self._call = call
        self._bot_id = bot_id
        self.sent = Remembered()

    def _txn(self, operation: str) -> str:
        row = _ROW_TXN.get()
        return f"{row}.{operation}" if row else f"cg.{uuid.uuid4().hex}"

    async def _send(self, room: str, kind: str, content: dict[str, Any], operation: str) -> str:
        from chatgate.platforms.matrix.api import path  # aiohttp: loaded once the adapter starts

        where = path("rooms", room, "send", kind, self._txn(operation))
        answer = await self._call("PUT", where, content)
        event_id = answer.get("event_id")
        if not isinstance(event_id, str):
            raise NotSent(f"send {kind}: the homeserver answered without an event_id")  # never shown
        self.sent.event(event_id)
        return event_id

    async def _run(
        self, room: str, content: dict[str, Any], operation: str, *, sending: bool
    ) -> DeliveryResult:
        try:
            return Delivered(await self._send(room, "m.room.message", content, operation))
        except PlatformCallError as exc:
            return classify(exc, sending=sending)

    async def send_message(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        if not text.strip():
            return Rejected("Matrix cannot show an empty message")
        content: dict[str, Any] = {"msgtype": "m.text", "body": text, "m.mentions": {}}
        relation = relates_to(target, reply_to)
        if relation:
            content["m.relates_to"] = relation
        return await self._run(chat_id, content, "send", sending=True)

    async def send_file(
        self, chat_id: str, file: OutFile, mxc: str, caption: str, target: Mapping[str, str],
        reply_to: str | None, shape: tuple[int, int] | None = None,
    ) -> DeliveryResult:  # fmt: skip
        """The uploaded file as an ``m.image`` (shown inline; ``shape``: its width and height) or
        ``m.file``/``m.audio``/``m.video`` event, under the row's transaction id like its text: a
        resend is the same event."""
        content: dict[str, Any] = {
            "msgtype": _MSGTYPES.get(file.mime.partition("/")[0], "m.file"),
            "body": caption or file.name,
            "filename": file.name,
            "url": mxc,
            "info": {"mimetype": file.mime, "size": file.size},
            "m.mentions": {},
        }
        if shape is not None:
            content["info"].update(w=shape[0], h=shape[1])
        relation = relates_to(target, reply_to)
        if relation:
            content["m.relates_to"] = relation
        return await self._run(chat_id, content, "file", sending=True)

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        if not text.strip():
            return Rejected("Matrix cannot show an empty message")
        content = {
            "msgtype": "m.text",
            "body": f"* {text}",
            "m.new_content": {"msgtype": "m.text", "body": text, "m.mentions": {}},
            "m.relates_to": {"rel_type": "m.replace", "event_id": message_id},
            "m.mentions": {},
        }
        result = await self._run(chat_id, content, "edit", sending=False)
        return Delivered(message_id) if isinstance(result, Delivered) else result

    async def send_notice(self, room: str, text: str, thread: str | None, reply_to: str | None) -> None:
        """Best effort: a status for people (a stale tap, an encrypted room), never a reply."""
        content: dict[str, Any] = {"msgtype": "m.notice", "body": text, "m.mentions": {}}
        relation = relates_to({"thread_id": thread} if thread else {}, reply_to)
        if relation:
            content["m.relates_to"] = relation
        try:
            await self._send(room, "m.room.message", content, "notice")
        except PlatformCallError as exc:
            log.info("could not post a Matrix notice in %s: %s", room, exc)

    async def send_typing(self, chat_id: str, target: Mapping[str, str]) -> DeliveryResult | None:
        from chatgate.platforms.matrix.api import path  # (idem)

        try:
            await self._call("PUT", path("rooms", chat_id, "typing", self._bot_id()),
                             {"typing": True, "timeout": 5000})  # fmt: skip
        except RateLimited as exc:
            return classify(exc, sending=False)
        except PlatformCallError as exc:
            log.debug("Matrix typing notice failed: %s", exc)
        return None

    async def delete_message(self, chat_id: str, message_id: str, target: Mapping[str, str]) -> bool:
        from chatgate.platforms.matrix.api import path  # (idem)

        try:
            await self._call("PUT", path("rooms", chat_id, "redact", message_id, self._txn("redact")), {})
        except PlatformCallError as exc:
            log.info("could not redact Matrix event %s: %s", message_id, exc)
            return False
        return True

    async def send_prompt(self, chat_id: str, prompt: Prompt, target: Mapping[str, str]) -> DeliveryResult:
        thread = target.get("thread_id")
        relation = relates_to(target, None) if thread else None
        content = prompt_content(prompt, prompt.text, relation)
        try:
            event_id = await self._send(chat_id, "m.room.message", content, "prompt")
        except PlatformCallError as exc:
            return classify(exc, sending=True)
        options = {bare(k): v for k, v in content["org.chatgate.prompt"]["options"].items()}
        self.sent.prompt(event_id, PromptRef(prompt.prompt_id, options, thread))
        for option in prompt.options:
            key = REACTIONS.get(option.id)
            if key is not None:
                await self.react(chat_id, event_id, key)
        return Delivered(event_id)

    async def react(self, room: str, event_id: str, key: str) -> None:
        """The bot's own reaction under a prompt, for a person to tap (best effort)."""
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        try:
            await self._send(room, "m.reaction", content, f"react.{key}")
        except PlatformCallError as exc:
            log.info("could not add reaction %s under %s: %s", key, event_id, exc)
