"""The schedules role's contract: a schedule is saved once, fires by compare-and-set, pauses and goes."""

from __future__ import annotations

from msgspec.structs import replace

from chatgate.domain.schedules import Schedule, ScheduleTarget
from chatgate.domain.source import Source
from chatgate.domain.store_roles import Schedules
from contract.kit import T0, covers


def schedule(sid: str = "s1", *, origin: str = "chat", at: float | None = T0 + 60, **changes) -> Schedule:
    target = ScheduleTarget(Source("webchat", "c1", user_id="u1"), "k1")
    base = Schedule(
        id=sid,
        kind="every",
        spec="60",
        text=f"text of {sid}",
        target=target,
        origin=origin,  # type: ignore[arg-type]
        next_fire_at=at,
        created_at=T0,
    )
    return replace(base, **changes)


@covers(Schedules.save_schedule, Schedules.get_schedule)
async def test_a_saved_schedule_reads_back_whole_and_an_unknown_id_is_none(store):
    s = schedule(name="standup", deliver_only=True, meta={"by": "u1"})
    assert await store.save_schedule(s) == s
    assert await store.get_schedule("s1") == s
    assert await store.get_schedule("nope") is None


@covers(Schedules.save_schedule)
async def test_saving_a_chat_schedule_again_keeps_the_first_one(store):
    first = schedule()
    await store.save_schedule(first)
    again = await store.save_schedule(schedule(text="other", at=T0 + 999))
    assert again == first
    assert await store.get_schedule("s1") == first


@covers(Schedules.save_schedule)
async def test_a_config_schedule_takes_a_changed_definition_but_keeps_its_state(store):
    await store.save_schedule(schedule("config:a", origin="config"))
    assert await store.pause_schedule("config:a", True)
    unchanged = await store.save_schedule(schedule("config:a", origin="config", at=T0 + 5))
    assert unchanged.next_fire_at == T0 + 60  # the same definition keeps its next firing
    changed = await store.save_schedule(schedule("config:a", origin="config", spec="30", at=T0 + 30))
    assert (changed.spec, changed.next_fire_at, changed.paused) == ("30", T0 + 30, True)


@covers(Schedules.list_schedules)
async def test_list_gives_every_schedule_or_one_sessions_oldest_first(store):
    await store.save_schedule(schedule("s2", created_at=T0 + 2))
    await store.save_schedule(schedule("s1", created_at=T0 + 1))
    other = ScheduleTarget(Source("webchat", "c2"), "k2")
    await store.save_schedule(schedule("s3", created_at=T0 + 3, target=other))
    assert [s.id for s in await store.list_schedules()] == ["s1", "s2", "s3"]
    assert [s.id for s in await store.list_schedules("k1")] == ["s1", "s2"]
    assert await store.list_schedules("k9") == []


@covers(Schedules.due_schedules, Schedules.next_schedule_at)
async def test_due_schedules_are_the_unpaused_ones_at_or_before_now_earliest_first(store):
    assert await store.next_schedule_at() is None
    await store.save_schedule(schedule("late", at=T0 + 10))
    await store.save_schedule(schedule("early", at=T0 + 5))
    await store.save_schedule(schedule("future", at=T0 + 100))
    await store.save_schedule(schedule("paused", at=T0 + 1, paused=True))
    await store.save_schedule(schedule("done", at=None))
    assert [s.id for s in await store.due_schedules(T0 + 10, 10)] == ["early", "late"]
    assert [s.id for s in await store.due_schedules(T0 + 10, 1)] == ["early"]
    assert await store.due_schedules(T0, 10) == []
    assert await store.next_schedule_at() == T0 + 5


@covers(Schedules.advance_schedule)
async def test_advance_records_a_firing_once(store):
    await store.save_schedule(schedule(at=T0 + 60))
    assert await store.advance_schedule("s1", T0 + 60, T0 + 120)
    assert not await store.advance_schedule("s1", T0 + 60, T0 + 120)  # that firing is recorded already
    stored = await store.get_schedule("s1")
    assert stored is not None
    assert (stored.next_fire_at, stored.last_fired_at, stored.fired) == (T0 + 120, T0 + 60, 1)
    assert await store.advance_schedule("s1", T0 + 120, None)
    assert await store.next_schedule_at() is None
    assert not await store.advance_schedule("missing", T0, T0 + 1)


@covers(Schedules.pause_schedule, Schedules.delete_schedule)
async def test_pause_resume_and_delete(store):
    await store.save_schedule(schedule(at=T0))
    assert await store.pause_schedule("s1", True)
    assert await store.due_schedules(T0, 10) == []
    assert await store.pause_schedule("s1", False)
    assert [s.id for s in await store.due_schedules(T0, 10)] == ["s1"]
    assert await store.delete_schedule("s1")
    assert not await store.delete_schedule("s1")
    assert not await store.pause_schedule("s1", True)
    assert await store.get_schedule("s1") is None


@covers(Schedules.save_schedule, Schedules.advance_schedule)
async def test_a_schedule_and_its_firings_survive_reopen(open_store):
    store = await open_store()
    await store.save_schedule(schedule(at=T0))
    await store.advance_schedule("s1", T0, T0 + 60)
    await store.close()
    again = await open_store()
    stored = await again.get_schedule("s1")
    assert stored is not None and (stored.next_fire_at, stored.fired) == (T0 + 60, 1)
