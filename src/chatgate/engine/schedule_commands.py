"""``/remind``, ``/every`` and ``/schedules``: schedules made and managed from a chat.

Each handler runs at admission, before the command commits, and writes idempotently: a
schedule's id is derived from the command's delivery id, and saving an existing chat
schedule changes nothing, so a redelivered ``/remind`` creates one reminder.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Protocol

import msgspec

from chatgate.domain.inbound import Inbound
from chatgate.domain.schedules import (
    MAX_SCHEDULE_TEXT,
    Schedule,
    ScheduleError,
    ScheduleKind,
    ScheduleTarget,
    check_spec,
    describe,
    firing_time,
    first_fire_at,
    format_seconds,
    parse_duration,
)
from chatgate.domain.store_roles import Schedules

CRON_FIELDS = 5
"""A chat cron is the usual five fields (minute hour day month weekday); seconds are config-only."""


class ScheduleSink(Protocol):
    def wake(self) -> None: ...


class ChatScheduleLimits(msgspec.Struct, frozen=True):
    min_interval_seconds: float = 60.0
    """The shortest repeat a chat may ask for (a config schedule may go down to 1 s)."""
    max_per_session: int = 20
    """Schedules one session may hold: a bound on what a user can make the gateway keep."""
    max_per_user: int = 50
    """Schedules one user may hold across all their chats on a platform (issue 27, finding 7:
    one client kept 600 over 30 chats under the per-chat bound alone)."""


def schedule_id(inbound: Inbound) -> str:
    """Short, stable per command delivery (a redelivery names the same schedule)."""
    digest = hashlib.sha256(f"{inbound.transport}\0{inbound.delivery_id}".encode()).hexdigest()
    return digest[:8]


def _split_every(args: str) -> tuple[ScheduleKind, str, str]:
    """``1h text`` -> an interval; ``0 9 * * 1-5 text`` -> a cron expression."""
    head, _, rest = args.partition(" ")
    try:
        return "every", str(parse_duration(head)), rest.strip()
    except ScheduleError:
        pass
    words = args.split()
    if len(words) <= CRON_FIELDS:
        raise ScheduleError(
            "write /every <interval> <text> (e.g. /every 2h drink water) or"
            " /every <minute hour day month weekday> <text> (e.g. /every 0 9 * * 1-5 standup)"
        )
    return "cron", " ".join(words[:CRON_FIELDS]), " ".join(words[CRON_FIELDS:])


class ScheduleCommands:
    """The handlers, over the schedules role; ``sink`` is woken when a schedule is created."""

    def __init__(
        self,
        store: Schedules,
        sink: ScheduleSink,
        limits: ChatScheduleLimits = ChatScheduleLimits(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._sink = sink
        self._limits = limits
        self._clock = clock

    async def remind(self, inbound: Inbound, key: str, args: str) -> str:
        when, _, text = args.strip().partition(" ")
        try:
            delay = parse_duration(when)
        except ScheduleError as exc:
            return f"{exc}. Example: /remind 20m take the bread out"
        at = self._clock() + delay
        try:
            made = await self._create(inbound, key, "once", str(at), text)
        except ScheduleError as exc:
            return f"{exc}. Example: /remind 10m stretch"
        return f"Reminder {made} set for {firing_time(at)} (in {format_seconds(delay)})."

    async def every(self, inbound: Inbound, key: str, args: str) -> str:
        try:
            kind, spec, text = _split_every(args.strip())
            if kind == "every" and float(spec) < self._limits.min_interval_seconds:
                least = format_seconds(self._limits.min_interval_seconds)
                raise ScheduleError(f"the shortest interval in a chat is {least}")
            check_spec(kind, spec)
            made = await self._create(inbound, key, kind, spec, text)
        except ScheduleError as exc:
            return str(exc)
        stored = await self._store.get_schedule(made)
        line = describe(stored) if stored is not None else made
        return f"Schedule {line}\nStop it with /schedules delete {made}."

    async def _create(self, inbound: Inbound, key: str, kind: ScheduleKind, spec: str, text: str) -> str:
        """The new (or, for a redelivered command, the existing) schedule's id."""
        text = text.strip()
        if not text:
            raise ScheduleError("say what the schedule should send, after the time")
        if len(text) > MAX_SCHEDULE_TEXT:
            raise ScheduleError(f"that text is {len(text)} characters; the limit is {MAX_SCHEDULE_TEXT}")
        sid = schedule_id(inbound)
        mine = await self._store.list_schedules(key)
        if sid not in {s.id for s in mine} and len(mine) >= self._limits.max_per_session:
            raise ScheduleError(
                f"this chat has {len(mine)} schedules, the most it may have;"
                " delete one with /schedules delete <id>"
            )
        if sid not in {s.id for s in mine}:
            await self._check_user_bound(inbound)
        now = self._clock()
        schedule = Schedule(
            id=sid,
            kind=kind,
            spec=spec,
            text=text,
            target=ScheduleTarget(inbound.source, key),
            origin="chat",
            next_fire_at=first_fire_at(kind, spec, now),
            created_at=now,
            meta={"created_by": inbound.source.user_id},
        )
        await self._store.save_schedule(schedule)
        self._sink.wake()
        return sid

    async def manage(self, inbound: Inbound, key: str, args: str) -> str:
        """``/schedules`` lists; ``/schedules pause|resume|delete <id>`` changes one of this chat's."""
        verb, _, sid = args.strip().partition(" ")
        mine = {s.id: s for s in await self._store.list_schedules(key)}
        if not verb:
            if not mine:
                return "No schedules in this chat. Make one with /remind or /every."
            return "Schedules:\n" + "\n".join(describe(s) for s in mine.values())
        sid = sid.strip()
        if verb.lower() not in ("pause", "resume", "delete"):
            return "Write /schedules, or /schedules pause|resume|delete <id>."
        if sid not in mine:
            return f"No schedule {sid!r} in this chat; /schedules lists them."
        if verb.lower() == "delete":
            await self._store.delete_schedule(sid)
            return f"Deleted schedule {sid}."
        await self._store.pause_schedule(sid, verb.lower() == "pause")
        self._sink.wake()
        return f"Schedule {sid} {'paused' if verb.lower() == 'pause' else 'resumed'}."

    async def _check_user_bound(self, inbound: Inbound) -> None:
        source = inbound.source
        theirs = [
            s
            for s in await self._store.list_schedules()
            if s.origin == "chat"
            and s.meta.get("created_by") == source.user_id
            and s.target.source is not None
            and s.target.source.platform == source.platform
        ]
        if len(theirs) >= self._limits.max_per_user:
            raise ScheduleError(
                f"you have {len(theirs)} schedules across your chats, the most you may have;"
                " delete one with /schedules delete <id> in its chat"
            )
