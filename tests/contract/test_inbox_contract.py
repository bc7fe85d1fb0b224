"""The inbox role's contract: admission commits once per delivery, with a command's effects in the
same transaction; running items can be cancelled; rejected deliveries are kept; the queue reports itself."""

from __future__ import annotations

import asyncio
import time

import pytest
from msgspec.structs import replace

from chatgate.domain.edits import EDIT_OF
from chatgate.domain.errors import LeaseLost
from chatgate.domain.inbox import AdmitRequest, QueueStats
from chatgate.domain.store_roles import (
    Inbox,
    Leases,
    Transcript,
)
from chatgate.domain.turns import ClaimTerms
from contract.kit import covers, draft, eventually, req, texts
from support.store_values import outcome


@covers(Inbox.admit, Inbox.queue_depth)
async def test_redelivered_delivery_id_returns_the_original_seq_and_session_key(store):
    first = await store.admit(req("d1", "k1"))
    again = await store.admit(req("d1", "k1"))
    assert first.new and not again.new
    assert (again.seq, again.session_key) == (first.seq, first.session_key)
    assert await store.queue_depth() == 1


@covers(Inbox.admit, Inbox.make_durable)
async def test_a_replayable_admission_is_committed_at_once_and_made_durable_on_request(store):
    """A relaxed admission (``AdmitRequest.relaxed``) is as committed as any when ``admit``
    returns; ``make_durable`` returns once it is on the disk too (at once where every commit is)."""
    first = await store.admit(replace(req("d1", "k1"), redoable=True))
    assert first.new
    await asyncio.wait_for(store.make_durable(), 10)
    again = await store.admit(req("d1", "k1"))
    assert (again.new, again.seq) == (False, first.seq)
    await asyncio.wait_for(store.make_durable(), 10)
    assert await store.queue_depth() == 1


@covers(Inbox.admit)
async def test_redelivery_keeps_the_session_key_decided_at_first_admission(store):
    first = await store.admit(req("d1", "k1"))
    again = await store.admit(req("d1", "k2"))
    assert (again.new, again.session_key, again.seq) == (False, "k1", first.seq)
    assert await store.session_info("k2") is None


@covers(Inbox.admit)
async def test_concurrent_copies_of_one_delivery_are_admitted_exactly_once(store):
    results = await asyncio.gather(*(store.admit(req("d1", "k1")) for _ in range(50)))
    assert sum(r.new for r in results) == 1
    assert len({(r.seq, r.session_key) for r in results}) == 1
    assert await store.queue_depth() == 1
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 100)
    assert [i.inbound.delivery_id for i in claim.items] == ["d1"]


@covers(Inbox.admit)
async def test_identical_texts_with_different_delivery_ids_are_two_items(store):
    a = await store.admit(req("d1", "k1", "same"))
    b = await store.admit(req("d2", "k1", "same"))
    assert a.new and b.new and a.seq < b.seq
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 10)
    assert [(i.inbound.delivery_id, i.inbound.text) for i in claim.items] == [("d1", "same"), ("d2", "same")]


@covers(Inbox.admit, Inbox.queue_depth)
async def test_one_delivery_id_on_two_transports_is_two_items(store):
    a = await store.admit(req("d1", "k1", transport="telegram-webhook"))
    b = await store.admit(req("d1", "k1", transport="telegram-poll"))
    assert a.new and b.new and a.seq != b.seq
    assert await store.queue_depth() == 2


@covers(Inbox.admit)
async def test_command_admission_is_not_queued_and_commits_its_reply_once(store):
    command = req("d1", "k1", "/status", queued=False, reply=draft("cmd:d1", kind="command", text="idle"))
    assert (await store.admit(command)).new
    assert await store.queue_depth() == 0
    assert await store.claim_sessions("w1", 10, 30.0, 10) == []
    assert not (await store.admit(command)).new
    (row,) = await store.unconfirmed_for_chat("webchat", "c1")
    assert (row.kind, row.text, row.status, row.session_key) == ("command", "idle", "pending", "k1")
    assert row.target == {"chat_id": "c1", "n": 1}


