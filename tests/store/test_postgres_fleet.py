"""Two PostgreSQL stores on one schema behave as two gateway processes of a fleet.

Leases and outbox rows are claimed with ``FOR UPDATE SKIP LOCKED`` (concurrent claims are
disjoint), a start's ``recover`` takes only what a dead peer left (a peer is dead when its
liveness lock is gone: its connections were killed), a stale owner's late commit is refused,
and the events of one session are handled in the order their admissions committed.
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from chatgate.domain.errors import LeaseLost
from chatgate.domain.outbox import OutboxRow, OutboxSettlement
from chatgate.store.postgres import PostgresStore
from contract.kit import T0, approval, draft, put_outbox, req
from support.postgres import kill_connections, make_store_fixture, pg_schema_fixture, sql  # noqa: F401
from support.store_values import outcome

pytestmark = pytest.mark.xdist_group("postgres-backend")


GRACE = 0.3
"""The reap grace of these stores (5 s by default): a dead peer is reaped this long after it went silent."""


LIVE_GRACE = 2.0
"""The grace where a test must show a live process is *not* reaped: a loaded machine can leave
0.3 s between two of its claims, which would prove nothing but the machine's load."""


async def _pair(make_store, grace: float = GRACE) -> tuple[PostgresStore, PostgresStore]:
    a, b = make_store(reap_grace=grace), make_store(reap_grace=grace)
    await a.open()
    await b.open()
    return a, b


async def die(store: PostgresStore) -> None:
    """The process is SIGKILLed: the server sees its connections drop, nothing is released."""
    await kill_connections(store)


async def test_a_start_leaves_a_live_peers_leases_alone_and_takes_a_dead_peers(make_store):
    a, b = await _pair(make_store)
    await a.admit(req("d1", "k1"))
    await a.admit(req("d2", "k2"))
    (mine,) = await a.claim_sessions("proc-a", 1, 3600.0, 1)
    assert mine.session_key == "k1"
    assert await b.recover("proc-b") == 0, "a's lease is live: a live peer keeps it"
    info = await b.session_info("k1")
    assert info is not None and info.leased_by == "proc-a"
    assert [c.session_key for c in await b.claim_sessions("proc-b", 10, 3600.0, 1)] == ["k2"]

    await die(a)
    released = await _eventually(lambda: b.recover("proc-b"), timeout=30)
    assert released == 1, "a died: its lease is taken back once it is silent, not at its expiry"
    (taken,) = await b.claim_sessions("proc-b", 10, 30.0, 1)
    assert taken.session_key == "k1" and taken.items[0].attempts == 2


async def test_a_stale_owners_late_commit_is_refused_and_changes_nothing(make_store):
    a, b = await _pair(make_store)
    await a.admit(req("d1", "k1", "one"))
    (stale,) = await a.claim_sessions("proc-a", 10, 0.05, 1)
    (fresh,) = await _eventually(lambda: b.claim_sessions("proc-b", 10, 30.0, 1))
    with pytest.raises(LeaseLost):
        await a.complete_turn("proc-a", outcome(stale, draft("final:stale"), reply="stale"), 30.0, 1)
    done = await b.complete_turn("proc-b", outcome(fresh, draft("final:fresh"), reply="fresh"), 30.0, 1)
    assert done is None
    assert [e.content for e in await b.history(fresh.session_id, 10)] == ["one", "fresh"]
    assert [r.idem_key for r in await b.unconfirmed_for_chat("webchat", "c1")] == ["final:fresh"]


async def test_concurrent_claims_of_two_processes_take_disjoint_sessions_and_miss_none(make_store):
    a, b = await _pair(make_store)
    for i in range(120):
        await a.admit(req(f"d{i}", f"k{i}"))
    taken: dict[str, list[str]] = {"a": [], "b": []}

    async def claimer(name: str, store: PostgresStore) -> None:
        while claims := await store.claim_sessions(name, 7, 3600.0, 1):
            taken[name] += [c.session_key for c in claims]

    await asyncio.gather(claimer("a", a), claimer("b", b))
    assert not set(taken["a"]) & set(taken["b"])
    assert sorted(taken["a"] + taken["b"]) == sorted(f"k{i}" for i in range(120))
    assert taken["a"] and taken["b"], "both processes got work"


