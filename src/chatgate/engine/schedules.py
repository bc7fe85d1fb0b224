"""The schedule runner: each due firing becomes an inbox event (or, deliver-only, an outbox row).

Durable by construction: a firing's delivery id is ``schedule:<id>:<firing time>``, so
admitting it twice (a kill between the admission and the advance) is recognized as a
redelivery; the advance is a compare-and-set on the firing it records. Only the next
firing is stored, so a downtime costs one catch-up firing, not one per missed slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import msgspec
from msgspec.structs import replace

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.inbound import Inbound
from chatgate.domain.schedules import (
    SCHEDULE_TRANSPORT,
    Schedule,
    ScheduleError,
    ScheduleTarget,
    firing_delivery_id,
    firing_time,
    first_fire_at,
    next_fire_after,
)
from chatgate.domain.source import Source
from chatgate.domain.store_roles import OutboxNotices, Schedules, Transcript
from chatgate.domain.tasks import cancel_and_wait
from chatgate.engine.intake import AdmissionRefused
from chatgate.engine.ports import Admitted
from chatgate.engine.replies import reply_draft
from chatgate.engine.schedule_commands import ChatScheduleLimits

log = logging.getLogger(__name__)


class ScheduleStore(Schedules, Transcript, OutboxNotices, Protocol):
    """The runner reads and advances schedules, resolves session targets, and posts deliver-only text."""


class InternalAdmission(Protocol):
    async def admit_internal(
        self, inbound: Inbound, key: str | None = None, *, check_sender: bool = False
    ) -> Admitted: ...

    def key_for_source(self, source: Source) -> str: ...


async def resolve_target(
    target: ScheduleTarget, transcript: Transcript, key_for: Callable[[Source], str]
) -> tuple[Source, str] | None:
    """The source a reply routes by and the session key; None for a session that does not exist."""
    if target.source is not None:
        return target.source, target.session_key or key_for(target.source)
    if target.session_key is None:
        return None
    source = await transcript.session_source(target.session_key)
    return None if source is None else (source, target.session_key)


def configured(jobs: Sequence[Schedule], key_for: Callable[[Source], str], now: float) -> list[Schedule]:
    """The config's schedules as rows: a chat target gets its session key, each its first firing."""
    rows = []
    for job in jobs:
        target = job.target
        if target.source is not None and target.session_key is None:
            target = ScheduleTarget(target.source, key_for(target.source))
        first = first_fire_at(job.kind, job.spec, now)
        rows.append(replace(job, target=target, next_fire_at=first, created_at=now))
    return rows


class ScheduleSettings(msgspec.Struct, frozen=True):
    batch: int = 50
    """Firings handled per pass; a pass that fills it runs again at once."""
    max_sleep: float = 30.0
    """The longest the runner sleeps without looking (a schedule paused or deleted by the CLI
    is seen at its firing anyway, because the due query reads the row)."""
    retry_seconds: float = 1.0
    """After a storage outage."""
    jobs: tuple[Schedule, ...] = ()
    """The config's schedules (``origin="config"``), completed by ``configured`` at start."""
    limits: ChatScheduleLimits = msgspec.field(default_factory=ChatScheduleLimits)


