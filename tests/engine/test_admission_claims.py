"""Admission claims an idle session in the write that queues its event (``Scheduler.offer``):
no claim-loop pass and no second store write per message, and never ahead of a session that
already waits for a slot, never a session twice, never a claim left leased at a stop."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
from typing import TYPE_CHECKING, Any

from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.turns import Claim, ClaimTerms

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from support.engine_harness import Harness, MakeHarness

    Wait = Callable[..., Awaitable[Any]]


def loop_claims(h: Harness) -> list[str]:
    """The sessions the claim loop takes from now on (a pass-through wrapper of the real store call)."""
    taken: list[str] = []
    real = h.store.claim_sessions

    async def claim_sessions(*args: Any, **kwargs: Any) -> list[Claim]:
        claims = await real(*args, **kwargs)
        taken.extend(c.session_key for c in claims)
        return claims

    h.store.claim_sessions = claim_sessions  # type: ignore[method-assign]
    return taken


async def offered(h: Harness, timeout: float = 5.0) -> ClaimTerms:
    """The scheduler's offer, once its first claim pass found no session waiting for a slot."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (terms := h.scheduler.offer()) is None:
        assert loop.time() < deadline, "the scheduler never offered a slot"
        await asyncio.sleep(0.01)
    return terms


async def settled(h: Harness) -> None:
    """Until the scheduler's first claim pass has found nothing waiting (its offer, given back)."""
    await offered(h)
    h.scheduler.adopt(None)


async def long_turns(h: Harness, wait: Wait, *chats: str) -> dict[str, asyncio.Event]:
    """A held turn running in each chat (text ``<chat> long``); the gates that release them."""
    gates = {chat: h.agent.hold(f"{chat} long") for chat in chats}
    for chat in chats:
        await h.send(f"{chat} long", chat_id=chat, delivery_id=chat)
    await wait(lambda: all(h.agent.running(f"{chat} long") for chat in chats), message="turns running")
    return gates


async def test_messages_to_idle_sessions_are_claimed_by_their_own_admissions(
    make_harness: MakeHarness,
) -> None:
    # No poll: while the claim loop's own claim is in flight it may fill every free slot, so an
    # admission then gets no offer (by design), and the test's 50-ms poll would make that likely.
    h = await make_harness(agent="echo", scheduler={"poll_interval": 30.0})
    taken = loop_claims(h)
    await settled(h)
    for n in range(20):
        await h.send(f"hello {n}", chat_id=f"chat{n}", delivery_id=f"idle-{n}")
        assert await h.finals(f"chat{n}", 1) == [f"echo: hello {n}"]
    assert taken == [], "every session was claimed by the admission that queued its message"
    assert h.query("SELECT status, attempts FROM inbox") == [("done", 1)] * 20


