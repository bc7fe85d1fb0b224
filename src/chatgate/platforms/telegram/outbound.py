"""Message operations on Telegram (``EditablePlatform``) and what their errors mean.

Text goes out as HTML rendered from the agent's Markdown (``render.py``); when
Telegram still answers "can't parse entities", the same operation is retried
once as plain text, so a message is never dropped for its formatting.

Result mapping:

- ok -> ``Delivered(message_id)``; "message is not modified" on an edit ->
  ``Delivered`` (the text is already shown);
- 429 (``retry_after``) -> ``RetryLater(retry_after)``; the chat is also held
  back here for that long, so typing indicators (whose errors the stream
  consumer ignores) cannot run into the flood wait again;
- the message to edit is gone or not editable, other 400s, 403 (bot blocked,
  kicked), 404 -> ``Rejected``;
- the request never left (connection refused, DNS) -> ``RetryLater``;
- a send whose request may have reached Telegram (timeout, connection dropped,
  5xx, an unreadable answer) -> ``Ambiguous``; the same for an edit is
  ``RetryLater``, because repeating an edit is harmless.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from chatgate.domain.errors import MaybeSent, NotSent, PlatformCallError
from chatgate.domain.media import FileBody
from chatgate.domain.outbound import Ambiguous, Delivered, DeliveryResult, Rejected, RetryLater
from chatgate.domain.outfiles import OutFile
from chatgate.domain.prompts import Prompt
from chatgate.platforms.telegram.errors import ApiRefused, Call, FilePart, Upload
from chatgate.platforms.telegram.render import markdown_to_html

log = logging.getLogger(__name__)
REQUEST_TIMEOUT = 20
PARSE_ERROR = "can't parse entities"
NOT_MODIFIED = "message is not modified"
PHOTO_MAX_BYTES = 10_000_000
"""sendPhoto takes photos up to 10 MB; a larger image goes as a document (up to 50 MB)."""
CAPTION_MAX = 1024
PHOTO_TYPES = frozenset({"image/png", "image/jpeg", "image/webp"})


def chat_ref(chat_id: str) -> int | str:
    """Telegram chat ids are integers; an ``@channel`` name stays a string."""
    try:
        return int(chat_id)
    except ValueError:
        return chat_id


def _int_or_none(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        return None


class TelegramOutbound:
    """sendMessage / editMessageText / sendChatAction / deleteMessage with honest results."""

    def __init__(self, call: Call, redact: Callable[[str], str], upload: Upload | None = None) -> None:
        self._call = call
        self._upload = upload
        self._redact = redact
        self._held: dict[str, float] = {}
        """chat id -> monotonic time before which Telegram told us not to call this chat."""

    def _hold_left(self, chat_id: str) -> float:
        until = self._held.get(chat_id)
        if until is None:
            return 0.0
        left = until - time.monotonic()
        if left <= 0:
            del self._held[chat_id]
            return 0.0
        return left

    def _reason(self, exc: BaseException) -> str:
        return self._redact(
            str(exc) if isinstance(exc, PlatformCallError) else f"{type(exc).__name__}: {exc}"
        )

    def _flood_wait(self, chat_id: str, exc: PlatformCallError) -> float | None:
        """A 429's ``retry_after`` (the chat is held back that long), or ``None`` for any other error."""
        if not isinstance(exc, ApiRefused) or (exc.code != 429 and exc.retry_after is None):
            return None
        wait = exc.retry_after if exc.retry_after is not None else 1.0
        self._held[chat_id] = time.monotonic() + wait
        return wait

    async def send_message(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        return await self._send(chat_id, text, target, reply_to=reply_to)

    async def send_prompt(self, chat_id: str, prompt: Prompt, target: Mapping[str, str]) -> DeliveryResult:
        """The prompt with an inline keyboard: one button per option, its callback data the token."""
        rows = [[{"text": o.label, "callback_data": prompt.token(o.id)}] for o in prompt.options]
        keyboard = {"inline_keyboard": rows}
        # The prompt text is ours, not Markdown from the agent: send it as plain text.
        return await self._send(chat_id, prompt.text, target, keyboard=keyboard, plain=True)

    async def _send(
        self,
        chat_id: str,
        text: str,
        target: Mapping[str, str],
        *,
        reply_to: str | None = None,
        keyboard: dict[str, Any] | None = None,
        plain: bool = False,
    ) -> DeliveryResult:
        thread = _int_or_none(target.get("thread_id"))
        reply = _int_or_none(reply_to)
        params = {"message_id": reply, "allow_sending_without_reply": True} if reply else None

        def call(body: str, parse_mode: str | None) -> Awaitable[Any]:
            return self._call(
                "sendMessage",
                REQUEST_TIMEOUT,
                chat_id=chat_ref(chat_id),
                text=body,
                parse_mode=parse_mode,
                message_thread_id=thread,
                reply_parameters=params,
                reply_markup=keyboard,
            )

        return await self._run(chat_id, text, call, sending=True, plain=plain)

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        ident = _int_or_none(message_id)
        if ident is None:
            return Rejected(f"not a Telegram message id: {message_id!r}")

        def call(body: str, parse_mode: str | None) -> Awaitable[Any]:
            return self._call(
                "editMessageText",
                REQUEST_TIMEOUT,
                chat_id=chat_ref(chat_id),
                message_id=ident,
                text=body,
                parse_mode=parse_mode,
            )

        result = await self._run(chat_id, text, call, sending=False)
        if isinstance(result, Delivered):
            return Delivered(message_id)
        return result

    async def _run(
        self,
        chat_id: str,
        text: str,
        call: Callable[[str, str | None], Awaitable[Any]],
        *,
        sending: bool,
        plain: bool = False,
    ) -> DeliveryResult:
        held = self._hold_left(chat_id)
        if held > 0:
            return RetryLater("Telegram flood control (still waiting)", held, scope="chat")
        if not text.strip():
            return Rejected("Telegram cannot show an empty message")
        try:
            try:
                sent = await (call(text, None) if plain else call(markdown_to_html(text), "HTML"))
            except ApiRefused as exc:
                if exc.code != 400 or not exc.says(PARSE_ERROR):
                    raise
                log.warning("Telegram refused the HTML rendering (%s); sending plain text", exc.description)
                sent = await call(text, None)
        except PlatformCallError as exc:
            return self._classify(chat_id, exc, sending=sending)
        message_id = sent.get("message_id") if isinstance(sent, dict) else None
        return Delivered(str(message_id) if isinstance(message_id, int) else None)

    def _classify(self, chat_id: str, exc: PlatformCallError, *, sending: bool) -> DeliveryResult:
        reason = self._reason(exc)
        wait = self._flood_wait(chat_id, exc)
        if wait is not None:
            return RetryLater(reason, wait, scope="chat")
        if isinstance(exc, NotSent):
            return RetryLater(reason, 0.0)  # the request never left this machine
        if isinstance(exc, MaybeSent):
            return Ambiguous(reason) if sending else RetryLater(reason, 0.0)
        assert isinstance(exc, ApiRefused)
        if exc.code == 400 and exc.says(NOT_MODIFIED):
            return Delivered()
        if exc.migrate_to is not None:
            return Rejected(f"the group became supergroup {exc.migrate_to}: {reason}")
        if exc.code == 401:
            return RetryLater(f"the bot token was refused ({reason}); check platforms.telegram", 60.0)
        if exc.code >= 500 and exc.says("restart"):
            return RetryLater(reason, 1.0)
        if exc.code >= 500:  # its server failed: a send may have been made before it did
            return Ambiguous(reason) if sending else RetryLater(reason, 0.0)
        return Rejected(reason)  # 400 (message to edit not found, chat not found …), 403 blocked, 404

    async def send_file(
        self, chat_id: str, file: OutFile, body: FileBody, caption: str, target: Mapping[str, str],
        reply_to: str | None,
    ) -> DeliveryResult:  # fmt: skip
        """sendPhoto for a photo Telegram can show, else sendDocument. A photo Telegram refuses
        (its dimensions, its format) was not posted, so it is sent again as a document. Telegram
        has no idempotency key for a send: an upload without an answer is ``Ambiguous``, and its
        retry carries the duplicate marker in its caption, as a text reply's does."""
        if self._upload is None:
            return Rejected("the Telegram adapter cannot upload files")
        held = self._hold_left(chat_id)
        if held > 0:
            return RetryLater("Telegram flood control (still waiting)", held, scope="chat")
        reply = _int_or_none(reply_to)
        params: dict[str, Any] = {
            "chat_id": chat_ref(chat_id),
            "caption": caption[:CAPTION_MAX] or None,
            "message_thread_id": _int_or_none(target.get("thread_id")),
            "reply_parameters": {"message_id": reply, "allow_sending_without_reply": True} if reply else None,
        }
        part = FilePart(file.name, file.mime, body)
        timeout = REQUEST_TIMEOUT + body.size / 1_000_000  # a second per MB on top
        photo = file.mime in PHOTO_TYPES and body.size <= PHOTO_MAX_BYTES
        try:
            try:
                if photo:
                    sent = await self._upload("sendPhoto", timeout, "photo", part, **params)
                else:
                    sent = await self._upload("sendDocument", timeout, "document", part, **params)
            except ApiRefused as exc:
                if not photo or exc.code != 400:
                    raise
                log.info("Telegram refused the photo (%s); sending it as a document", exc.description)
                sent = await self._upload("sendDocument", timeout, "document", part, **params)
        except PlatformCallError as exc:
            return self._classify(chat_id, exc, sending=True)
        message_id = sent.get("message_id") if isinstance(sent, dict) else None
        return Delivered(str(message_id) if isinstance(message_id, int) else None)

    async def send_typing(self, chat_id: str, target: Mapping[str, str]) -> DeliveryResult | None:
        if self._hold_left(chat_id) > 0:
            return None
        try:
            await self._call(
                "sendChatAction",
                REQUEST_TIMEOUT,
                chat_id=chat_ref(chat_id),
                action="typing",
                message_thread_id=_int_or_none(target.get("thread_id")),
            )
        except PlatformCallError as exc:
            wait = self._flood_wait(chat_id, exc)
            if wait is not None:
                return RetryLater(self._reason(exc), wait, scope="chat")
            log.debug("typing indicator failed: %s", self._reason(exc))
        return None

    async def delete_message(self, chat_id: str, message_id: str, target: Mapping[str, str]) -> bool:
        ident = _int_or_none(message_id)
        if ident is None or self._hold_left(chat_id) > 0:
            return False
        try:
            done = await self._call(
                "deleteMessage", REQUEST_TIMEOUT, chat_id=chat_ref(chat_id), message_id=ident
            )
        except PlatformCallError as exc:
            if self._flood_wait(chat_id, exc) is None:
                log.info("could not delete Telegram message %s: %s", message_id, self._reason(exc))
            return False
        return done is True