async def test_concurrent_outbox_claims_are_disjoint_and_a_dead_claimers_rows_come_back(make_store):
    a, b = await _pair(make_store)
    await a.enqueue_outbox([draft(f"r{i}", f"chat{i}", key=f"notice-{i}") for i in range(40)])  # no route
    rows_a, rows_b = await asyncio.gather(a.claim_outbox(25), b.claim_outbox(25))
    ids_a, ids_b = {r.id for r in rows_a}, {r.id for r in rows_b}
    assert not ids_a & ids_b and len(ids_a | ids_b) == 40
    await b.settle_outbox([OutboxSettlement(r.id, "sent") for r in rows_b])
    assert await b.recover("proc-b") == 0
    assert await b.claim_outbox(100) == [], "a's sends are in flight: a live peer's rows stay its own"
    await die(a)

    async def taken_back() -> list[OutboxRow]:
        await b.recover("proc-b")
        return await b.claim_outbox(100)

    back = await _eventually(taken_back)
    assert {r.id for r in back} == ids_a and all(r.possibly_duplicate for r in back)


async def test_a_sessions_events_are_handled_in_the_order_their_admissions_committed(make_store):
    """Two processes admit into the same few sessions at once while a third claims and commits
    turns one item at a time: every session's items come out in strictly increasing seq, and
    each client's messages (sent one after the other) in the order it sent them."""
    a, b = await _pair(make_store)
    worker = make_store()
    await worker.open()
    sessions = [f"k{i}" for i in range(4)]
    handled: dict[str, list[tuple[int, str]]] = {k: [] for k in sessions}
    done = asyncio.Event()

    async def client(store: PostgresStore, name: str) -> None:
        rng = random.Random(name)
        for i in range(30):
            key = rng.choice(sessions)
            await store.admit(req(f"{name}-{i}", key, f"{name} {i:02d}"))

    async def work() -> None:
        while not done.is_set() or await worker.queue_depth():
            for claim in await worker.claim_sessions("w", 10, 30.0, 1):
                nxt = claim
                while nxt is not None:
                    item = nxt.items[0]
                    handled[nxt.session_key].append((item.seq, item.inbound.text))
                    nxt = await worker.complete_turn("w", outcome(nxt), 30.0, 1)
            await asyncio.sleep(0)

    worker_task = asyncio.create_task(work())
    await asyncio.gather(*(client(s, f"{n}{j}") for n, s in (("a", a), ("b", b)) for j in range(3)))
    done.set()
    await asyncio.wait_for(worker_task, 60)
    assert sum(len(v) for v in handled.values()) == 180
    for key, items in handled.items():
        seqs = [seq for seq, _ in items]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), key
        for name in {text.split()[0] for _, text in items}:
            mine = [text for _, text in items if text.split()[0] == name]
            assert mine == sorted(mine), f"{name}'s messages in {key} out of order"


