"""The native Telegram adapter: long polling in, streaming edits and finals out.

Inbound: ``Poller`` fetches updates, ``decode`` turns each into an ``Inbound``,
admission commits it, and only then does the offset advance (and a button
press get its ``answerCallbackQuery``). Updates of different chats in one batch
are admitted concurrently; within a chat, in update order. Each message is
admitted ``replayable``: Telegram hands back every update below the offset, so its
admission needs no fsync of its own, and the batch's offset advances only once the
intake ``settle``s them. Not with ``drop_pending_updates``: a start would drop them.

Outbound: ``TelegramOutbound`` implements the ``EditablePlatform`` operations the
stream consumer uses for previews; ``deliver`` puts an outbox row on Telegram
through ``engine.ports.deliver_final`` (editing the preview into the final).

``/command@ThisBot`` is rewritten to ``/command`` here (the bot's username is
known only after ``getMe``), so admission parses it like any command; a command
addressed to another bot stays ordinary text.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from msgspec.structs import replace

from chatgate.domain.commands import CONTROL_COMMANDS
from chatgate.domain.errors import NotSent, PlatformCallError
from chatgate.domain.inbound import Attachment, Inbound
from chatgate.domain.media import FileBody
from chatgate.domain.outbound import Capabilities, DeliveryResult
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.outfiles import OutFile
from chatgate.domain.source import Source
from chatgate.domain.store_roles import Cursors
from chatgate.domain.tasks import cancel_and_wait
from chatgate.engine.ports import (
    WAIT_BRIEFLY,
    AdapterState,
    Admitted,
    Intake,
    Refused,
    Unavailable,
    Undecodable,
    deliver_final,
)
from chatgate.platforms.kit.forwarding import ForwardsToOutbound
from chatgate.platforms.telegram.decode import (
    ALLOWED_UPDATES,
    PLATFORM,
    TRANSPORT,
    UnsupportedUpdate,
    decode_update,
)
from chatgate.platforms.telegram.errors import FilePart, bot_id_of
from chatgate.platforms.telegram.files import open_file
from chatgate.platforms.telegram.outbound import REQUEST_TIMEOUT, TelegramOutbound
from chatgate.platforms.telegram.poller import Poller, Raw
from chatgate.platforms.telegram.section import TelegramSection

if TYPE_CHECKING:
    from chatgate.platforms.telegram.botapi import BotApi

log = logging.getLogger(__name__)
REFUSED_TEXT = "Sorry, you are not allowed to use this bot."


def _callback_text(answer: Admitted | Refused) -> str | None:
    """What a tapped button's spinner says: why it was refused, or that an approval tap lost."""
    if isinstance(answer, Refused):
        return REFUSED_TEXT if answer.code == "unauthorized" else None
    # An approval tap that lost (expired, already answered, not allowed) is told so, privately.
    return answer.answer.text if answer.answer is not None and not answer.answer.won else None


def _chat_of(raw: Raw) -> str:
    """The chat an update belongs to, so one chat's updates are admitted in order."""
    update = raw.update
    if update is None:
        return ""
    if update.message is not None:
        return str(update.message.chat.id)
    query = update.callback_query
    if query is not None and query.message is not None:
        return str(query.message.chat.id)
    return ""


