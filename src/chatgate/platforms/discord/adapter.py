"""The native Discord adapter: discord.py's gateway in, one-shot REST calls out.

discord.py keeps the gateway session (IDENTIFY, heartbeats, RESUME, reconnects) and the
guild and channel cache; the adapter takes the message and interaction events from
discord.py's parser table, decoded but not parsed into discord.py's objects (``lane.py``),
and decodes them itself, so a message and an interaction decode exactly like the relay
lane's. Message operations go out through ``rest.py`` (one call, one honest answer) and
finals through ``engine.ports.deliver_final``; an interaction's reply follows up on its
token while it is valid, else goes to the channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from chatgate.domain.errors import PlatformCallError
from chatgate.domain.inbound import Attachment
from chatgate.domain.media import FileBody
from chatgate.domain.outbound import REPLY_VIA_KEY, Capabilities, Delivered, DeliveryResult, Rejected
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.outfiles import OutFile
from chatgate.domain.source import Source
from chatgate.domain.store_roles import Cursors
from chatgate.domain.tasks import cancel_and_wait
from chatgate.engine.ports import AdapterState, Intake, deliver_final, marked_text
from chatgate.platforms.discord.catchup import ChannelBook
from chatgate.platforms.discord.commands import register_commands
from chatgate.platforms.discord.decode import Addressing, ChannelInfo
from chatgate.platforms.discord.endpoint import point_gateway, point_rest
from chatgate.platforms.discord.lane import PLATFORM, Access, DiscordLane
from chatgate.platforms.discord.outbound import DiscordOutbound
from chatgate.platforms.discord.rest import DiscordRest
from chatgate.platforms.discord.section import DiscordSection
from chatgate.platforms.kit.forwarding import ForwardsToOutbound

log = logging.getLogger(__name__)
USER_AGENT = "DiscordBot (https://github.com/chatgate/chatgate, 1) chatgate"
FLUSH_INTERVAL = 1.0
RETRY_DELAYS = (1.0, 2.0, 5.0, 10.0, 30.0)
HOOKED_EVENTS = ("READY", "MESSAGE_CREATE", "MESSAGE_UPDATE", "MESSAGE_DELETE", "INTERACTION_CREATE")
"""Gateway events the lane takes from discord.py's parser table (``DiscordAdapter._hook_parsers``)."""
KEEP_DISCORD_PARSE = frozenset({"READY"})
"""Of those, the ones discord.py must still parse itself (READY sets up its session and cache)."""


def _info(channel: Any) -> ChannelInfo | None:
    """A discord.py channel (text, thread, forum, DM) as what decoding needs of it."""
    if channel is None:
        return None
    kind = getattr(channel, "type", None)
    guild = getattr(channel, "guild", None)
    parent = getattr(channel, "parent", None)
    return ChannelInfo(
        id=str(channel.id),
        type=int(getattr(kind, "value", 0)),
        guild_id=str(guild.id) if guild is not None else None,
        guild_name=getattr(guild, "name", None),
        name=getattr(channel, "name", None),
        topic=getattr(channel, "topic", None),
        parent_id=str(channel.parent_id) if getattr(channel, "parent_id", None) else None,
        parent_name=getattr(parent, "name", None),
    )