async def _eventually(fn, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (value := await fn()):
        assert loop.time() < deadline, "condition never became true"
        await asyncio.sleep(0.01)
    return value


async def test_a_chats_replies_are_sent_by_the_process_it_wrote_through_while_that_one_lives(make_store):
    """A web client is connected to one process: the replies of its session are that process's
    to deliver (another would find no client and defer them); a dead one's go to anyone."""
    a, b = await _pair(make_store)
    await put_outbox(a, draft("via-a", "chat-a", key="ka"))
    await put_outbox(b, draft("via-b", "chat-b", key="kb"))
    assert [r.idem_key for r in await b.claim_outbox(10)] == ["via-b"]
    assert [r.idem_key for r in await a.claim_outbox(10)] == ["via-a"]
    await put_outbox(a, draft("via-a-2", "chat-a2", key="ka"))
    await die(a)
    assert [r.idem_key for r in await b.claim_outbox(10)] == [], "a is not reaped yet"

    async def reaped_then_claimed() -> list[OutboxRow]:
        await b.claim_sessions("proc-b", 10, 30.0, 1)  # every claim reaps the dead first
        return await b.claim_outbox(10)

    assert sorted(r.idem_key for r in await _eventually(reaped_then_claimed)) == ["via-a", "via-a-2"]


async def test_a_live_process_whose_liveness_connection_was_cut_is_not_taken_for_dead(make_store):
    """A database blip cuts a live process's liveness connection: its lock is free for a moment,
    but it keeps claiming (its heartbeat), so no peer reaps it, and it takes its lock again."""
    a, b = await _pair(make_store, LIVE_GRACE)
    await a.admit(req("d1", "k1"))
    (claim,) = await a.claim_sessions("proc-a", 10, 3600.0, 1)
    (row,) = await sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1"
        " AND pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)",
        f"chatgate {a.holder}",
    )
    assert row[0] is True
    loop = asyncio.get_running_loop()
    until = loop.time() + 1.5 * LIVE_GRACE  # past the grace: without its claims, a would be reaped
    while loop.time() < until:  # a goes on claiming (nothing to claim) and b keeps checking
        await a.claim_sessions("proc-a", 10, 3600.0, 1)
        assert await b.recover("proc-b") == 0, "a is alive: nothing of it is taken"
        await asyncio.sleep(LIVE_GRACE / 10)
    info = await b.session_info("k1")
    assert info is not None and info.leased_by == "proc-a"
    assert await a.complete_turn("proc-a", outcome(claim), 30.0, 1) is None


async def test_the_other_processes_hear_of_new_work_stops_and_answers_at_commit(make_store):
    a, b = await _pair(make_store)
    heard: list[str] = []
    b.add_listener(heard.append)
    await a.admit(req("d1", "k1"))
    await _eventually(lambda: _async("inbox" in heard))
    (claim,) = await b.claim_sessions("proc-b", 10, 30.0, 1)
    await a.admit(req("stop-1", "k1", "/stop", queued=False, cancel_queued=True))
    await _eventually(lambda: _async("stop:k1" in heard))  # b runs k1's turn: it must stop it
    await a.enqueue_outbox([draft("notice:1")])
    await _eventually(lambda: _async("outbox" in heard))
    await a.create_approval(approval("p-1"))
    await a.resolve_approval("p-1", "denied", None, "u1", None, T0)
    await _eventually(lambda: _async("approval:p-1" in heard))
    assert claim.session_key == "k1"


async def _async(value: bool) -> bool:
    return value


async def test_a_turn_commit_claims_its_reply_only_for_the_process_its_chat_is_reached_through(make_store):
    """``commit_turn`` claims a row only where ``claim_outbox`` would hand it out: b ran the turn
    of a session whose client is connected to a, so the reply stays pending for a to send."""
    a, b = await _pair(make_store)
    await a.admit(req("d1", "ka", chat_id="chat-a"))
    (claim,) = await b.claim_sessions("proc-b", 10, 30.0, 1)
    turn = outcome(claim, draft("final:a", "chat-a", key="ka"))
    assert (await b.commit_turn("proc-b", turn, 30.0, 1, 1)).sending == ()
    assert await b.claim_outbox(10) == []
    assert [r.idem_key for r in await a.claim_outbox(10)] == ["final:a"]
    await b.admit(req("d2", "kb", chat_id="chat-b"))
    (mine,) = await b.claim_sessions("proc-b", 10, 30.0, 1)
    (row,) = (
        await b.commit_turn("proc-b", outcome(mine, draft("final:b", "chat-b", key="kb")), 30.0, 1, 1)
    ).sending
    assert row.idem_key == "final:b"
    assert await a.claim_outbox(10) == [], "claimed by b in its commit: never handed out to a"