async def test_a_slot_is_offered_only_while_free_and_no_session_waits_for_one(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(scheduler={"max_concurrent_turns": 1}, start=False)
    assert h.scheduler.offer() is None, "not before the scheduler runs"
    await h.start()
    terms = await offered(h)
    assert (terms.owner, terms.batch) == (h.owner, 1)
    assert h.scheduler.offer() is None, "the one slot is promised to the admission in flight"
    h.scheduler.adopt(None)

    gate = h.agent.hold_every_turn()
    await h.send("a", chat_id="A", delivery_id="a")
    await wait(lambda: h.agent.active == 1, message="a running")
    assert h.scheduler.offer() is None, "no free slot"
    await h.send("b", chat_id="B", delivery_id="b")
    await h.send("c", chat_id="C", delivery_id="c")
    gate.set()
    await h.send("d", chat_id="D", delivery_id="d")  # the slot frees now: d must not jump b and c
    for chat in "ABCD":
        await h.finals(chat, 1)
    assert [t.texts for t in h.agent.turns] == [("a",), ("b",), ("c",), ("d",)]


async def test_a_claim_adopted_while_the_scheduler_stops_is_given_back(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness()
    terms = await offered(h)
    inbound = h.inbound("late", delivery_id="late")
    key = h.admission.key_for_source(inbound.source)
    result = await h.store.admit(AdmitRequest(inbound=inbound, session_key=key, claim=terms))
    assert result.claim is not None
    stopping = asyncio.create_task(h.scheduler.stop())
    await asyncio.sleep(0.1)
    assert not stopping.done(), "the stop waits for an admission's claiming write in flight"
    h.scheduler.adopt(result.claim)
    await asyncio.wait_for(stopping, 10)
    assert h.query("SELECT lease_owner FROM sessions WHERE key = ?", key) == [(None,)]
    assert h.inbox("late") == ("queued", 0, None), "its attempt was given back with the lease"
    assert h.agent.turns == []


async def test_bursts_racing_the_end_of_each_sessions_turn_are_answered_once_in_order(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness(agent="echo")
    rng = random.Random(7)

    async def chat(n: int) -> None:
        for i in range(15):
            await h.send(f"c{n} m{i}", chat_id=f"chat{n}", delivery_id=f"c{n}-m{i}")
            await asyncio.sleep(rng.choice((0, 0, 0.001, 0.003)))

    await asyncio.gather(*(chat(n) for n in range(8)))
    for n in range(8):
        assert await h.finals(f"chat{n}", 15, timeout=30) == [f"echo: c{n} m{i}" for i in range(15)]
    assert len(h.adapter.rows(kinds=["final"])) == 120, "none twice"
    assert h.query("SELECT DISTINCT status, attempts FROM inbox") == [("done", 1)]


async def test_no_slot_is_offered_while_the_claim_loops_own_claim_may_fill_it(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(scheduler={"max_concurrent_turns": 1})
    await settled(h)
    entered, release = asyncio.Event(), asyncio.Event()
    real = h.store.claim_sessions

    async def held_claim(*args: Any, **kwargs: Any) -> list[Claim]:
        entered.set()
        await release.wait()
        return await real(*args, **kwargs)

    h.store.claim_sessions = held_claim  # type: ignore[method-assign]
    await asyncio.wait_for(entered.wait(), 5)  # the next poll's claim, for the one free slot
    assert h.scheduler.offer() is None, "the slot may go to the claim in flight"
    release.set()


async def test_a_session_whose_lease_lapsed_mid_turn_never_runs_twice_at_once(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness()
    await settled(h)
    gate = h.agent.hold("first")
    await h.send("first", chat_id="S", delivery_id="first")
    await wait(lambda: h.agent.running("first"), message="first running")
    with sqlite3.connect(h.path, timeout=30) as conn:  # its lease lapses (a stalled renewal)
        conn.execute("UPDATE sessions SET lease_expires = 0")
    await h.send("second", chat_id="S", delivery_id="second")  # claimable again: taken by admission
    await asyncio.sleep(0.2)
    assert h.agent.max_active_per_session == 1, "a second turn of the session started"
    gate.set()
    assert await h.finals("S", 2) == ["echo: first", "echo: second"]
    assert h.agent.max_active_per_session == 1


async def test_one_renewal_task_keeps_every_running_sessions_lease_and_cancels_a_turn_that_lost_it(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(scheduler={"lease_seconds": 2.4})  # renewed every 0.8 s
    gates = await long_turns(h, wait, "kept", "stolen")
    expiries = []
    for _ in range(10):  # 4 s, well past the 2.4-s lease
        await asyncio.sleep(0.4)
        expiries.append(h.query(f"SELECT MIN(lease_expires) - {time.time()} FROM sessions")[0][0])
    assert min(expiries) > 0, f"a running session's lease lapsed: {expiries}"
    assert h.agent.running("kept long") and h.agent.running("stolen long")

    key = h.agent.turns_with("stolen long")[0].request.session_key
    with sqlite3.connect(h.path, timeout=30) as conn:  # another owner has taken it
        conn.execute("UPDATE sessions SET lease_owner = 'thief' WHERE key = ?", (key,))
    await wait(lambda: h.agent.turns_with("stolen long")[0].state == "cancelled", message="turn cancelled")
    gates["kept"].set()
    assert await h.finals("kept", 1) == ["echo: kept long"]
    assert h.adapter.texts("stolen") == [], "a turn whose lease was taken answers nothing"


async def test_a_turn_claimed_by_admission_reads_its_history_and_labels_with_the_claim(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness(turns={"history_limit": 3})
    await settled(h)
    reads: list[str] = []
    for name in ("history", "chat_labels"):
        real = getattr(h.store, name)

        async def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            reads.append(_name)
            return await _real(*args, **kwargs)

        setattr(h.store, name, counted)
    for n in range(3):
        await h.send(f"turn {n}", chat_id="g1", chat_name="Team", chat_type="group", delivery_id=f"t{n}")
        await h.finals("g1", n + 1)
    assert reads == [], "the turns read nothing of their own"
    last = h.agent.turns_with("turn 2")[0].request
    assert [(e.role, e.content) for e in last.history] == [
        ("assistant", "echo: turn 0"),
        ("user", "turn 1"),
        ("assistant", "echo: turn 1"),
    ], "the last history_limit rows, oldest first"
    assert "Team" in last.system


async def test_a_renewal_that_raises_for_one_session_keeps_renewing_the_others(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(scheduler={"lease_seconds": 2.4})  # renewed every 0.8 s
    gates = await long_turns(h, wait, "fine", "broken")
    broken = h.agent.turns_with("broken long")[0].request.session_key
    real = h.store.renew_lease

    async def renew_lease(key: str, *args: Any) -> bool:
        if key == broken:
            raise RuntimeError("a bug in one renewal")
        return await real(key, *args)

    h.store.renew_lease = renew_lease  # type: ignore[method-assign]
    # Unrenewed, the broken session's turn is given up before its lease could pass to another.
    await wait(lambda: h.agent.turns_with("broken long")[0].state == "cancelled", timeout=15)
    fine = h.agent.turns_with("fine long")[0].request.session_key
    (left,) = h.query(f"SELECT lease_expires - {time.time()} FROM sessions WHERE key = ?", fine)[0]
    assert left > 0 and h.agent.running("fine long"), "the other session's lease was kept"
    gates["fine"].set()
    assert await h.finals("fine", 1) == ["echo: fine long"]


async def test_a_promised_slot_left_unused_goes_at_once_to_the_session_waiting_for_it(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness(agent="echo", scheduler={"max_concurrent_turns": 1, "poll_interval": 30.0})
    await offered(h)  # an admission in flight holds the only slot
    await h.send("y", chat_id="Y", delivery_id="y")  # offered nothing: it waits for the slot
    await asyncio.sleep(0.2)
    assert h.adapter.texts("Y") == []
    h.scheduler.adopt(None)  # that admission claimed nothing (a redelivery, a failed write)
    assert await h.finals("Y", 1, timeout=5) == ["echo: y"], "not left to the 30-s poll"