class DiscordAdapter(ForwardsToOutbound[DiscordOutbound]):
    platform = PLATFORM
    capabilities = Capabilities(
        edit=True,
        buttons=True,
        threads=True,
        max_length=2000,
        length_unit="chars",
        markdown="markdown",
        typing=True,
        edit_interval=1.0,
        # Discord's documented limits: 5 messages per 5 s per channel, 50 requests per second
        # per bot; delivery.rate_limits.discord overrides them.
        chat_min_interval=1.0,
        platform_max_rate=50.0,
        max_upload_bytes=10 * 1024 * 1024,  # a bot's attachments in a server without boosts
    )

    def __init__(
        self,
        section: DiscordSection,
        token: str,
        cursors: Cursors,
        intake: Intake,
        *,
        duplicate_marker: str = "",
    ) -> None:
        self._section = section
        self._token = token
        self._duplicate_marker = duplicate_marker
        self._rest = DiscordRest(token, section.api_base, USER_AGENT)
        self._outbound = DiscordOutbound(self._rest, status_reactions=section.status_reactions)
        self._client: Any = None
        self._book = ChannelBook(cursors, "discord:channels", section.catch_up_hours)
        # With allow_roles the adapter decides (a member's roles are only on the Discord event).
        access = Access(section.allow_all, frozenset(section.allow_users), frozenset(section.allow_roles))
        self.lane = DiscordLane(
            intake, self._rest, self._outbound, self._book, access, self._cached, self._guild
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._detail = "not started"
        self._commands_done = False
        self.bot_id: str | None = None

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        point_rest(self._section.api_base)
        await self._rest.open()
        await self._book.load()
        self._detail = "connecting"
        self._tasks = [
            asyncio.create_task(self._supervise(), name="chatgate-discord-gateway"),
            asyncio.create_task(self._flush_book(), name="chatgate-discord-catch-up-record"),
        ]

    def _make_client(self) -> Any:
        import discord

        # The gateway never joins voice: discord.py's "PyNaCl/davey is not installed, voice will
        # NOT be supported" warnings at every start would only alarm the operator.
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
        intents = discord.Intents.default()
        intents.message_content = True  # a privileged intent: enable it in the developer portal
        client = discord.Client(intents=intents, max_messages=None, chunk_guilds_at_startup=False)
        self._hook_parsers(client)
        client.event(self._ready(client))
        return client

    def _hook_parsers(self, client: Any) -> None:
        """Route the events the lane handles from discord.py's parser table straight to the lane.

        discord.py reads each frame, decodes it and calls ``parsers[event](data)`` before it
        reads the next. Hooked there, the lane sees each event once, decoded, in order, with no
        task of its own; discord.py's parse of messages and interactions (objects the gateway
        never used) is skipped, and its READY parse still runs first."""
        parsers: dict[str, Callable[[Any], None]] = client._connection.parsers
        on_event = self.lane.on_event
        for event in HOOKED_EVENTS:
            own = parsers.get(event) if event in KEEP_DISCORD_PARSE else None

            def hook(data: Any, event: str = event, own: Callable[[Any], None] | None = own) -> None:
                if own is not None:
                    own(data)
                try:
                    on_event(event, data)
                except Exception:  # raised into discord.py, it would drop the connection
                    log.exception("Discord: the %s event could not be queued", event)

            parsers[event] = hook

    def _ready(self, client: Any) -> Any:
        async def on_ready() -> None:
            self._detail = f"connected as {client.user}"
            if self._section.register_commands and not self._commands_done and client.application_id:
                self._commands_done = True
                guilds = tuple(self._section.command_guilds)
                await register_commands(self._rest, str(client.application_id), guilds)

        return on_ready

    async def _supervise(self) -> None:
        """Log in and keep the gateway connected; discord.py resumes and reconnects inside."""
        import discord

        failures = 0
        while True:
            self._client = client = self._make_client()
            try:
                await client.login(self._token)
                self.bot_id = str(client.user.id)
                self._outbound.application_id = str(client.application_id)
                self.lane.rules = Addressing(
                    self.bot_id, self._section.require_mention,
                    frozenset(self._section.free_response_channels), frozenset(self._section.allow_channels),
                )  # fmt: skip
                gateway = await self._rest.call("GET", "/gateway/bot")
                point_gateway(str(gateway["url"]))
                failures = 0
                await client.connect(reconnect=True)
                return
            except discord.LoginFailure as exc:
                self._detail = f"the bot token was refused ({exc}); check platforms.discord.token_env"
                log.error("Discord: %s", self._detail)
                return
            except (discord.DiscordException, PlatformCallError, OSError) as exc:
                self._detail = f"cannot reach Discord ({type(exc).__name__}: {exc}); retrying"
                log.warning("Discord: %s", self._detail)
            except Exception as exc:  # e.g. discord.py failing on an event it cannot parse
                self._detail = f"the Discord connection failed ({type(exc).__name__}); reconnecting"
                log.exception("Discord: %s", self._detail)
            finally:
                with contextlib.suppress(Exception):
                    await client.close()
            await asyncio.sleep(RETRY_DELAYS[min(failures, len(RETRY_DELAYS) - 1)])
            failures += 1

    async def _flush_book(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL)
            await self._book.flush()

    def stop_intake(self) -> None:
        self.lane.accepting = False

    async def aclose(self, budget: float = 5.0) -> None:
        self.lane.accepting = False
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), budget)
        await cancel_and_wait(self._tasks)
        await self.lane.aclose()
        with contextlib.suppress(Exception):
            await self._book.flush()
        await self._rest.aclose()
        self._detail = "stopped"

    def state(self) -> AdapterState:
        client = self._client
        connected = client is not None and client.is_ready() and not client.is_closed()
        return AdapterState(bool(connected), self._detail)

    def _cached(self, channel_id: str) -> ChannelInfo | None:
        client = self._client
        if client is None or not channel_id.isdigit():
            return None
        return _info(client.get_channel(int(channel_id)))

    def _guild(self, guild_id: str) -> str | None:
        client = self._client
        guild = client.get_guild(int(guild_id)) if client is not None and guild_id.isdigit() else None
        return getattr(guild, "name", None)

    # ------------------------------------------------------------ outbound

    async def deliver(self, row: OutboxRow) -> DeliveryResult:
        if row.target.get(REPLY_VIA_KEY) == "interaction" or row.kind == "command":
            token = self.lane.tokens.valid(row.chat_id, row.target.get("user_id"))
            if token is not None:
                sent = await self._outbound.follow_up(token, marked_text(row, self._duplicate_marker))
                if not isinstance(sent, Rejected):
                    return sent
                self.lane.tokens.forget(row.chat_id, row.target.get("user_id"))  # expired early: the channel
        result = await deliver_final(self, row, self._duplicate_marker)
        if isinstance(result, Delivered) and row.kind == "final":
            await self._outbound.mark_answered(row.chat_id, row.in_reply_to)
        return result

    async def send_file(self, row: OutboxRow, file: OutFile, body: FileBody, caption: str) -> DeliveryResult:
        """``engine.ports.FilePlatform``: an attachment message, deduplicated by Discord through the
        row's nonce, so its caption is the row's own text (a resend is never a second message)."""
        return await self._outbound.send_file(
            row.chat_id, file, body, row.text, row.in_reply_to, f"cg{row.id}"
        )

    def open_attachment(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """``engine.ports.MediaSource``: an attachment's file, from its CDN URL (``rest.py``)."""
        return self._rest.download(attachment.ref)

    async def draft(self, source: Source, in_reply_to: str | None, text: str) -> None:
        return None  # previews are edits of a sent message (capabilities.drafts is False)
