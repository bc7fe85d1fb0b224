"""Per-session FIFO, the concurrency bound, dedupe by delivery id, and write-failure fencing."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from support.engine_harness import MakeHarness, TranscriptFaults

    Wait = Callable[..., Awaitable[Any]]


async def test_thirty_messages_in_one_session_are_answered_once_each_in_admission_order(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness(agent="echo")
    texts = [f"message {i}" for i in range(30)]
    for i, text in enumerate(texts):
        await h.send(text, delivery_id=f"fifo-{i}")

    finals = await h.finals("c1", 30)

    assert finals == [f"echo: {t}" for t in texts]
    assert [r.in_reply_to for r in h.adapter.rows("c1", ["final"])] == [f"ref-fifo-{i}" for i in range(30)]
    rows = h.query("SELECT status, outcome FROM inbox ORDER BY seq")
    assert rows == [("done", "ok")] * 30


async def test_ten_sessions_run_concurrently_up_to_the_bound_and_each_stays_in_order(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(scheduler={"max_concurrent_turns": 4})
    gate = h.agent.hold_every_turn()

    async def one_session(n: int) -> None:
        for i in range(10):
            await h.send(f"s{n} m{i}", chat_id=f"chat{n}", delivery_id=f"s{n}-m{i}")

    await asyncio.gather(*(one_session(n) for n in range(10)))
    # Every turn is held: the scheduler must fill exactly the bound with different sessions.
    await wait(lambda: h.agent.active == 4, message="4 turns running at once")
    running = [t for t in h.agent.turns if t.state == "running"]
    assert len({t.request.session_key for t in running}) == 4
    assert h.scheduler.running() == 4
    gate.set()

    for n in range(10):
        finals = await h.finals(f"chat{n}", 10, timeout=30)
        assert finals == [f"echo: s{n} m{i}" for i in range(10)], f"session {n} out of order"
    assert h.agent.max_active == 4, "never more than max_concurrent_turns turns at once"
    assert h.agent.max_active_per_session == 1, "never two turns of one session at once"
    assert len(h.agent.turns) == 100, "each message ran exactly one turn"
    for n in range(10):
        key = next(t.request.session_key for t in h.agent.turns if t.texts == (f"s{n} m0",))
        order = [t.texts for t in h.agent.turns if t.request.session_key == key]
        assert order == [(f"s{n} m{i}",) for i in range(10)], "turns started in admission order"


async def test_the_same_delivery_id_admitted_twice_in_sequence_runs_one_turn_and_one_final(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness()
    first = await h.send("hello", delivery_id="dup-1")
    await h.delivered("echo: hello")
    again = await h.send("hello", delivery_id="dup-1")
    assert first.new is True
    assert again.new is False and again.seq == first.seq

    # A later message in the same session is answered after anything the duplicate could cause.
    await h.send("sentinel")
    assert await h.finals("c1", 2) == ["echo: hello", "echo: sentinel"]
    assert len(h.agent.turns_with("hello")) == 1
    assert h.metric("chatgate_duplicates_total", platform="test") == 1


async def test_the_same_delivery_id_admitted_concurrently_is_committed_once_and_answered_once(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness()
    gate = h.agent.hold("hello")
    results = await asyncio.gather(*(h.send("hello", delivery_id="dup-2") for _ in range(8)))
    assert sorted(r.new for r in results) == [False] * 7 + [True]
    assert len({r.seq for r in results}) == 1
    # Redelivered again while its turn is running: still the same event.
    await wait(lambda: h.agent.running("hello"))
    assert (await h.send("hello", delivery_id="dup-2")).new is False
    gate.set()

    await h.send("sentinel")
    assert await h.finals("c1", 2) == ["echo: hello", "echo: sentinel"]
    assert len(h.agent.turns_with("hello")) == 1
    assert h.query("SELECT COUNT(*) FROM inbox WHERE delivery_id = 'dup-2'") == [(1,)]


async def test_identical_text_under_different_delivery_ids_is_two_messages(make_harness: MakeHarness) -> None:
    h = await make_harness()
    await h.send("same", delivery_id="x-1")
    await h.send("same", delivery_id="x-2")
    assert await h.finals("c1", 2) == ["echo: same", "echo: same"]
    assert len(h.agent.turns_with("same")) == 2


async def test_a_failed_commit_fences_its_session_in_order_without_blocking_other_sessions(
    make_harness: MakeHarness, transcript_faults: TranscriptFaults, wait: Wait
) -> None:
    h = await make_harness(connect=transcript_faults.connect)
    gate = h.agent.hold("a1")
    a1 = await h.send("a1", chat_id="A", delivery_id="a1")
    await h.send("a2", chat_id="A", delivery_id="a2")
    transcript_faults.fail(a1.session_key)  # every commit of session A fails until cleared
    gate.set()

    # The commit of a1 fails, is retried with backoff, and fails again ...
    await wait(lambda: transcript_faults.denials(a1.session_key) >= 3, message="a1's commit retried")
    assert not h.agent.turns_with("a2"), "a2 must not start while a1 is unfinished"
    assert h.inbox("a1")[0] == "queued" and h.inbox("a2")[0] == "queued"
    info = await h.store.session_info(a1.session_key)
    assert info is not None and info.last_error is not None and "commit failed" in info.last_error

    # ... while another session keeps being answered.
    await h.send("b1", chat_id="B")
    await h.send("b2", chat_id="B")
    assert await h.finals("B", 2) == ["echo: b1", "echo: b2"]
    assert not h.agent.turns_with("a2"), "a2 must not start while a1 is unfinished"
    assert h.adapter.texts("A", kinds=("final", "notice", "command")) == []
    failures_while_b_ran = transcript_faults.denials(a1.session_key)

    transcript_faults.clear()
    assert await h.finals("A", 2) == ["echo: a1", "echo: a2"]
    assert failures_while_b_ran >= 3
    a1_turns = [i for i, t in enumerate(h.agent.turns) if t.texts == ("a1",)]
    a2_turns = [i for i, t in enumerate(h.agent.turns) if t.texts == ("a2",)]
    assert len(a2_turns) == 1 and a2_turns[0] > max(a1_turns), "a2 ran only after a1's last attempt"
    assert h.inbox("a1")[0] == "done" and h.inbox("a2")[0] == "done"
    assert h.adapter.rows("A", ["notice"]) == [], "a commit failure is not a restart"
    assert h.query(
        "SELECT COUNT(*) FROM transcript t JOIN sessions s ON s.key = t.session_key WHERE s.chat_id = 'A'"
    ) == [(4,)]


async def test_at_capacity_busy_sessions_yield_so_a_waiting_session_is_not_starved(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(scheduler={"max_concurrent_turns": 2, "turns_before_yield": 2})
    gate = h.agent.hold_every_turn()  # nothing finishes until every message is queued
    for i in range(30):
        for chat in ("busy1", "busy2"):
            await h.send(f"{chat} {i}", chat_id=chat, delivery_id=f"{chat}-{i}")
        if i == 5:  # admitted before 48 of the busy sessions' messages
            await h.send("late arrival", chat_id="late", delivery_id="late-0")
    await wait(lambda: h.agent.active == 2, message="both slots busy")
    gate.set()

    await h.finals("late", 1, timeout=30)
    answered_before_late = [t.texts for t in h.agent.turns if t.texts != ("late arrival",)][
        : next(i for i, t in enumerate(h.agent.turns) if t.texts == ("late arrival",))
    ]
    # Without yielding, both busy sessions would hold the two slots for all 60 messages first;
    # with it, the late session gets a slot once the messages admitted before it are answered.
    assert len(answered_before_late) < 20, answered_before_late
    for chat in ("busy1", "busy2"):
        assert await h.finals(chat, 30, timeout=30) == [f"echo: {chat} {i}" for i in range(30)]