async def test_a_reply_a_dead_process_claimed_in_its_turn_commit_is_resent_by_a_peer_once(make_store):
    a, b = await _pair(make_store)
    await a.admit(req("d1", "ka"))
    (claim,) = await a.claim_sessions("proc-a", 10, 30.0, 1)
    (row,) = (await a.commit_turn("proc-a", outcome(claim, draft("final:1", key="ka")), 30.0, 1, 1)).sending
    assert await b.claim_outbox(10) == [], "a live peer's claimed row stays its own"
    await die(a)

    async def taken_back() -> list[OutboxRow]:
        await b.recover("proc-b")
        return await b.claim_outbox(10)

    (back,) = await _eventually(taken_back)
    assert (back.id, back.possibly_duplicate, back.attempts) == (row.id, True, 2)
    assert await b.claim_outbox(10) == []


async def test_a_hello_on_another_process_moves_the_chats_replies_and_its_later_ones_there(make_store):
    """The web client said hello on b: the reply a would have delivered (to no socket) is b's
    now, due at once, and a reply the session records later is b's too, whoever ran the turn."""
    a, b = await _pair(make_store)
    await a.admit(req("d1", "ka", chat_id="chat-a"))
    await put_outbox(a, draft("before", "chat-a", key="ka"))
    assert await b.hold_chat_route("webchat", "chat-a") == 1
    assert await b.hold_chat_route("webchat", "chat-a") == 0, "already b's: nothing moves twice"
    assert await a.claim_outbox(10) == []
    (row,) = await b.claim_outbox(10)
    assert row.idem_key == "before"
    await b.settle_outbox([OutboxSettlement(row.id, "sent")])
    (claim,) = await a.claim_sessions("proc-a", 10, 30.0, 1)
    turn = outcome(claim, draft("after", "chat-a", key="ka"))
    assert (await a.commit_turn("proc-a", turn, 30.0, 1, 1)).sending == (), "a's commit leaves it to b"
    assert [r.idem_key for r in await b.claim_outbox(10)] == ["after"]


async def test_a_reply_deferred_while_its_client_moved_is_due_at_once_where_the_client_is(make_store):
    """a was sending when the client moved to b: a finds no socket and puts the row back for a
    minute (no client here), but it is b's now and due at once, not after a's retry."""
    a, b = await _pair(make_store)
    await a.admit(req("d1", "ka", chat_id="chat-a"))
    await put_outbox(a, draft("in-flight", "chat-a", key="ka"))
    (row,) = await a.claim_outbox(10)
    assert await b.hold_chat_route("webchat", "chat-a") == 1
    assert await b.claim_outbox(10) == [], "still a's attempt"
    retry = time.time() + 60.0  # a Deferred's retry
    await a.settle_outbox([OutboxSettlement(row.id, "pending", retry_at=retry, counts_attempt=False)])
    assert [r.idem_key for r in await b.claim_outbox(10)] == ["in-flight"]


async def test_a_deferred_reply_of_a_chat_whose_route_holder_died_keeps_its_retry_time(make_store):
    """Any process may take a dead holder's rows; one that finds no client there waits its retry
    (it would otherwise take the row back again at once, forever)."""
    a, b = await _pair(make_store)
    await put_outbox(a, draft("orphan", "chat-a", key="ka"))
    await die(a)

    async def reaped_then_claimed() -> list[OutboxRow]:
        await b.claim_sessions("proc-b", 10, 30.0, 1)
        return await b.claim_outbox(10)

    (row,) = await _eventually(reaped_then_claimed)
    far = 4_000_000_000.0
    await b.settle_outbox([OutboxSettlement(row.id, "pending", retry_at=far, counts_attempt=False)])
    assert await b.claim_outbox(10) == []