class ScheduleRunner:
    """Owned by the engine: ``start`` after the store is open, ``stop`` (cancel and await) at shutdown."""

    def __init__(
        self,
        store: ScheduleStore,
        admission: InternalAdmission,
        on_outbox: Callable[[], None],
        settings: ScheduleSettings = ScheduleSettings(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._admission = admission
        self._on_outbox = on_outbox
        self._settings = settings
        self._clock = clock
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def sync_config(self, schedules: Sequence[Schedule]) -> None:
        """Make the store's ``config`` schedules the configured ones: new ones are added, changed
        ones take their new definition, removed ones are deleted; pause state and the next
        firing of an unchanged one are kept (so a firing missed while down is caught up)."""
        wanted = {s.id for s in schedules}
        for schedule in schedules:
            await self._store.save_schedule(schedule)
        for stored in await self._store.list_schedules():
            if stored.origin == "config" and stored.id not in wanted:
                await self._store.delete_schedule(stored.id)
                log.info("schedule %s is no longer in the config; deleted", stored.id)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="chatgate-schedules")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None

    def wake(self) -> None:
        """A schedule was created: look again now."""
        self._wake.set()

    async def _loop(self) -> None:
        while True:
            try:
                fired = await self.run_due()
                delay = 0.0 if fired >= self._settings.batch else await self._delay()
            except StoreUnavailable as exc:
                log.warning("schedules: the store is unavailable (%s); retrying", exc)
                delay = self._settings.retry_seconds
            except Exception:  # e.g. a row that no longer reads: keep the runner alive, look again later
                log.exception("schedules: a pass failed; trying again in %.0f s", self._settings.max_sleep)
                delay = self._settings.max_sleep
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
            self._wake.clear()

    async def _delay(self) -> float:
        upcoming = await self._store.next_schedule_at()
        if upcoming is None:
            return self._settings.max_sleep
        return min(self._settings.max_sleep, max(0.0, upcoming - self._clock()))

    async def run_due(self) -> int:
        """Fire every due schedule once; returns how many fired."""
        now = self._clock()
        due = await self._store.due_schedules(now, self._settings.batch)
        for schedule in due:
            await self.fire(schedule, now)
        return len(due)

    async def fire(self, schedule: Schedule, now: float) -> None:
        """Admit (or post) the firing at ``schedule.next_fire_at``, then store the next one."""
        at = schedule.next_fire_at
        assert at is not None
        try:
            nxt = next_fire_after(schedule, at, now)
        except ScheduleError as exc:
            log.error("schedule %s cannot compute its next firing (%s); it stops", schedule.id, exc)
            nxt = None
        try:
            await self._deliver(schedule, at, now)
        except StoreUnavailable:
            raise  # not advanced: the same firing is tried again when the store is back
        except Exception:  # a bug or bad data must not stop every schedule: this firing is skipped
            log.exception("schedule %s: the firing at %s failed and is skipped", schedule.id, firing_time(at))
        await self._store.advance_schedule(schedule.id, at, nxt)

    async def _deliver(self, schedule: Schedule, at: float, now: float) -> None:
        route = await self._route(schedule.target)
        if route is None:
            log.warning(
                "schedule %s fired at %s with no route: its target %s has no session; nothing was sent",
                schedule.id,
                firing_time(at),
                schedule.target.session_key,
            )
        elif schedule.deliver_only:
            await self._post(schedule, at, *route)
        else:
            await self._admit(schedule, at, now, *route)

    async def _route(self, target: ScheduleTarget) -> tuple[Source, str] | None:
        return await resolve_target(target, self._store, self._admission.key_for_source)

    async def _post(self, schedule: Schedule, at: float, source: Source, key: str) -> None:
        idem = firing_delivery_id(schedule.id, at)
        await self._store.enqueue_outbox([reply_draft(source, key, "notice", schedule.text, idem, None)])
        self._on_outbox()

    async def _admit(self, schedule: Schedule, at: float, now: float, source: Source, key: str) -> None:
        inbound = Inbound(
            transport=SCHEDULE_TRANSPORT,
            delivery_id=firing_delivery_id(schedule.id, at),
            source=source,
            text=f"[schedule {schedule.id}] {schedule.text}",
            received_at=now,
            payload={"schedule": {"id": schedule.id, "fired_at": at, "late_seconds": round(now - at, 3)}},
            observes_labels=False,
        )
        try:
            from_chat = schedule.origin == "chat"
            admitted = await self._admission.admit_internal(inbound, key, check_sender=from_chat)
        except AdmissionRefused as exc:  # fail closed: e.g. its creator no longer has access
            log.warning("schedule %s firing at %s refused: %s", schedule.id, firing_time(at), exc.message)
            return
        if not admitted.new:
            log.info("schedule %s: the firing at %s was admitted before", schedule.id, firing_time(at))
