"""Schedules: durable rows that wake a session at set times, and the rules for their firings.

A schedule fires by admitting an inbox event whose delivery id names the firing
(``schedule:<id>:<firing time>``), so a firing is admitted once however often the runner
is killed around it. Only the *next* firing time is stored: after a downtime the due
firing is admitted once and the next one is computed from now, so missed firings are
caught up once, never replayed one by one.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec
from msgspec.structs import replace

from chatgate.domain.errors import ChatgateError
from chatgate.domain.source import Source

SCHEDULE_TRANSPORT = "schedule"
"""The transport of a schedule's firings (delivery id ``schedule:<id>:<due time>``)."""

ScheduleKind = Literal["once", "every", "cron"]
ScheduleOrigin = Literal["config", "chat"]

MAX_SCHEDULE_TEXT = 4000
"""Longest text a schedule carries (characters); the firing's event is bounded by it."""

MIN_INTERVAL_SECONDS = 1.0
MAX_DELAY_SECONDS = 366 * 24 * 3600.0

_DURATION = re.compile(r"(\d+)\s*(d|h|m|s)", re.IGNORECASE)
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


class ScheduleError(ChatgateError, ValueError):
    """A schedule the user or the config described wrongly; the message says how to fix it."""


class ScheduleTarget(msgspec.Struct, frozen=True):
    """Where a firing goes: a chat (its ``Source``), or an existing session by key.

    A session target is resolved at each firing from the session's latest source, so it
    follows the chat's current routing; a key with no session is a firing with no route
    (logged, not dropped silently).
    """

    source: Source | None = None
    session_key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source.to_dict() if self.source is not None else None,
            "session_key": self.session_key,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScheduleTarget:
        source = data.get("source")
        return cls(Source.from_dict(source) if source else None, data.get("session_key"))


class Schedule(msgspec.Struct, frozen=True):
    """One schedule as stored. ``next_fire_at`` is None once a ``once`` schedule has fired."""

    id: str
    kind: ScheduleKind
    spec: str
    """``once``: the UTC epoch seconds; ``every``: the interval in seconds; ``cron``: the expression."""
    text: str
    target: ScheduleTarget
    origin: ScheduleOrigin
    next_fire_at: float | None
    created_at: float
    deliver_only: bool = False
    """Post ``text`` to the chat without running the agent."""
    paused: bool = False
    last_fired_at: float | None = None
    fired: int = 0
    name: str | None = None
    meta: dict[str, Any] = msgspec.field(default_factory=dict)

    def same_definition(self, other: Schedule) -> bool:
        """Whether ``other`` describes the same firings (what a config reload must not reset)."""
        return (self.kind, self.spec, self.text, self.target, self.deliver_only) == (
            other.kind,
            other.spec,
            other.text,
            other.target,
            other.deliver_only,
        )

    def kept_over(self, offered: Schedule) -> bool:
        """Whether this stored schedule stays as it is when ``offered`` is saved under its id: a
        chat schedule is saved once; a ``config:`` one takes a changed definition."""
        return self.origin != "config" or offered.origin != "config" or self.same_definition(offered)

    def with_next(self, next_fire_at: float | None) -> Schedule:
        return replace(self, next_fire_at=next_fire_at)


def firing_time(at: float) -> str:
    """The firing's time as it appears in its delivery id: UTC, whole seconds, ISO 8601."""
    return datetime.fromtimestamp(round(at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def firing_delivery_id(schedule_id: str, at: float) -> str:
    return f"schedule:{schedule_id}:{firing_time(at)}"


def parse_duration(text: str) -> float:
    """``90s``, ``10m``, ``1h30m``, ``2d``: seconds. Anything else is a ``ScheduleError``."""
    compact = text.strip().lower()
    if not compact or _DURATION.sub("", compact).strip():
        raise ScheduleError(f"{text!r} is not a duration; write it like 30s, 10m, 1h30m or 2d")
    seconds = float(sum(int(n) * _UNITS[u.lower()] for n, u in _DURATION.findall(compact)))
    if not MIN_INTERVAL_SECONDS <= seconds <= MAX_DELAY_SECONDS:
        raise ScheduleError(f"{text!r} is out of range: between 1s and 366d")
    return seconds


def cron_next(expression: str, after: float) -> float:
    """The first time strictly after ``after`` that the cron expression names (UTC).

    Five fields (minute hour day month weekday) or six with seconds first. The parser is
    the ``cronsim`` package (the ``schedules`` extra), imported here, on first use.
    """
    try:
        from cronsim import CronSim, CronSimError
    except ImportError as exc:  # pragma: no cover - the extra is part of the test install
        raise ScheduleError(
            "cron schedules need `pip install 'chatgate[schedules]'` (the cronsim package)"
        ) from exc
    start = datetime.fromtimestamp(int(after), UTC)
    try:
        for moment in CronSim(expression, start):
            if moment.timestamp() > after:
                return moment.timestamp()
    except (CronSimError, ValueError) as exc:
        raise ScheduleError(f"{expression!r} is not a cron expression: {exc}") from exc
    raise ScheduleError(f"{expression!r} never fires")  # pragma: no cover - CronSim is endless or raises


def check_spec(kind: ScheduleKind, spec: str) -> None:
    """Raise ``ScheduleError`` unless ``spec`` is valid for ``kind``."""
    if kind == "every":
        seconds = float(spec)
        if not MIN_INTERVAL_SECONDS <= seconds <= MAX_DELAY_SECONDS:
            raise ScheduleError(f"an interval of {spec}s is out of range: between 1s and 366d")
    elif kind == "cron":
        cron_next(spec, 0.0)
    else:
        float(spec)


def first_fire_at(kind: ScheduleKind, spec: str, now: float) -> float:
    """When a new schedule fires first: ``once`` at its time, ``every`` one interval from now
    (from the whole second, so its firings fall on whole seconds)."""
    if kind == "once":
        return float(spec)
    if kind == "every":
        return float(int(now)) + float(spec)
    return cron_next(spec, now)


def next_fire_after(schedule: Schedule, fired_at: float, now: float) -> float | None:
    """The firing after the one at ``fired_at``: the first slot later than both it and ``now``.

    Slots missed meanwhile (a downtime) are skipped: the one due firing stood for them.
    An ``every`` schedule keeps its phase (slots are ``fired_at + k * interval``).
    """
    if schedule.kind == "once":
        return None
    floor = max(fired_at, now)
    if schedule.kind == "every":
        interval = float(schedule.spec)
        steps = int((floor - fired_at) // interval) + 1
        return fired_at + steps * interval
    return cron_next(schedule.spec, floor)


def describe(schedule: Schedule) -> str:
    """One line for a person: what it does and when."""
    if schedule.kind == "once":
        when = "once"
    elif schedule.kind == "every":
        when = f"every {format_seconds(float(schedule.spec))}"
    else:
        when = f"cron {schedule.spec}"
    nxt = firing_time(schedule.next_fire_at) if schedule.next_fire_at is not None else "done"
    state = " (paused)" if schedule.paused else ""
    text = schedule.text if len(schedule.text) <= 60 else schedule.text[:57] + "..."
    return f"{schedule.id}: {when}, next {nxt}{state}: {text}"


def format_seconds(seconds: float) -> str:
    """``5400`` -> ``1h30m``."""
    whole, out = int(seconds), ""
    for name, unit in _UNITS.items():
        if whole >= unit:
            out += f"{whole // unit}{name}"
            whole %= unit
    return out or "0s"
