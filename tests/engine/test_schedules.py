"""Schedules in the engine: chat commands make durable rows, the runner turns each due firing into
one inbox event (or, deliver-only, one outbox row), and time is the runner's clock, moved by the
test (no sleeping): catch-up once after a gap, a firing admitted twice runs once, no route is
logged, and a creator who lost access wakes nobody."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from chatgate.domain.schedules import Schedule, ScheduleTarget
from chatgate.domain.source import Source
from chatgate.engine.authz import PlatformAccess
from chatgate.engine.schedules import ScheduleRunner, configured
from support.engine_harness import PLATFORM

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from support.engine_harness import Harness, MakeHarness

    Wait = Callable[..., Awaitable[Any]]


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def replies(h: Harness, wait: Wait, count: int, kinds: tuple[str, ...] = ("command",)) -> list[str]:
    await wait(lambda: len(h.adapter.rows("c1", kinds)) >= count, message=f"{count} {kinds} rows")
    return [r.text for r in h.adapter.rows("c1", kinds)]


def runner_for(h: Harness, clock: Clock) -> ScheduleRunner:
    return ScheduleRunner(h.store, h.admission, h.delivery.wake, clock=clock)


def schedule_firings(h: Harness) -> list[str]:
    return [r[0] for r in h.query("SELECT delivery_id FROM inbox WHERE transport = 'schedule' ORDER BY seq")]


async def test_remind_makes_one_reminder_even_when_redelivered_and_it_fires_once(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(agent="echo")
    await h.send("/remind 10m stretch", delivery_id="r1")
    await h.send("/remind 10m stretch", delivery_id="r1")  # the transport redelivers it
    (reply,) = await replies(h, wait, 1)
    assert reply.startswith("Reminder ") and "(in 10m)" in reply, reply
    (made,) = await h.store.list_schedules()
    assert (made.kind, made.text, made.origin) == ("once", "stretch", "chat")
    assert made.next_fire_at is not None
    clock = Clock(made.next_fire_at - 1)
    runner = runner_for(h, clock)
    assert await runner.run_due() == 0, "not due yet"
    clock.now = made.next_fire_at + 5
    assert await runner.run_due() == 1
    assert await runner.run_due() == 0, "a reminder fires once"
    finals = await h.finals("c1", 1)
    assert finals == [f"echo: [schedule {made.id}] stretch"]
    stored = await h.store.get_schedule(made.id)
    assert stored is not None and (stored.next_fire_at, stored.fired) == (None, 1)


async def test_every_catches_up_once_after_a_gap_then_keeps_its_grid(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(agent="echo")
    await h.send("/every 1h water", delivery_id="e1")
    (reply,) = await replies(h, wait, 1)
    assert "every 1h" in reply and "/schedules delete" in reply, reply
    (made,) = await h.store.list_schedules()
    first = made.next_fire_at
    assert first is not None
    clock = Clock(first + 5.5 * 3600)  # the gateway was down for five and a half slots
    runner = runner_for(h, clock)
    assert await runner.run_due() == 1
    assert await runner.run_due() == 0
    stored = await h.store.get_schedule(made.id)
    assert stored is not None and stored.next_fire_at == first + 6 * 3600, "the next slot after now"
    clock.now = first + 6 * 3600
    assert await runner.run_due() == 1
    assert len(schedule_firings(h)) == 2, schedule_firings(h)
    assert await h.finals("c1", 2) == [f"echo: [schedule {made.id}] water"] * 2


async def test_a_firing_admitted_twice_runs_once(make_harness: MakeHarness) -> None:
    """A kill between the firing's admission and its advance: the restarted runner fires it again."""
    h = await make_harness(agent="echo")
    source = Source(PLATFORM, "c1", user_id="u1")
    due = Schedule("s1", "every", "60", "tick", ScheduleTarget(source, None), "config", 1000.0, 0.0)
    await h.store.save_schedule(due)
    runner = runner_for(h, Clock(1001.0))
    await runner.fire(due, 1001.0)
    await runner.fire(due, 1001.0)
    assert schedule_firings(h) == ["schedule:s1:1970-01-01T00:16:40Z"]
    assert await h.finals("c1", 1) == ["echo: [schedule s1] tick"]
    stored = await h.store.get_schedule("s1")
    assert stored is not None and (stored.next_fire_at, stored.fired) == (1060.0, 1)


