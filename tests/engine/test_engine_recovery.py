"""Restarts: the stuck-loop guard, the resume notice, and a graceful scheduler stop.

A "death" here is real for the store: an owner claims the session (a turn starts) and is never
heard of again; the next owner runs the start-up recovery (``recover``) that the gateway runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from support.engine_harness import Harness, MakeHarness

    Wait = Callable[..., Awaitable[Any]]

MAX_ATTEMPTS = 2
"""Deaths blamed on a message (it ran isolated) before it is given up."""
SUSPECT_AFTER = 2
"""Deaths a message is in flight at, unblamed, before it runs isolated."""


async def die_mid_turn(h: Harness, deaths: int) -> None:
    """Each 'process' claims the session (a turn starts) and dies; the next one recovers."""
    for n in range(deaths):
        claims = await h.store.claim_sessions(f"dead-{n}", 10, 30.0, 1)
        assert [c.items[0].attempts for c in claims] == [n + 1]
        assert [c.isolated for c in claims] == [n >= SUSPECT_AFTER], "a suspect runs isolated"
        await h.store.recover(f"dead-{n + 1}")  # what the next start does first


@pytest.mark.parametrize("deaths", [1, 2, 3])
async def test_a_turn_resumed_after_a_restart_sends_a_notice_before_its_final(
    make_harness: MakeHarness, wait: Wait, deaths: int
) -> None:
    h = await make_harness(start=False, owner="survivor", turns={"max_attempts": MAX_ATTEMPTS})
    await h.send("work", delivery_id="w1")
    await die_mid_turn(h, deaths)
    await h.start()

    await wait(lambda: len(h.adapter.rows("c1")) >= 2, message="notice and final")
    rows = h.adapter.rows("c1")
    assert [r.kind for r in rows] == ["notice", "final"]
    assert "restarted" in rows[0].text
    assert rows[1].text == "echo: work"
    assert rows[0].in_reply_to == rows[1].in_reply_to == "ref-w1"
    assert h.inbox("w1") == ("done", deaths + 1, "ok")
    assert len(h.agent.turns_with("work")) == 1


async def test_a_turn_that_keeps_dying_is_given_up_with_a_final_that_says_so(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness(start=False, owner="survivor", turns={"max_attempts": MAX_ATTEMPTS})
    await h.send("poison", delivery_id="p1")
    await die_mid_turn(h, SUSPECT_AFTER + MAX_ATTEMPTS)
    await h.start()

    (final,) = await h.finals("c1", 1)
    assert "gave up" in final
    assert h.adapter.rows("c1", ["notice"]) == []
    assert h.inbox("p1") == ("done", SUSPECT_AFTER + MAX_ATTEMPTS + 1, "given_up")
    assert h.agent.turns == [], "a given-up message is not run again"
    assert h.metric("chatgate_turns_total", outcome="given_up") == 1

    # The session is not stuck behind it.
    await h.send("next")
    assert await h.finals("c1", 2) == [final, "echo: next"]


async def test_a_scheduler_stopped_mid_turn_leaves_the_item_queued_uncounted_for_the_next_owner(
    make_harness: MakeHarness, wait: Wait
) -> None:
    first = await make_harness(owner="first")
    first.agent.hold("m1")  # never released: the turn is still running when we stop
    await first.send("m1", delivery_id="m1")
    await wait(lambda: first.agent.running("m1"), message="m1's turn running")
    assert first.inbox("m1")[:2] == ("queued", 1)

    await first.scheduler.stop()

    assert [t.state for t in first.agent.turns_with("m1")] == ["cancelled"]
    assert first.inbox("m1") == ("queued", 0, None), "returned to the queue, attempt not counted"
    assert first.query("SELECT lease_owner FROM sessions") == [(None,)]
    await first.stop()

    second = await make_harness(owner="second")  # same database file, new owner
    assert await second.finals("c1", 1) == ["echo: m1"]
    await second.send("m2")
    assert await second.finals("c1", 2) == ["echo: m1", "echo: m2"]
    assert len(second.agent.turns_with("m1")) == 1
    assert second.adapter.rows("c1", ["notice"]) == [], "a graceful stop is not a crash"
    assert second.inbox("m1") == ("done", 1, "ok")
    assert first.adapter.delivered == []
