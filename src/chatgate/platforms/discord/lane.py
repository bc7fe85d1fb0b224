"""Discord's intake: gateway events and catch-up history, admitted in order per channel.

The events the lane handles reach ``on_event`` from discord.py's table of parsers, which the
adapter hooks (``adapter.HOOKED_EVENTS``): discord.py has decoded the frame, and its own parse
of those events (a ``Message`` object, an ``Interaction``), which the gateway never used, does
not run; its channel cache still comes from every other event. A MESSAGE_CREATE or
INTERACTION_CREATE becomes work in its channel's queue (``PerKeyQueues``), so one channel's
events are admitted in arrival order and different channels concurrently. A message is
admitted before anything about it is shown; only then is its id noted for catch-up. A
RESUME replays missed events: the store recognizes each by its delivery id (the message or
interaction id) and it runs once. A READY starts a fresh session, which replays nothing:
catch-up work for every recently active channel goes into the queues right then, ahead of
that session's live events, and reads ``GET /channels/{id}/messages?after=<last admitted>``.
The lane holds at most ``MAX_PENDING`` events; beyond them a message is left on Discord and
its channel is read back the same way once the lane drains (``overflow.py``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from msgspec.structs import replace

from chatgate.domain.errors import PlatformCallError
from chatgate.domain.inbound import Inbound
from chatgate.domain.tasks import cancel_and_wait
from chatgate.engine.ports import WAIT_UNTIL_STOPPED, Admitted, Intake, Refused, Unavailable, Undecodable
from chatgate.platforms.discord.catchup import ChannelBook, read_history
from chatgate.platforms.discord.decode import (
    TRANSPORT,
    Addressing,
    Bad,
    ChannelInfo,
    decode_edit,
    decode_message,
    written_by_a_bot,
)
from chatgate.platforms.discord.interactions import InteractionTokens, ephemeral, response_for
from chatgate.platforms.discord.outbound import DiscordOutbound
from chatgate.platforms.discord.overflow import Overflow
from chatgate.platforms.discord.rest import DiscordRest
from chatgate.platforms.discord_wire.interaction import UnsupportedInteraction, decode_interaction
from chatgate.platforms.kit.per_key import PerKeyQueues
from chatgate.platforms.kit.skipped import Skipped

log = logging.getLogger(__name__)
PLATFORM = "discord"
INTERACTION_PATIENCE = 1.0
"""An interaction is answered within 3 s: admission may wait this long for the store."""
HISTORY_PAGE = 100
MAX_CATCH_UP_PAGES = 50
"""At most 5,000 messages per channel are read back after downtime."""
CHANNEL_CACHE = 1024
MAX_PENDING = 4096
"""Events queued or running in the lane at most (each holds its decoded frame)."""
READ_BACK_RETRY_SECONDS = 5.0


async def _deferred(early: asyncio.Future[bool] | None) -> bool:
    """Whether the interaction was deferred before its turn came (see ``_interaction_frame``)."""
    if early is None:
        return False
    try:
        return await asyncio.wait_for(asyncio.shield(early), 10.0)
    except TimeoutError:
        return False


class Access:
    """``allow_users`` or any of ``allow_roles`` (guild members); admission checks users again."""

    def __init__(self, allow_all: bool, users: frozenset[str], roles: frozenset[str]) -> None:
        self.allow_all, self.users, self.roles = allow_all, users, roles

    def refuses(self, user_id: str, roles: list[str]) -> bool:
        if self.allow_all or not self.roles:
            return False  # admission's allowlist decides alone
        return user_id not in self.users and not self.roles.intersection(roles)


class DiscordLane:
    def __init__(
        self,
        intake: Intake,
        rest: DiscordRest,
        outbound: DiscordOutbound,
        book: ChannelBook,
        access: Access,
        cached_channel: Callable[[str], ChannelInfo | None],
        guild_name: Callable[[str], str | None],
    ) -> None:
        self._intake, self._rest, self._outbound, self.book = intake, rest, outbound, book
        self._access = access
        self._cached_channel = cached_channel
        self._guild_name = guild_name
        self.rules: Addressing | None = None
        """Set once the bot's id is known (after login)."""
        self.tokens = InteractionTokens()
        self._max_pending = MAX_PENDING
        self.queues = PerKeyQueues(max_pending=MAX_PENDING, name="discord")
        self.overflow = Overflow()
        self._retry: asyncio.TimerHandle | None = None
        self._fetched: OrderedDict[str, ChannelInfo] = OrderedDict()
        self.accepting = True
        self._backlog: dict[str, int] = {}
        """Work queued or running per channel (entries go when they reach zero)."""
        self.catch_ups = 0
        self._deferrals: set[asyncio.Task[None]] = set()

    # ---------------------------------------------------------------- frames

    def on_event(self, event: str, data: Any) -> None:
        """A gateway dispatch discord.py read (the adapter's parser hook, ``HOOKED_EVENTS``).

        Synchronous, in the order discord.py reads frames: each event's work is queued before
        the next frame is read, so a READY's catch-up goes ahead of that session's live events."""
        if not self.accepting or self.rules is None or not isinstance(data, dict):
            return
        if event in ("MESSAGE_CREATE", "MESSAGE_UPDATE") and written_by_a_bot(data, self.rules.bot_id):
            return  # decoding would skip it: not worth a place in the channel's queue (our echoes)
        if event == "READY":
            self._queue_catch_up()
            return
        if event == "INTERACTION_CREATE":
            self._interaction_frame(data)
            return
        channel = str(data.get("channel_id"))
        if event == "MESSAGE_CREATE":
            message_id = str(data.get("id") or "")
            if message_id.isdigit() and not self.book.knows(channel):  # its first message, queued or left:
                self.book.note(channel, str(int(message_id) - 1))  # a restart reads it back, too
            if self.overflow.full or self.overflow.holds(channel):
                self.overflow.leave(channel, message_id)  # none goes ahead until the lane drains
            elif not self._put(channel, lambda: self._admit_message(data)):
                self.overflow.leave(channel, message_id)
            return
        if event == "MESSAGE_UPDATE":
            work: Callable[[], Awaitable[None]] = lambda: self._admit_message(data, edit=True)  # noqa: E731
        elif event == "MESSAGE_DELETE":
            work = lambda: self._record_deletion(data)  # noqa: E731
        else:
            return
        if self.overflow.holds(channel) or not self._put(channel, work):
            self.overflow.lose()

    def _read_back(self) -> None:
        """Once the lane has drained to half, queue each left channel's catch-up."""
        half = max(1, self._max_pending // 2)  # ``pending`` still counts the work ending now
        waiting = self.overflow.waiting()
        if not self.accepting or not (waiting or self.overflow.full) or self.queues.pending > half:
            return  # stopping: what is left is read back at the next start (the channel book)
        for channel, after in waiting:
            if not self._put(channel, lambda c=channel, a=after: self._read_channel_back(c, a)):  # type: ignore[misc]
                return
            self.overflow.reading(channel)
        self.overflow.drained()

    def _put(self, channel: str, work: Callable[[], Awaitable[None]]) -> bool:
        """Queue ``work`` behind the channel's earlier work, counting the channel's backlog;
        ``False`` when the lane is full (nothing is queued)."""

        async def counted() -> None:
            try:
                await work()
            finally:
                left = self._backlog.get(channel, 1) - 1
                if left > 0:
                    self._backlog[channel] = left
                else:
                    self._backlog.pop(channel, None)
                self._read_back()

        if not self.queues.try_put(channel, counted):
            return False
        self._backlog[channel] = self._backlog.get(channel, 0) + 1
        return True

    async def _record_deletion(self, data: dict[str, Any]) -> None:
        """A deleted message is recorded with why (the rejected log, as on Slack): the agent is
        not told, and a reply already sent stays. Nothing redelivers it, so it is best effort."""
        message = str(data.get("id") or "")
        if self._outbound.deleted_by_us(message):
            return  # a preview this process took away
        channel = data.get("channel_id")
        reason = f"message {message} deleted in channel {channel} (recorded; the agent is not told)"
        event = Undecodable(TRANSPORT, reason, f"{message}:delete" if message else None, platform=PLATFORM)
        await self._intake.submit(event, patience=WAIT_UNTIL_STOPPED)

    def _interaction_frame(self, data: dict[str, Any]) -> None:
        """Queue the interaction in order; when its channel has work ahead (a catch-up after a
        restart can take longer than Discord's 3 seconds), defer it now and answer it later."""
        received = time.monotonic()
        channel = str(data.get("channel_id") or "")
        custom_id = data.get("data", {}).get("custom_id") if isinstance(data.get("data"), dict) else None
        press = data.get("type") == 3 and isinstance(custom_id, str) and custom_id.startswith("hp1:")
        early: asyncio.Future[bool] | None = None
        if self._backlog.get(channel, 0) > 0 and not press and data.get("id") and data.get("token"):
            early = asyncio.get_running_loop().create_future()
        if self.overflow.holds(channel) or not self._put(
            channel, lambda: self._admit_interaction(data, received, early)
        ):
            self.overflow.lose()  # Discord tells the user the app did not respond
            return
        if early is not None:
            self._spawn(self._defer(str(data["id"]), str(data["token"]), early))

    async def _defer(self, iid: str, token: str, early: asyncio.Future[bool]) -> None:
        done = False
        try:
            done = await self._outbound.respond(iid, token, {"type": 5})
        finally:
            if not early.done():
                early.set_result(done)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work, name="chatgate-discord-defer")
        self._deferrals.add(task)
        task.add_done_callback(self._deferrals.discard)

    async def aclose(self) -> None:
        """Cancel queued and running intake work and deferrals (none was acknowledged)."""
        self.accepting = False
        if self._retry is not None:
            self._retry.cancel()
        await cancel_and_wait(list(self._deferrals))
        await self.queues.aclose()

    # ---------------------------------------------------------------- messages

    async def channel_info(self, channel_id: str, guild_id: str | None, *, live: bool) -> ChannelInfo:
        """A live message without a guild is a DM; a history entry never names its guild."""
        found = self._cached_channel(channel_id) or self._fetched.get(channel_id)
        if found is not None:
            return found
        if guild_id is None and live:
            return ChannelInfo(channel_id, 1)
        try:
            data = await self._rest.call("GET", f"/channels/{channel_id}")
        except PlatformCallError as exc:
            log.warning(
                "could not read Discord channel %s (%s); treating it as a guild channel", channel_id, exc
            )
            return ChannelInfo(channel_id, 0, guild_id) if guild_id else ChannelInfo(channel_id, 1)
        guild_id = str(data["guild_id"]) if data.get("guild_id") else guild_id
        parent = self._cached_channel(str(data.get("parent_id"))) if data.get("parent_id") else None
        info = ChannelInfo(
            channel_id, int(data.get("type") or 0), guild_id,
            self._guild_name(guild_id) if guild_id else None, data.get("name"), data.get("topic"),
            str(data["parent_id"]) if data.get("parent_id") else None, parent.name if parent else None,
        )  # fmt: skip
        self._fetched[channel_id] = info
        while len(self._fetched) > CHANNEL_CACHE:
            self._fetched.popitem(last=False)
        return info

    async def _admit_message(
        self, data: dict[str, Any], channel: ChannelInfo | None = None, *, edit: bool = False
    ) -> None:
        assert self.rules is not None
        if channel is None:
            guild = data.get("guild_id")
            channel = await self.channel_info(
                str(data.get("channel_id")), str(guild) if guild else None, live=True
            )
        decode = decode_edit if edit else decode_message
        decoded = decode(data, channel, self.rules, received_at=time.time())
        if isinstance(decoded, Skipped):
            return
        if isinstance(decoded, Bad):
            event: Any = Undecodable(TRANSPORT, decoded.reason, decoded.delivery_id, platform=PLATFORM)
        else:
            roles = (data.get("member") or {}).get("roles") or []
            event = decoded
            if self._access.refuses(decoded.source.user_id or "", [str(r) for r in roles]):
                reason = (
                    "unauthorized: neither in platforms.discord.allow_users nor holding an allow_roles role"
                )
                event = Undecodable(TRANSPORT, reason, decoded.delivery_id, platform=PLATFORM)
        await self.book.start_channel(channel.id, str(data.get("id")))  # its entry is durable
        if isinstance(event, Inbound) and not edit and self.book.reads_back:
            event = replace(event, replayable=True)  # read back after a power cut (ChannelBook)
        answer = await self._intake.submit(event, patience=WAIT_UNTIL_STOPPED)
        if isinstance(answer, Unavailable):
            log.warning(
                "Discord message %s not saved (%s); catch-up reads it at the next start",
                data.get("id"),
                answer.reason,
            )
            return
        if isinstance(answer, Refused):
            log.info("skipped Discord message %s (%s): %s", data.get("id"), answer.code, answer.message,
                     extra={"platform": PLATFORM, "code": answer.code})  # fmt: skip
        if not edit:
            self.book.note(channel.id, str(data.get("id")))
        if isinstance(answer, Admitted) and answer.new and not edit and isinstance(event, Inbound):
            await self._outbound.mark_working(channel.id, str(data.get("id")))

    # ---------------------------------------------------------------- interactions

    async def _admit_interaction(
        self, data: dict[str, Any], received: float, early: asyncio.Future[bool] | None = None
    ) -> None:
        iid, token = str(data.get("id") or ""), str(data.get("token") or "")
        body = json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogatepass")
        decoded = decode_interaction(body, received_at=time.time(), transport=TRANSPORT)
        if isinstance(decoded, UnsupportedInteraction):
            event = Undecodable(TRANSPORT, decoded.reason, f"discord:interaction:{iid}" if iid else None,
                                platform=PLATFORM)  # fmt: skip
            await self._intake.submit(event, patience=INTERACTION_PATIENCE)
            if iid and token and data.get("type") in (2, 3, 5):
                told = f"Sorry, I cannot take this: {decoded.reason}"
                if await _deferred(early):  # answered "thinking…" already: a second answer is refused
                    await self._outbound.follow_up(token, ephemeral(told)["data"]["content"], ephemeral=True)
                else:
                    await self._outbound.respond(iid, token, ephemeral(told))
            return
        user = decoded.source.user_id or ""
        roles = [str(r) for r in (data.get("member") or {}).get("roles") or []]
        event2: Any = decoded
        if self._access.refuses(user, roles):
            event2 = Undecodable(TRANSPORT, "unauthorized: not in allow_users or allow_roles",
                                 decoded.delivery_id, platform=PLATFORM)  # fmt: skip
        answer = await self._intake.submit(event2, patience=INTERACTION_PATIENCE)
        body_out = response_for(None if isinstance(answer, Unavailable) else answer)
        if body_out is None:
            return  # a RESUME replay: answered the first time
        if isinstance(answer, Admitted) and body_out.get("type") == 5:
            self.tokens.remember(decoded.source.chat_id or "", user, token, received)
        if not await _deferred(early):
            await self._outbound.respond(iid, token, body_out)
        elif body_out.get("type") == 4:
            # Deferred already: the refusal (or outage) is told by an ephemeral follow-up.
            await self._outbound.follow_up(token, body_out["data"]["content"], ephemeral=True)

    # ---------------------------------------------------------------- catch-up

    def _queue_catch_up(self) -> None:
        # Queued before this session's first live event of each channel can be (``on_event``
        # runs as discord.py reads the READY): a channel's catch-up is admitted first, so its
        # recorded id never passes a message that is not admitted yet.
        for channel_id, last in self.book.recent():
            if self.overflow.holds(channel_id):
                continue  # its read-back, once the lane drains, covers what this session missed
            if not self._put(channel_id, lambda c=channel_id, m=last: self._read_channel_back(c, m)):  # type: ignore[misc]
                self.overflow.leave(channel_id, str(int(last) + 1))

    async def _catch_up(self, channel_id: str, after: str) -> tuple[bool, str]:
        """Admit what the channel got after ``after`` while we were away, oldest first: whether
        it read to the end (not a failed read, not the page cap), and the last id it read."""
        self.catch_ups += 1
        channel = await self.channel_info(channel_id, None, live=False)
        for _ in range(MAX_CATCH_UP_PAGES):
            page = await read_history(self._rest, channel_id, after, HISTORY_PAGE)
            if page is None:
                return False, after
            for data in sorted(page, key=lambda m: int(m["id"])):
                if self.accepting:
                    await self._admit_message({**data, "channel_id": channel_id}, channel)
            if page:
                after = max((str(m["id"]) for m in page), key=int)
            if len(page) < HISTORY_PAGE:
                return True, after
        return False, after

    async def _read_channel_back(self, channel_id: str, after: str) -> None:
        """A channel's catch-up; a held channel stays held until one ends with nothing left
        behind it, and one that stopped early is tried again later (``overflow.py``)."""
        try:
            complete, last = await self._catch_up(channel_id, after)
        except Exception:
            log.exception("reading back Discord channel %s failed", channel_id)
            complete, last = False, after
        if self.accepting and self.overflow.read(channel_id, last, complete) and not complete:
            self._retry_later()

    def _retry_later(self) -> None:
        """One timer for every channel held again (cancelled by ``aclose``): when no other work
        ends meanwhile, it is what calls ``_read_back``."""
        loop = asyncio.get_running_loop()
        if self._retry is None or self._retry.when() <= loop.time():
            self._retry = loop.call_later(READ_BACK_RETRY_SECONDS, self._read_back)