async def test_deliver_only_posts_the_text_without_a_turn(make_harness: MakeHarness, wait: Wait) -> None:
    h = await make_harness()
    target = ScheduleTarget(Source(PLATFORM, "c1"), None)
    await h.store.save_schedule(
        Schedule("s1", "every", "60", "backup done", target, "config", 1000.0, 0.0, deliver_only=True)
    )
    runner = runner_for(h, Clock(1000.0))
    assert await runner.run_due() == 1
    row = await h.delivered("backup done")
    assert row.kind == "notice"
    assert schedule_firings(h) == [], "no inbox event: the agent never ran"
    assert not h.agent.turns_with("backup done")


async def test_a_session_target_with_no_session_is_logged_and_sends_nothing(
    make_harness: MakeHarness, caplog: Any
) -> None:
    h = await make_harness(agent="echo")
    target = ScheduleTarget(None, "agent:main:test:dm:nobody")
    await h.store.save_schedule(Schedule("s1", "every", "60", "hi", target, "config", 1000.0, 0.0))
    with caplog.at_level(logging.WARNING, logger="chatgate.engine.schedules"):
        assert await ScheduleRunner(h.store, h.admission, h.delivery.wake, clock=Clock(1000.0)).run_due() == 1
    assert "no route" in caplog.text and "agent:main:test:dm:nobody" in caplog.text
    assert schedule_firings(h) == []
    stored = await h.store.get_schedule("s1")
    assert stored is not None and stored.next_fire_at == 1060.0, "and it still moves on"


async def test_a_chat_schedule_whose_creator_lost_access_wakes_nobody(
    make_harness: MakeHarness, wait: Wait, caplog: Any
) -> None:
    h = await make_harness(agent="echo", rules={PLATFORM: PlatformAccess(allow_users=frozenset({"u-ok"}))})
    target = ScheduleTarget(Source(PLATFORM, "c1", user_id="u-gone"), None)
    await h.store.save_schedule(Schedule("s1", "every", "60", "hi", target, "chat", 1000.0, 0.0))
    with caplog.at_level(logging.WARNING):
        assert await runner_for(h, Clock(1000.0)).run_due() == 1
    assert "refused" in caplog.text
    assert schedule_firings(h) == []


