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

from aiogram import Bot
from aiogram.exceptions import (
    AiogramError,
    ClientDecodeError,
    RestartingTelegram,
    TelegramAPIError,
    TelegramBadRequest,
    TelegramForbiddenError,
    TelegramMigrateToChat,
    TelegramNetworkError,
    TelegramNotFound,
    TelegramRetryAfter,
    TelegramServerError,
    TelegramUnauthorizedError,
)
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup, Message, ReplyParameters
from aiohttp import ClientConnectorError

from chatgate.domain.outbound import Ambiguous, Delivered, DeliveryResult, Rejected, RetryLater
from chatgate.domain.prompts import Prompt
from chatgate.platforms.telegram.render import markdown_to_html

log = logging.getLogger(__name__)
REQUEST_TIMEOUT = 20
PARSE_ERROR = "can't parse entities"
NOT_MODIFIED = "message is not modified"


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

    def __init__(self, bot: Bot, redact: Callable[[str], str]) -> None:
        self._bot = bot
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
        if isinstance(exc, ClientDecodeError):
            return f"unreadable answer from Telegram: {exc.message}"  # str(exc) would include the content
        return self._redact(f"{type(exc).__name__}: {exc}")

    async def send_message(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        return await self._send(chat_id, text, target, reply_to=reply_to)

    async def send_prompt(self, chat_id: str, prompt: Prompt, target: Mapping[str, str]) -> DeliveryResult:
        """The prompt with an inline keyboard: one button per option, its callback data the token."""
        keyboard = InlineKeyboardMarkup(
            inline_keyboard=[
                [InlineKeyboardButton(text=o.label, callback_data=prompt.token(o.id))] for o in prompt.options
            ]
        )
        # The prompt text is ours, not Markdown from the agent: send it as plain text.
        return await self._send(chat_id, prompt.text, target, keyboard=keyboard, plain=True)

    async def _send(
        self,
        chat_id: str,
        text: str,
        target: Mapping[str, str],
        *,
        reply_to: str | None = None,
        keyboard: InlineKeyboardMarkup | None = None,
        plain: bool = False,
    ) -> DeliveryResult:
        thread = _int_or_none(target.get("thread_id"))
        reply = _int_or_none(reply_to)
        params = ReplyParameters(message_id=reply, allow_sending_without_reply=True) if reply else None

        def call(body: str, parse_mode: str | None) -> Awaitable[Message]:
            return self._bot.send_message(
                chat_id=chat_ref(chat_id),
                text=body,
                parse_mode=parse_mode,
                message_thread_id=thread,
                reply_parameters=params,
                reply_markup=keyboard,
                request_timeout=REQUEST_TIMEOUT,
            )

        return await self._run(chat_id, text, call, sending=True, plain=plain)

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        ident = _int_or_none(message_id)
        if ident is None:
            return Rejected(f"not a Telegram message id: {message_id!r}")

        def call(body: str, parse_mode: str | None) -> Awaitable[Message | bool]:
            return self._bot.edit_message_text(
                chat_id=chat_ref(chat_id),
                message_id=ident,
                text=body,
                parse_mode=parse_mode,
                request_timeout=REQUEST_TIMEOUT,
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
            except TelegramBadRequest as exc:
                if PARSE_ERROR not in exc.message.lower():
                    raise
                log.warning("Telegram refused the HTML rendering (%s); sending plain text", exc.message)
                sent = await call(text, None)
        except (TimeoutError, TelegramAPIError, AiogramError) as exc:
            return self._classify(chat_id, exc, sending=sending)
        return Delivered(str(sent.message_id) if isinstance(sent, Message) else None)

    def _classify(self, chat_id: str, exc: BaseException, *, sending: bool) -> DeliveryResult:
        reason = self._reason(exc)
        if isinstance(exc, TelegramRetryAfter):
            self._held[chat_id] = time.monotonic() + exc.retry_after
            return RetryLater(reason, float(exc.retry_after), scope="chat")
        if isinstance(exc, TelegramBadRequest) and NOT_MODIFIED in exc.message.lower():
            return Delivered()
        if isinstance(exc, TelegramMigrateToChat):
            return Rejected(f"the group became supergroup {exc.migrate_to_chat_id}: {reason}")
        if isinstance(exc, TelegramBadRequest | TelegramForbiddenError | TelegramNotFound):
            return Rejected(reason)
        if isinstance(exc, TelegramUnauthorizedError):
            return RetryLater(f"the bot token was refused ({reason}); check platforms.telegram", 60.0)
        if isinstance(exc, RestartingTelegram):
            return RetryLater(reason, 1.0)
        if isinstance(exc, TelegramNetworkError) and isinstance(exc.__cause__, ClientConnectorError):
            return RetryLater(reason, 0.0)  # the request never left this machine
        if isinstance(exc, TelegramNetworkError | TelegramServerError | ClientDecodeError | TimeoutError):
            return Ambiguous(reason) if sending else RetryLater(reason, 0.0)
        return Rejected(reason)

    async def send_typing(self, chat_id: str, target: Mapping[str, str]) -> DeliveryResult | None:
        if self._hold_left(chat_id) > 0:
            return None
        try:
            await self._bot.send_chat_action(
                chat_id=chat_ref(chat_id),
                action="typing",
                message_thread_id=_int_or_none(target.get("thread_id")),
                request_timeout=REQUEST_TIMEOUT,
            )
        except TelegramRetryAfter as exc:
            self._held[chat_id] = time.monotonic() + exc.retry_after
            return RetryLater(self._reason(exc), float(exc.retry_after), scope="chat")
        except (TelegramAPIError, AiogramError) as exc:
            log.debug("typing indicator failed: %s", self._reason(exc))
        return None

    async def delete_message(self, chat_id: str, message_id: str, target: Mapping[str, str]) -> bool:
        ident = _int_or_none(message_id)
        if ident is None or self._hold_left(chat_id) > 0:
            return False
        try:
            return await self._bot.delete_message(
                chat_id=chat_ref(chat_id), message_id=ident, request_timeout=REQUEST_TIMEOUT
            )
        except TelegramRetryAfter as exc:
            self._held[chat_id] = time.monotonic() + exc.retry_after
            return False
        except (TelegramAPIError, AiogramError) as exc:
            log.info("could not delete Telegram message %s: %s", message_id, self._reason(exc))
            return False