@covers(Inbox.admit)
async def test_cancel_command_cancels_the_sessions_queued_items_in_the_same_commit(store):
    for i in range(3):
        await store.admit(req(f"d{i}", "k1"))
    await store.admit(req("e1", "k2", chat_id="c2"))
    (running,) = await store.claim_sessions("w1", 1, 30.0, 1)
    assert running.session_key == "k1"
    stop = req(
        "stop-1", "k1", "/stop", queued=False, cancel_queued=True, reply=draft("cmd:stop-1", kind="command")
    )
    result = await store.admit(stop)
    assert (result.new, result.cancelled) == (True, 3)
    assert await store.queue_depth() == 1
    k1 = await store.session_info("k1")
    assert k1 is not None and k1.queued == 0
    assert [r.idem_key for r in await store.unconfirmed_for_chat("webchat", "c1")] == ["cmd:stop-1"]
    (other,) = await store.claim_sessions("w2", 10, 30.0, 1)
    assert other.session_key == "k2"
    assert (await store.admit(stop)).cancelled == 0  # a redelivered /stop cancels nothing more


@covers(Inbox.admit, Leases.complete_turn)
async def test_complete_turn_for_cancelled_items_raises_lease_lost(store):
    await store.admit(req("d1", "k1", "one"))
    await store.admit(req("d2", "k1", "two"))
    (running,) = await store.claim_sessions("w1", 10, 30.0, 1)
    await store.admit(req("stop-1", "k1", "/stop", queued=False, cancel_queued=True))
    with pytest.raises(LeaseLost):
        await store.complete_turn("w1", outcome(running, draft("final:1")), 30.0, 1)
    assert await store.history(running.session_id, 10) == []
    assert await store.unconfirmed_for_chat("webchat", "c1") == []
    await store.abandon_turn("w1", "k1", (running.items[0].seq,), None, None)
    await store.admit(req("d3", "k1", "three"))
    (after,) = await store.claim_sessions("w1", 10, 30.0, 10)
    assert texts(after) == ["three"]  # cancelled items never come back


@covers(Inbox.admit)
async def test_cancel_reply_states_how_many_items_were_cancelled(store):
    await store.admit(req("d1", "k1"))
    await store.admit(req("d2", "k1"))
    text = "Stopped. Dropped {cancelled} waiting message(s)."
    reply = draft("cmd:stop-1", kind="command", text=text)
    await store.admit(req("stop-1", "k1", "/stop", queued=False, cancel_queued=True, reply=reply))
    (row,) = await store.unconfirmed_for_chat("webchat", "c1")
    assert row.text == "Stopped. Dropped 2 waiting message(s)."