async def test_chat_limits_and_mistakes_get_a_reply_that_says_what_to_do(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(agent="echo")
    await h.send("/every 10s too often")
    await h.send("/every 61 9 * * * bad cron")
    await h.send("/remind soon nothing")
    await h.send("/remind 5m")
    texts = await replies(h, wait, 4)
    assert "shortest interval in a chat is 1m" in texts[0]
    assert "not a cron expression" in texts[1]
    assert "not a duration" in texts[2] and "Example: /remind" in texts[2]
    assert "say what the schedule should send" in texts[3]
    assert await h.store.list_schedules() == []


async def test_schedules_lists_pauses_and_deletes_only_this_chats(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(agent="echo")
    await h.send("/every 0 9 * * 1-5 standup", delivery_id="mine")
    await h.send("/every 2h other chat", delivery_id="theirs", chat_id="c2")
    await replies(h, wait, 1)
    mine = next(s for s in await h.store.list_schedules() if s.text == "standup")
    theirs = next(s for s in await h.store.list_schedules() if s.text == "other chat")
    assert mine.kind == "cron" and mine.spec == "0 9 * * 1-5"
    await h.send("/schedules")
    await h.send(f"/schedules pause {mine.id}")
    await h.send(f"/schedules delete {theirs.id}")
    await h.send(f"/schedules delete {mine.id}")
    _, listing, paused, refused, deleted = await replies(h, wait, 5)
    assert mine.id in listing and "standup" in listing and theirs.id not in listing
    assert paused == f"Schedule {mine.id} paused."
    assert "No schedule" in refused and await h.store.get_schedule(theirs.id) is not None
    assert deleted == f"Deleted schedule {mine.id}." and await h.store.get_schedule(mine.id) is None


async def test_help_lists_the_schedule_commands(make_harness: MakeHarness, wait: Wait) -> None:
    h = await make_harness()
    await h.send("/help")
    (text,) = await replies(h, wait, 1)
    for name in ("/remind", "/every", "/schedules"):
        assert name in text


class BreaksOn:
    """The real admission, except that one schedule's firing raises (a bug, at the seam)."""

    def __init__(self, admission: Any, schedule_id: str) -> None:
        self._admission = admission
        self._id = schedule_id

    async def admit_internal(self, inbound: Any, key: Any = None, *, check_sender: bool = False) -> Any:
        if inbound.payload["schedule"]["id"] == self._id:
            raise RuntimeError("a bug")
        return await self._admission.admit_internal(inbound, key, check_sender=check_sender)

    def key_for_source(self, source: Source) -> str:
        return str(self._admission.key_for_source(source))


async def test_a_firing_that_fails_unexpectedly_is_logged_and_skipped_and_the_next_still_fires(
    make_harness: MakeHarness, caplog: Any
) -> None:
    h = await make_harness(agent="echo")
    target = ScheduleTarget(Source(PLATFORM, "c1", user_id="u1"), None)
    await h.store.save_schedule(Schedule("bad", "every", "60", "boom", target, "config", 1000.0, 0.0))
    await h.store.save_schedule(Schedule("good", "every", "60", "fine", target, "config", 1000.0, 0.0))
    runner = ScheduleRunner(h.store, BreaksOn(h.admission, "bad"), h.delivery.wake, clock=Clock(1000.0))
    with caplog.at_level(logging.WARNING):
        assert await runner.run_due() == 2
    assert "schedule bad: the firing at 1970-01-01T00:16:40Z failed and is skipped" in caplog.text
    assert schedule_firings(h) == ["schedule:good:1970-01-01T00:16:40Z"]
    stored = await h.store.get_schedule("bad")
    assert stored is not None and stored.next_fire_at == 1060.0, "skipped, not retried forever"


async def test_config_sync_adds_changes_and_removes_only_config_schedules(make_harness: MakeHarness) -> None:
    h = await make_harness()
    source = Source(PLATFORM, "ops")
    a = Schedule("config:a", "every", "60", "a", ScheduleTarget(source, None), "config", None, 0.0)
    b = Schedule(
        "config:b", "cron", "0 9 * * *", "b", ScheduleTarget(None, "agent:main:x"), "config", None, 0.0
    )
    mine = Schedule("c1c1c1c1", "once", "5000", "mine", ScheduleTarget(source, "k"), "chat", 5000.0, 0.0)
    await h.store.save_schedule(mine)
    runner = runner_for(h, Clock(1000.0))
    await runner.sync_config(configured([a, b], h.admission.key_for_source, 1000.0))
    stored_a = await h.store.get_schedule("config:a")
    assert stored_a is not None and stored_a.next_fire_at == 1060.0
    assert stored_a.target.session_key == h.admission.key_for_source(source), "a chat target gets its key"
    later = configured([a], h.admission.key_for_source, 2000.0)  # b removed from the config, a unchanged
    await runner.sync_config(later)
    assert [s.id for s in await h.store.list_schedules()] == ["c1c1c1c1", "config:a"]
    again = await h.store.get_schedule("config:a")
    assert again is not None and again.next_fire_at == 1060.0, "unchanged: its due firing is kept"