class TelegramAdapter(ForwardsToOutbound[TelegramOutbound]):
    platform = PLATFORM
    capabilities = Capabilities(
        edit=True,
        drafts=False,
        buttons=True,
        threads=True,
        max_length=4096,
        length_unit="utf16",
        markdown="html",
        typing=True,
        edit_interval=1.0,
        # Telegram's documented limits (Bot API FAQ); delivery.rate_limits.telegram overrides them.
        chat_min_interval=1.0,
        platform_max_rate=30.0,
        group_max_per_minute=20,
        max_upload_bytes=50_000_000,  # the Bot API's limit for a bot's sendDocument
    )

    def __init__(
        self,
        section: TelegramSection,
        token: str,
        store: Cursors,
        intake: Intake,
        *,
        duplicate_marker: str = "",
    ) -> None:
        self.bot_id = bot_id_of(token)  # ValueError for a malformed token
        self._api: BotApi | None = None
        """Created by ``start``: the HTTP client is loaded once this process holds the token's lock."""
        self._token = token
        self._section = section
        self._duplicate_marker = duplicate_marker
        self._intake = intake
        self._replayable = not section.drop_pending_updates
        """Whether Telegram hands back an update whose admission a power cut took (see the module)."""
        self.username: str | None = None
        self._outbound = TelegramOutbound(self._call, self.redact, self._upload)
        self._connected = False
        self._detail = "not started"
        self._commands_set = False
        self._commands: asyncio.Task[None] | None = None
        self.poller = Poller(
            self._call,
            store,
            f"telegram:{self.bot_id}:offset",
            self._handle_batch,
            poll_timeout=section.poll_timeout_seconds,
            allowed_updates=list(ALLOWED_UPDATES),
            drop_pending=section.drop_pending_updates,
            on_connect=self._on_connect,
            on_state=self._set_state,
            redact=self.redact,
        )

    @staticmethod
    def is_group_chat(chat_id: str) -> bool:
        """Groups, supergroups and channels have negative ids (or an ``@name``); users positive ones."""
        return chat_id.startswith(("-", "@"))

    async def _call(self, method: str, request_timeout: float, /, **params: Any) -> Any:
        if self._api is None:
            raise NotSent(f"{method}: the Telegram adapter is not started")
        return await self._api.call(method, request_timeout, **params)

    async def _upload(
        self, method: str, request_timeout: float, field: str, file: FilePart, /, **params: Any
    ) -> Any:
        if self._api is None:
            raise NotSent(f"{method}: the Telegram adapter is not started")
        return await self._api.upload(method, request_timeout, field, file, **params)

    def redact(self, text: str) -> str:
        """Errors may quote the request URL, which holds the token: never let it out."""
        return text.replace(self._token, "<token>") if self._token else text

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._open_api()
        self._detail = "connecting"
        await self.poller.wait_stopped(REQUEST_TIMEOUT)  # a poll stopped by a lost lock ended
        self.poller.start()

    async def start_sending(self) -> None:
        """A fleet's standby: send replies and edit previews, but leave polling to the process
        that holds the bot's lock (only one may call getUpdates); ``start`` begins polling."""
        self._open_api()
        self.poller.skip_drop()  # drop_pending_updates is for start-up, not for a takeover
        self._set_state(True, "standby: another process of the fleet polls")

    def stop_polling(self) -> None:
        """Back to standby (the fleet lock was lost): the poll in flight is abandoned, the
        batch being admitted finishes; sending goes on."""
        self.poller.stop()
        self._set_state(True, "standby: another process of the fleet polls")

    def set_poll_guard(self, guard: Callable[[], Awaitable[bool]]) -> None:
        """Ask ``guard`` before every getUpdates; False stops polling (the fleet's lock is gone)."""
        self.poller.guard = guard

    def _open_api(self) -> None:
        from chatgate.platforms.telegram.botapi import BotApi  # aiohttp

        if self._api is None:
            self._api = BotApi(self._token, self._section.api_base)

    def stop_intake(self) -> None:
        self.poller.stop()

    async def aclose(self, budget: float = 5.0) -> None:
        """After ``stop_intake`` and the outbox flush: end polling and close the HTTP session."""
        self.poller.stop()
        await self.poller.wait_stopped(budget)
        if self._commands is not None:
            await cancel_and_wait([self._commands])
        if self._api is not None:
            await self._api.aclose()
            self._api = None
        self._connected = False
        self._detail = "stopped"

    def state(self) -> AdapterState:
        return AdapterState(self._connected, self._detail)

    def _set_state(self, connected: bool, detail: str) -> None:
        self._connected = connected
        name = f"@{self.username}" if self.username else f"bot {self.bot_id}"
        self._detail = f"{name}: {detail}"

    async def _on_connect(self) -> None:
        me = await self._call("getMe", REQUEST_TIMEOUT)
        username = me.get("username") if isinstance(me, dict) else None
        self.username = username if isinstance(username, str) else None
        self._set_state(True, "connected")
        if not self._commands_set and (self._commands is None or self._commands.done()):
            # In the background: the first getUpdates of a restart need not wait for this round trip.
            self._commands = asyncio.create_task(self._register_commands(), name="chatgate-telegram-commands")

    async def _register_commands(self) -> None:
        commands = [{"command": c.name, "description": c.summary} for c in CONTROL_COMMANDS]
        try:
            await self._call("setMyCommands", REQUEST_TIMEOUT, commands=commands)
            self._commands_set = True
        except PlatformCallError as exc:
            log.warning("could not register the bot commands: %s", self.redact(str(exc)))

    # ------------------------------------------------------------ inbound

    async def _handle_batch(self, items: list[Raw]) -> int | None:
        by_chat: dict[str, list[Raw]] = {}
        for raw in items:
            by_chat.setdefault(_chat_of(raw), []).append(raw)
        failed = await asyncio.gather(*(self._handle_chat(chat) for chat in by_chat.values()))
        if not await self._intake.settle():  # not on the disk: the offset must not confirm any
            return min(raw.update_id for raw in items)
        retry = [f for f in failed if f is not None]
        return min(retry) if retry else None

    async def _handle_chat(self, items: list[Raw]) -> int | None:
        for raw in items:
            if not await self._handle_one(raw):
                return raw.update_id
        return None

    async def _handle_one(self, raw: Raw) -> bool:
        """Admit one update; ``False`` when it must be fetched again (not committed)."""
        if raw.update is None:
            event: Inbound | Undecodable = Undecodable(
                TRANSPORT, f"an update we could not read: {raw.error}", str(raw.update_id),
                platform=PLATFORM,
            )  # fmt: skip
            callback_id = None
        else:
            decoded = decode_update(raw.update, self.bot_id, self.username)
            callback_id = decoded.callback_id
            event = (
                Undecodable(TRANSPORT, decoded.reason, str(raw.update_id), platform=PLATFORM)
                if isinstance(decoded, UnsupportedUpdate)
                else replace(decoded.inbound, replayable=self._replayable)
            )
        answer = await self._intake.submit(event, patience=WAIT_BRIEFLY)
        if isinstance(answer, Unavailable):
            log.warning(
                "Telegram update %d not saved, it will be fetched again: %s", raw.update_id, answer.reason
            )
            return False
        if isinstance(answer, Refused):
            log.info(
                "skipped Telegram update %d (%s): %s", raw.update_id, answer.code, answer.message,
                extra={"platform": PLATFORM, "code": answer.code},
            )  # fmt: skip
        if callback_id is not None:
            await self._answer(callback_id, _callback_text(answer))
        return True

    async def _answer(self, callback_id: str, text: str | None) -> None:
        """Stop the button's spinner (best effort: a query older than ~15 s cannot be answered)."""
        try:
            await self._call("answerCallbackQuery", REQUEST_TIMEOUT, callback_query_id=callback_id, text=text)
        except PlatformCallError as exc:
            log.info("could not answer callback query: %s", self.redact(str(exc)))

    # ------------------------------------------------------------ outbound

    async def deliver(self, row: OutboxRow) -> DeliveryResult:
        return await deliver_final(self, row, self._duplicate_marker)

    async def send_file(self, row: OutboxRow, file: OutFile, body: FileBody, caption: str) -> DeliveryResult:
        """``engine.ports.FilePlatform``: the agent's file as a photo or a document."""
        target = {k: str(v) for k, v in row.target.items() if isinstance(v, str | int)}
        return await self._outbound.send_file(row.chat_id, file, body, caption, target, row.in_reply_to)

    async def draft(self, source: Source, in_reply_to: str | None, text: str) -> None:
        return None  # Telegram previews are edits of a sent message (capabilities.drafts is False)

    def open_attachment(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """``engine.ports.MediaSource``: the file of a message, by its ``file_id`` (``files.py``)."""
        if self._api is None:
            raise NotSent("the Telegram adapter is not started")
        return open_file(self._call, self._api.download, attachment)