@covers(Inbox.admit, Transcript.history)
async def test_reset_session_starts_a_new_session_id_and_keeps_old_history_apart(store):
    await store.admit(req("d1", "k1", "before"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    await store.complete_turn("w1", outcome(claim), 30.0, 1)
    old_id = claim.session_id
    await store.admit(req("new-1", "k1", "/new", queued=False, cancel_queued=True, reset_session=True))
    info = await store.session_info("k1")
    assert info is not None and info.session_id != old_id
    assert await store.history(info.session_id, 10) == []
    assert len(await store.history(old_id, 10)) == 2
    await store.admit(req("d2", "k1", "after"))
    (fresh,) = await store.claim_sessions("w1", 10, 30.0, 1)
    assert fresh.session_id == info.session_id and texts(fresh) == ["after"]


@covers(Inbox.cancel_running)
async def test_cancel_running_cancels_only_the_items_a_turn_has_picked_up(store):
    for i in range(3):
        await store.admit(req(f"d{i}", "k1", f"m{i}"))
    await store.admit(req("e1", "k2", chat_id="c2"))
    (running,) = await store.claim_sessions("w1", 1, 30.0, 2)
    assert texts(running) == ["m0", "m1"]
    assert await store.cancel_running("k1", "cancelled by relay interrupt") == 2
    info = await store.session_info("k1")
    assert info is not None and (info.queued, info.waiting) == (1, 1)
    assert await store.cancel_running("k1", "again") == 0  # the waiting item stays
    assert await store.cancel_running("unknown", "nothing") == 0
    with pytest.raises(LeaseLost):
        await store.complete_turn("w1", outcome(running), 30.0, 1)
    await store.abandon_turn("w1", "k1", tuple(i.seq for i in running.items), None, None)
    claims = await store.claim_sessions("w1", 10, 30.0, 10)
    assert {c.session_key: texts(c) for c in claims} == {"k1": ["m2"], "k2": ["hello"]}


@covers(Inbox.record_rejected, Inbox.rejected)
async def test_rejected_deliveries_are_kept_with_their_reason_newest_first_and_never_queued(store):
    assert await store.rejected() == []
    before = time.time()
    await store.record_rejected("relay", "d1", "unsupported: ping", '{"type":1}')
    await store.record_rejected("relay", None, "malformed frame", "{not json")
    after = time.time()
    rows = await store.rejected()
    assert [(r.transport, r.delivery_id, r.reason, r.excerpt) for r in rows] == [
        ("relay", None, "malformed frame", "{not json"),
        ("relay", "d1", "unsupported: ping", '{"type":1}'),
    ]
    assert all(before <= r.received_at <= after for r in rows)
    assert [r.reason for r in await store.rejected(limit=1)] == ["malformed frame"]
    assert await store.queue_depth() == 0
    assert await store.claim_sessions("w1", 10, 30.0, 1) == []


@covers(Inbox.queue_stats, Inbox.queue_depth)
async def test_queue_stats_report_the_depth_the_oldest_waiting_admission_and_the_latest_error(store):
    assert await store.queue_stats() == QueueStats(0, None, None)
    before = time.time()
    await store.admit(req("d1", "k1"))
    between = time.time()
    await store.admit(req("e1", "k2", chat_id="c2"))
    await store.admit(req("cmd-1", "k1", "/status", queued=False))  # a command is never queued
    stats = await store.queue_stats()
    assert (stats.depth, stats.last_error) == (2, None)
    assert stats.oldest_admitted_at is not None and before <= stats.oldest_admitted_at <= between
    assert await store.queue_depth() == 2
    claims = {c.session_key: c for c in await store.claim_sessions("w1", 10, 30.0, 1)}
    await store.abandon_turn("w1", "k1", (claims["k1"].items[0].seq,), time.time() + 3600, "turn failed: x")
    assert await store.complete_turn("w1", outcome(claims["k2"]), 30.0, 1) is None
    stats = await store.queue_stats()
    assert (stats.depth, stats.last_error) == (1, "turn failed: x")
    assert stats.oldest_admitted_at is not None and before <= stats.oldest_admitted_at <= between
    await store.admit(req("stop-1", "k1", "/stop", queued=False, cancel_queued=True))
    assert await store.queue_stats() == QueueStats(0, None, None)


def _edit(delivery_id: str, of: str, text: str, key: str = "k1") -> AdmitRequest:
    base = req(delivery_id, key, text)
    return replace(base, inbound=replace(base.inbound, message_ref=of, payload={EDIT_OF: of}))


@covers(Inbox.admit, Inbox.queue_depth)
async def test_an_edit_of_a_message_still_waiting_replaces_its_text_and_is_done(store):
    first = await store.admit(req("m1", "k1", "meet at 5"))
    await store.admit(req("m2", "k1", "and bring cake"))
    edit = await store.admit(_edit("m1:edit:1", "m1", "meet at 6"))
    again = await store.admit(_edit("m1:edit:1", "m1", "meet at 6"))  # the transport redelivers it
    assert edit.new and not again.new and again.seq == edit.seq
    assert await store.queue_depth() == 2  # the edit is not a message of its own
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 10)
    assert [(i.seq, i.inbound.text) for i in claim.items] == [
        (first.seq, "meet at 6"),
        (first.seq + 1, "and bring cake"),
    ]


@covers(Inbox.admit)
async def test_an_edit_of_a_message_a_turn_has_taken_is_an_event_of_its_own(store):
    await store.admit(req("m1", "k1", "meet at 5"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 10)
    edit = await store.admit(_edit("m1:edit:1", "m1", "meet at 6"))
    later = await store.complete_turn("w1", outcome(claim), 30.0, 10)  # takes the session's next batch
    assert later is not None
    assert [(i.seq, i.inbound.text) for i in later.items] == [(edit.seq, "meet at 6")]
    assert later.items[0].inbound.payload == {EDIT_OF: "m1"}  # the turn's fold says it is an edit


@covers(Inbox.admit)
async def test_an_edit_never_reaches_into_another_session(store):
    await store.admit(req("m1", "k1", "meet at 5"))
    await store.admit(_edit("m1:edit:1", "m1", "meet at 6", key="k2"))
    claims = {c.session_key: c for c in await store.claim_sessions("w1", 10, 30.0, 10)}
    assert [i.inbound.text for i in claims["k1"].items] == ["meet at 5"]
    assert [i.inbound.text for i in claims["k2"].items] == ["meet at 6"]


async def _claimed_by_admission_or_loop(store, result, terms: ClaimTerms):
    """A store may decline admission's claim (PostgreSQL does): the claim loop then takes it."""
    assert (result.claim is not None) == store.claims_on_admit, "an idle session: claimed where it says so"
    if result.claim is not None:
        return result.claim
    (claim,) = await store.claim_sessions(terms.owner, 10, terms.lease_seconds, terms.batch)
    return claim


@covers(Inbox.admit, Leases.claim_sessions)
async def test_an_admission_that_claims_leases_the_session_with_its_head_items(store):
    await store.admit(req("d0", "k1", "first"))
    terms = ClaimTerms("w1", 30.0, 5)
    result = await store.admit(replace(req("d1", "k1", "second"), claim=terms))
    claim = await _claimed_by_admission_or_loop(store, result, terms)
    assert (claim.session_key, texts(claim)) == ("k1", ["first", "second"])
    assert [i.attempts for i in claim.items] == [1, 1]
    info = await store.session_info("k1")
    assert info is not None and info.leased_by == "w1"
    assert await store.claim_sessions("w2", 10, 30.0, 5) == [], "one owner per session"


@covers(Inbox.admit)
async def test_an_admission_claims_nothing_the_claim_loop_would_not(store):
    terms = ClaimTerms("w1", 30.0, 1)
    await store.admit(req("b0", "busy"))
    (held,) = await store.claim_sessions("w2", 10, 30.0, 1)
    assert (await store.admit(replace(req("b1", "busy"), claim=terms))).claim is None, "leased elsewhere"

    await store.admit(req("r0", "later"))
    (retry,) = await store.claim_sessions("w2", 10, 30.0, 1)
    await store.abandon_turn("w2", "later", (retry.items[0].seq,), time.time() + 60, "boom")
    assert (await store.admit(replace(req("r1", "later"), claim=terms))).claim is None, "retry pending"

    again = await store.admit(replace(req("b0", "busy"), claim=terms))
    assert not again.new and again.claim is None, "a redelivery claims nothing"
    command = replace(req("c0", "idle", queued=False), claim=terms)
    assert (await store.admit(command)).claim is None, "a command queues nothing to run"
    assert held.session_key == "busy"


@covers(Inbox.admit)
async def test_an_admission_leaves_a_suspect_to_the_claim_loop(store):
    await store.admit(req("s0", "k1"))
    (dead,) = await store.claim_sessions("dead-0", 10, 0.05, 1)
    await eventually(lambda: store.claim_sessions("dead-1", 10, 0.05, 1))  # two owners died with it
    await asyncio.sleep(0.1)  # the second lease lapses too
    result = await store.admit(replace(req("s1", "k1"), claim=ClaimTerms("w1", 30.0, 1)))
    assert result.new and result.claim is None, "a suspect runs alone, claimed by the claim loop"
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1, 1)
    assert claim.isolated and claim.items[0].seq == dead.items[0].seq
