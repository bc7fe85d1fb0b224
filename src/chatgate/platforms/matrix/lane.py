"""Matrix's intake: one /sync answer's events, admitted in order per room, rooms concurrently.

``admit_batch`` takes a sync answer (with a limited room's gap already read back by
``gaps.py``) and says whether every event it holds is committed: only then may the sync
loop store ``next_batch``. An event whose admission is ``Unavailable`` stops its room (the
rest of that room waits, in order) and the batch is fetched again from the same token;
admission recognizes what was admitted before by its delivery id.

Invites are accepted here by policy (``auto_join``), messages decoded by ``decode.py``,
reactions on prompts by ``prompts.py``; an encrypted event is refused with a reason
recorded and, once per room, a notice saying why (docs/platforms/matrix.md, E2EE).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from chatgate.domain.errors import PlatformCallError
from chatgate.domain.inbound import Inbound
from chatgate.engine.ports import WAIT_BRIEFLY, Admitted, Intake, Refused, Unavailable, Undecodable
from chatgate.platforms.kit.skipped import Skipped
from chatgate.platforms.matrix.decode import (
    PLATFORM,
    TRANSPORT,
    Addressing,
    Bad,
    RoomInfo,
    decode_message,
    delivery_id,
    relation,
    replied_to,
    thread_root,
)  # fmt: skip
from chatgate.platforms.matrix.errors import ApiRefused, RateLimited
from chatgate.platforms.matrix.outbound import MatrixOutbound
from chatgate.platforms.matrix.prompts import PromptRef, decode_reaction, prompt_ref, reacted_to
from chatgate.platforms.matrix.rooms import Rooms

log = logging.getLogger(__name__)
ENCRYPTED_TEXT = (
    "This room is end-to-end encrypted, and this gateway cannot read encrypted rooms yet, so it"
    " cannot answer here. Invite it to a room without encryption (docs/platforms/matrix.md)."
)
MAX_ENCRYPTED_NOTED = 4096
JOIN_TRIES = 3
MAX_JOIN_WAIT = 30.0
Call = Callable[..., Awaitable[dict[str, Any]]]


class JoinPolicy(msgspec.Struct, frozen=True):
    mode: str
    """``allowed``, ``anyone`` or ``off`` (``platforms.matrix.auto_join``)."""
    allow_all: bool
    pairing: bool
    users: frozenset[str]

    def accepts(self, inviter: str) -> bool:
        if self.mode == "anyone":
            return True
        if self.mode == "off":
            return False
        return self.allow_all or self.pairing or inviter in self.users


class MatrixLane:
    def __init__(
        self, intake: Intake, call: Call, rooms: Rooms, outbound: MatrixOutbound, policy: JoinPolicy
    ) -> None:
        self._intake, self._call, self.rooms, self._outbound = intake, call, rooms, outbound
        self._policy = policy
        self.rules: Addressing | None = None
        """Set once the bot's id is known (after whoami)."""
        self._told_encrypted: set[str] = set()
        self.accepting = True

    # ---------------------------------------------------------------- a sync answer

    async def admit_batch(self, rooms: dict[str, Any], live: bool) -> bool:
        """Admit what a sync answer's ``rooms`` hold; True when all of it is committed.

        ``live`` is false for the first sync of a new store: its invites are handled, its
        timelines (history from before this gateway) are not answered."""
        invites = rooms.get("invite")
        for room_id, room in (invites if isinstance(invites, dict) else {}).items():
            if not await self._invited(str(room_id), room):
                return False  # the invite is in this answer only: sync it again
        joined = rooms.get("join")
        if not live or not isinstance(joined, dict):
            return True
        for room_id, room in joined.items():
            events = _events(room, "state") + _events(room, "timeline")
            summary = room.get("summary") if isinstance(room, dict) else None
            count = summary.get("m.joined_member_count") if isinstance(summary, dict) else None
            self.rooms.observe(str(room_id), events, count if isinstance(count, int) else None)
        work = [self._admit_room(str(r), _events(room, "timeline")) for r, room in joined.items()]
        done = await asyncio.gather(*work)
        left = rooms.get("leave")
        for room_id in left if isinstance(left, dict) else {}:
            self.rooms.forget(str(room_id))
        return all(done)

    async def _admit_room(self, room_id: str, events: list[dict[str, Any]]) -> bool:
        for event in events:
            if not self.accepting:
                return False
            if not await self._admit_event(room_id, event):
                return False
        return True

    async def _invited(self, room_id: str, room: Any) -> bool:
        """Join by policy; False when the join failed for a reason that passes (a rate limit,
        an outage), so the sync answer holding the invite is fetched again."""
        assert self.rules is not None
        state = _events(room, "invite_state")
        bot = self.rules.bot_id
        mine = [e for e in state if e.get("type") == "m.room.member" and e.get("state_key") == bot]
        inviter = str(mine[-1].get("sender")) if mine else ""
        content = mine[-1].get("content") if mine else None
        if not self._policy.accepts(inviter):
            log.info("not joining Matrix room %s: invited by %s (auto_join)", room_id, inviter)
            return True
        if not await self._join(room_id, inviter):
            return False
        if isinstance(content, dict) and content.get("is_direct") is True:
            self.rooms.direct.add(room_id)
        log.info("joined Matrix room %s (invited by %s)", room_id, inviter)
        if any(e.get("type") == "m.room.encryption" for e in state):
            await self._tell_encrypted(room_id)
        return True

    async def _join(self, room_id: str, inviter: str) -> bool:
        from chatgate.platforms.matrix.api import path  # aiohttp: loaded once the adapter starts

        for _ in range(JOIN_TRIES):
            try:
                await self._call("POST", path("join", room_id), {})
                return True
            except RateLimited as exc:
                await asyncio.sleep(min(exc.retry_after, MAX_JOIN_WAIT))
            except ApiRefused as exc:
                if exc.status >= 500:
                    return False
                log.warning("could not join Matrix room %s (invited by %s): %s", room_id, inviter, exc)
                return True  # refused for good (the invite was withdrawn, the room is gone): move on
            except PlatformCallError as exc:
                log.warning("could not join Matrix room %s yet: %s", room_id, exc)
                return False
        return False

    # ---------------------------------------------------------------- one event

    async def _admit_event(self, room_id: str, event: dict[str, Any]) -> bool:
        """Admit one event; False when it is not committed (the batch is fetched again)."""
        assert self.rules is not None
        if event.get("sender") == self.rules.bot_id or not isinstance(event.get("event_id"), str):
            return True
        kind = event.get("type")
        if kind not in ("m.room.message", "m.reaction", "m.room.encrypted"):
            return True
        room = await self.rooms.info(room_id)
        decoded = await self._decode(room, event, str(kind))
        if isinstance(decoded, Skipped):
            log.debug("skipped Matrix event %s: %s", event.get("event_id"), decoded.reason)
            return True
        item: Inbound | Undecodable = (
            Undecodable(TRANSPORT, decoded.reason, decoded.delivery_id, platform=PLATFORM)
            if isinstance(decoded, Bad)
            else decoded
        )
        answer = await self._intake.submit(item, patience=WAIT_BRIEFLY)
        if isinstance(answer, Unavailable):
            log.warning(
                "Matrix event %s not saved, it will be fetched again: %s", event["event_id"], answer.reason
            )
            return False
        if isinstance(answer, Refused):
            log.info("skipped Matrix event %s (%s): %s", event["event_id"], answer.code, answer.message,
                     extra={"platform": PLATFORM, "code": answer.code})  # fmt: skip
        if kind == "m.room.encrypted":
            await self._tell_encrypted(room_id)
        if isinstance(item, Inbound) and item.kind == "button":
            await self._answered(item, answer)
        return True

    async def _decode(self, room: RoomInfo, event: dict[str, Any], kind: str) -> Inbound | Skipped | Bad:
        assert self.rules is not None
        ident = delivery_id(room.room_id, str(event["event_id"]))
        sender = str(event.get("sender"))
        name = self.rooms.name_of(room.room_id, sender)
        if kind == "m.room.encrypted":
            return Bad("an encrypted event: end-to-end encrypted rooms are not supported yet", ident)
        if kind == "m.reaction":
            found = reacted_to(event)
            prompt = await self._prompt(room.room_id, found[0]) if found else None
            if prompt is None:
                return Skipped("a reaction on something that is not an open prompt")
            return decode_reaction(event, room, prompt, sender_name=name, received_at=time.time())
        found_content = event.get("content")
        content: dict[str, Any] = found_content if isinstance(found_content, dict) else {}
        to_bot, thread = False, None
        quoted = replied_to(content)
        if quoted and not room.is_dm and self.rules.require_mention:
            to_bot = await self._by_bot(room.room_id, quoted)
        original = relation(content).get("event_id")
        if relation(content).get("rel_type") == "m.replace" and isinstance(original, str):
            thread = await self._thread_of(room.room_id, original)
        return decode_message(
            event, room, self.rules, to_bot=to_bot, sender_name=name, received_at=time.time(),
            edited_thread=thread,
        )  # fmt: skip

    async def _event(self, room_id: str, event_id: str) -> dict[str, Any] | None:
        from chatgate.platforms.matrix.api import path  # (idem)

        try:
            return await self._call("GET", path("rooms", room_id, "event", event_id))
        except PlatformCallError as exc:
            log.info("could not read Matrix event %s: %s", event_id, exc)
            return None

    async def _by_bot(self, room_id: str, event_id: str) -> bool:
        assert self.rules is not None
        if event_id in self._outbound.sent.events:
            return True
        found = await self._event(room_id, event_id)
        return found is not None and found.get("sender") == self.rules.bot_id

    async def _thread_of(self, room_id: str, event_id: str) -> str | None:
        found = await self._event(room_id, event_id)
        content = found.get("content") if found else None
        return thread_root(content) if isinstance(content, dict) else None

    async def _prompt(self, room_id: str, event_id: str) -> PromptRef | None:
        assert self.rules is not None
        known = self._outbound.sent.prompts.get(event_id)
        if known is not None:
            return known
        found = await self._event(room_id, event_id)
        return prompt_ref(found, self.rules.bot_id) if found else None

    async def _answered(self, item: Inbound, answer: Admitted | Refused) -> None:
        """A tap that lost (expired, answered already, not allowed) is told why, in place."""
        text = answer.message if isinstance(answer, Refused) and answer.code == "unauthorized" else None
        if isinstance(answer, Admitted) and answer.answer is not None and not answer.answer.won:
            text = answer.answer.text
        if text and item.source.chat_id:
            await self._outbound.send_notice(
                item.source.chat_id, text, item.source.thread_id, item.message_ref
            )

    async def _tell_encrypted(self, room_id: str) -> None:
        if room_id in self._told_encrypted or len(self._told_encrypted) >= MAX_ENCRYPTED_NOTED:
            return
        self._told_encrypted.add(room_id)
        log.warning("Matrix room %s is end-to-end encrypted: refused (not supported yet)", room_id)
        await self._outbound.send_notice(room_id, ENCRYPTED_TEXT, None, None)


def _events(room: Any, part: str) -> list[dict[str, Any]]:
    holder = room.get(part) if isinstance(room, dict) else None
    events = holder.get("events") if isinstance(holder, dict) else None
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []
