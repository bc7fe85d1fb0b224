"""The leases role's contract: claims in admission order, one owner per session, a turn's commit
handing over the next batch in the same transaction, and abandons that give attempts back."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatgate.domain.errors import LeaseLost
from chatgate.domain.history import HistoryEntry
from chatgate.domain.outbox import OutboxSettlement
from chatgate.domain.store_roles import (
    Leases,
    Lifecycle,
    Outbox,
)
from chatgate.domain.turns import Claim
from chatgate.store.base import Store
from contract.kit import covers, draft, eventually, put_outbox, req, texts
from support.store_values import outcome


@covers(Leases.claim_sessions)
async def test_claims_order_sessions_by_their_oldest_queued_item(store):
    for delivery_id, key in [("d1", "kc"), ("d2", "ka"), ("d3", "kb"), ("d4", "kc"), ("d5", "ka")]:
        await store.admit(req(delivery_id, key))
    claims = await store.claim_sessions("w1", 10, 30.0, 1)
    assert [c.session_key for c in claims] == ["kc", "ka", "kb"]
    assert [c.items[0].inbound.delivery_id for c in claims] == ["d1", "d2", "d3"]


@covers(Leases.claim_sessions)
async def test_claim_limit_caps_sessions_and_leaves_the_rest_for_the_next_claim(store):
    for delivery_id, key in [("d1", "kc"), ("d2", "ka"), ("d3", "kb")]:
        await store.admit(req(delivery_id, key))
    assert [c.session_key for c in await store.claim_sessions("w1", 2, 30.0, 1)] == ["kc", "ka"]
    assert [c.session_key for c in await store.claim_sessions("w1", 2, 30.0, 1)] == ["kb"]


@covers(Leases.claim_sessions)
async def test_leased_session_is_not_claimed_again_while_its_lease_is_live(store):
    await store.admit(req("d1", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    await store.admit(req("d2", "k1"))
    await store.admit(req("e1", "k2"))
    assert [c.session_key for c in await store.claim_sessions("w2", 10, 30.0, 1)] == ["k2"]
    assert await store.claim_sessions("w1", 10, 30.0, 1) == []
    info = await store.session_info("k1")
    assert info is not None and info.leased_by == "w1" and info.queued == 2
    assert claim.session_key == "k1"


@covers(Leases.claim_sessions)
async def test_batch_claims_take_the_head_items_in_admission_order(store):
    for i in range(5):
        await store.admit(req(f"d{i}", "k1", f"m{i}"))
    (one,) = await store.claim_sessions("w1", 10, 30.0, 1)
    assert texts(one) == ["m0"]
    await store.abandon_turn("w1", "k1", (one.items[0].seq,), None, None)
    (three,) = await store.claim_sessions("w1", 10, 30.0, 3)
    assert texts(three) == ["m0", "m1", "m2"]
    assert [i.seq for i in three.items] == sorted(i.seq for i in three.items)


@covers(Leases.claim_sessions)
async def test_every_claim_of_an_item_counts_one_attempt(store):
    await store.admit(req("d1", "k1"))
    (first,) = await store.claim_sessions("w1", 10, 0.05, 1)
    assert first.items[0].attempts == 1
    (second,) = await eventually(lambda: store.claim_sessions("w2", 10, 0.05, 1))
    assert second.items[0].seq == first.items[0].seq
    assert second.items[0].attempts == 2


@covers(Leases.claim_sessions, Leases.complete_turn, Leases.renew_lease)
async def test_expired_lease_passes_to_another_owner_and_the_old_owner_loses_the_turn(store):
    await store.admit(req("d1", "k1"))
    (mine,) = await store.claim_sessions("w1", 10, 0.05, 1)
    (theirs,) = await eventually(lambda: store.claim_sessions("w2", 10, 30.0, 1))
    with pytest.raises(LeaseLost):
        await store.complete_turn("w1", outcome(mine), 30.0, 1)
    assert await store.renew_lease("k1", "w1", 30.0) is False
    assert await store.history(mine.session_id, 10) == []
    assert await store.complete_turn("w2", outcome(theirs), 30.0, 1) is None
    assert len(await store.history(theirs.session_id, 10)) == 2


@covers(Leases.renew_lease)
async def test_renew_lease_extends_only_the_owners_lease(store):
    await store.admit(req("d1", "k1"))
    await store.claim_sessions("w1", 10, 0.2, 1)
    assert await store.renew_lease("k1", "w2", 30.0) is False
    assert await store.renew_lease("k1", "w1", 30.0) is True
    await asyncio.sleep(0.3)  # past the original expiry; the renewed lease still holds
    assert await store.claim_sessions("w2", 10, 30.0, 1) == []
    assert await store.renew_lease("unknown", "w1", 30.0) is False


@covers(Leases.complete_turn)
async def test_complete_turn_commits_the_turn_and_hands_over_the_next_item_in_fifo_order(store):
    for i, text in enumerate(["one", "two", "three"]):
        await store.admit(req(f"d{i}", "k1", text))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    assert texts(claim) == ["one"]
    nxt = await store.complete_turn("w1", outcome(claim, draft("final:1"), reply="re one"), 30.0, 1)
    assert texts(nxt) == ["two"] and nxt is not None
    assert nxt.items[0].attempts == 1 and nxt.session_id == claim.session_id
    assert await store.history(claim.session_id, 10) == [
        HistoryEntry(role="user", content="one"),
        HistoryEntry(role="assistant", content="re one"),
    ]
    (row,) = await store.unconfirmed_for_chat("webchat", "c1")
    assert (row.idem_key, row.status, row.kind) == ("final:1", "pending", "final")
    assert await store.queue_depth() == 2  # "two" is leased but not done, "three" waits
    info = await store.session_info("k1")
    assert info is not None and info.leased_by == "w1"

    last = await store.complete_turn("w1", outcome(nxt, reply="re two"), 30.0, 5)
    assert texts(last) == ["three"]
    assert last is not None
    assert await store.complete_turn("w1", outcome(last, reply="re three"), 30.0, 5) is None
    assert [e.content for e in await store.history(claim.session_id, 10)] == [
        "one", "re one", "two", "re two", "three", "re three",
    ]  # fmt: skip
    info = await store.session_info("k1")
    assert info is not None and (info.leased_by, info.queued) == (None, 0)
    assert await store.queue_depth() == 0


@covers(Leases.complete_turn)
async def test_complete_turn_hands_over_the_next_batch(store):
    for i in range(5):
        await store.admit(req(f"d{i}", "k1", f"m{i}"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 2)
    nxt = await store.complete_turn("w1", outcome(claim), 30.0, 2)
    assert texts(claim) == ["m0", "m1"] and texts(nxt) == ["m2", "m3"]


@covers(Leases.complete_turn)
async def test_session_released_by_complete_turn_can_be_claimed_by_another_owner(store):
    await store.admit(req("d1", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    assert await store.complete_turn("w1", outcome(claim), 30.0, 1) is None
    await store.admit(req("d2", "k1", "later"))
    (other,) = await store.claim_sessions("w2", 10, 30.0, 1)
    assert texts(other) == ["later"]


@covers(Leases.complete_turn)
async def test_complete_turn_by_a_non_owner_raises_lease_lost_and_changes_nothing(store):
    await store.admit(req("d1", "k1"))
    await store.admit(req("d2", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    with pytest.raises(LeaseLost):
        await store.complete_turn("w2", outcome(claim, draft("final:x")), 30.0, 1)
    assert await store.history(claim.session_id, 10) == []
    assert await store.unconfirmed_for_chat("webchat", "c1") == []
    assert await store.queue_depth() == 2
    info = await store.session_info("k1")
    assert info is not None and info.leased_by == "w1"
    assert texts(await store.complete_turn("w1", outcome(claim), 30.0, 1)) == ["hello"]


@covers(Leases.complete_turn)
async def test_completing_a_turn_twice_raises_lease_lost_and_records_it_once(store):
    await store.admit(req("d1", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    assert await store.complete_turn("w1", outcome(claim, draft("final:1")), 30.0, 1) is None
    with pytest.raises(LeaseLost):
        await store.complete_turn("w1", outcome(claim, draft("final:1")), 30.0, 1)
    assert len(await store.history(claim.session_id, 10)) == 2
    assert len(await store.unconfirmed_for_chat("webchat", "c1")) == 1


@covers(Leases.abandon_turn)
async def test_abandoned_items_return_to_the_queue_without_counting_the_attempt(store):
    await store.admit(req("d1", "k1"))
    await store.admit(req("d2", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 2)
    assert [i.attempts for i in claim.items] == [1, 1]
    await store.abandon_turn("w1", "k1", tuple(i.seq for i in claim.items), None, None)
    info = await store.session_info("k1")
    assert info is not None and (info.leased_by, info.queued) == (None, 2)
    (again,) = await store.claim_sessions("w2", 10, 30.0, 2)
    assert [i.seq for i in again.items] == [i.seq for i in claim.items]
    assert [i.attempts for i in again.items] == [1, 1]


@covers(Leases.abandon_turn, Leases.claim_sessions)
async def test_session_waiting_to_retry_is_not_claimed_until_its_retry_time(store):
    await store.admit(req("d1", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    retry_at = time.time() + 0.3
    await store.abandon_turn("w1", "k1", (claim.items[0].seq,), retry_at, "agent exploded")
    await store.admit(req("e1", "k2"))
    assert [c.session_key for c in await store.claim_sessions("w1", 10, 30.0, 1)] == ["k2"]
    info = await store.session_info("k1")
    assert info is not None and info.last_error == "agent exploded" and info.leased_by is None
    (retried,) = await eventually(lambda: store.claim_sessions("w1", 10, 30.0, 1))
    assert time.time() >= retry_at
    assert retried.session_key == "k1" and retried.items[0].attempts == 1
    assert await store.complete_turn("w1", outcome(retried), 30.0, 1) is None
    info = await store.session_info("k1")
    assert info is not None and info.last_error is None


@covers(Leases.abandon_turn)
async def test_abandon_turn_by_a_former_owner_changes_nothing(store):
    await store.admit(req("d1", "k1"))
    (stale,) = await store.claim_sessions("w1", 10, 0.05, 1)  # attempt 1
    await eventually(lambda: store.claim_sessions("w2", 10, 0.05, 1))  # attempt 2
    await store.abandon_turn("w1", "k1", (stale.items[0].seq,), time.time() + 3600, "stale")
    info = await store.session_info("k1")
    assert info is not None and (info.leased_by, info.last_error) == ("w2", None)
    (third,) = await eventually(lambda: store.claim_sessions("w3", 10, 30.0, 1))
    assert third.items[0].attempts == 3


SESSIONS = ("ka", "kb", "kc")


steps = st.lists(
    st.one_of(
        st.tuples(st.just("admit"), st.sampled_from(SESSIONS), st.integers(1, 3)),
        st.tuples(st.just("claim"), st.integers(1, 3), st.integers(1, 3)),
        st.tuples(st.just("complete"), st.integers(0, 5), st.integers(1, 3)),
        st.tuples(st.just("abandon"), st.integers(0, 5), st.just(0)),
    ),
    min_size=1,
    max_size=40,
)


async def _fifo_scenario(store: Store, plan: list[tuple[str, Any, int]]) -> None:
    admitted: dict[str, list[int]] = {k: [] for k in SESSIONS}  # seqs in admission (seq) order
    done: dict[str, list[int]] = {k: [] for k in SESSIONS}
    held: dict[str, Claim] = {}
    counter = itertools.count()

    def check_claim(claim: Claim, batch: int) -> None:
        pending = [s for s in admitted[claim.session_key] if s not in done[claim.session_key]]
        seqs = [i.seq for i in claim.items]
        assert 1 <= len(seqs) <= batch
        assert seqs == pending[: len(seqs)], "a claim must take the head of its session's queue"
        assert all(i.attempts == 1 for i in claim.items)  # no lease ever expired, abandons are free

    async def complete(claim: Claim, batch: int) -> None:
        nxt = await store.complete_turn("w", outcome(claim), 60.0, batch)
        done[claim.session_key].extend(i.seq for i in claim.items)
        del held[claim.session_key]
        if nxt is not None:
            check_claim(nxt, batch)
            held[nxt.session_key] = nxt

    for op, arg, n in plan:
        if op == "admit":
            results = await asyncio.gather(
                *(store.admit(req(f"d{next(counter)}", arg, chat_id=arg)) for _ in range(n))
            )
            admitted[arg].extend(r.seq for r in results)
            admitted[arg].sort()
        elif op == "claim":
            for claim in await store.claim_sessions("w", arg, 60.0, n):
                assert claim.session_key not in held, "a leased session was claimed twice"
                check_claim(claim, n)
                held[claim.session_key] = claim
        elif held:
            claim = held[sorted(held)[arg % len(held)]]
            if op == "complete":
                await complete(claim, n)
            else:
                await store.abandon_turn(
                    "w", claim.session_key, tuple(i.seq for i in claim.items), None, None
                )
                del held[claim.session_key]
    for _ in range(200):  # drain
        for claim in list(held.values()):
            await complete(claim, 2)
        if not held:
            claims = await store.claim_sessions("w", 3, 60.0, 2)
            if not claims:
                break
            for claim in claims:
                check_claim(claim, 2)
                held[claim.session_key] = claim
    assert done == admitted, "every item handled exactly once, in admission order per session"
    assert await store.queue_depth() == 0


@covers(Leases.claim_sessions, Leases.complete_turn, Leases.abandon_turn)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=steps)
def test_claim_and_complete_cycles_handle_each_sessions_items_once_in_admission_order(backend, plan):
    async def run() -> None:
        store = backend.fresh().store()
        await store.open()
        try:
            await _fifo_scenario(store, plan)
        finally:
            await store.close()

    asyncio.run(run())


# ---------------------------------------------------------------- the stuck-loop guard


async def _die(store: Store, owner: str, isolated: int = 1) -> list[Claim]:
    """``owner`` claims what it may and dies; its successor recovers."""
    claims = await store.claim_sessions(owner, 10, 30.0, 1, isolated)
    await store.recover(owner + "-next")
    return claims


@covers(Leases.claim_sessions, Lifecycle.recover)
async def test_an_item_in_flight_at_two_deaths_is_claimed_isolated_and_only_then_blamed(store):
    await store.admit(req("d1", "k1"))
    for _ in range(2):
        (claim,) = await _die(store, "dead")
        assert not claim.isolated and claim.items[0].crashes == 0, "in flight, not blamed"
    (suspect,) = await store.claim_sessions("w1", 10, 30.0, 1, 1)
    assert suspect.isolated and suspect.items[0].attempts == 3 and suspect.items[0].crashes == 0
    await store.recover("w2")  # w1 died while the suspect ran isolated
    (again,) = await store.claim_sessions("w2", 10, 30.0, 1, 1)
    assert again.isolated and again.items[0].crashes == 1


@covers(Leases.claim_sessions)
async def test_a_claim_takes_no_more_suspects_than_it_may_and_skips_the_rest(store):
    for key in ("k1", "k2"):
        await store.admit(req(f"d-{key}", key))
    for _ in range(2):
        await _die(store, "dead")
    await store.admit(req("fresh", "k3"))
    assert [c.session_key for c in await store.claim_sessions("w1", 10, 30.0, 1, 0)] == ["k3"]
    (one,) = await store.claim_sessions("w1", 10, 30.0, 1, 1)
    assert one.session_key == "k1" and one.isolated


@covers(Leases.abandon_turn, Lifecycle.recover)
async def test_an_isolated_turn_given_back_is_not_blamed_for_a_later_death(store):
    await store.admit(req("d1", "k1"))
    for _ in range(2):
        await _die(store, "dead")
    (suspect,) = await store.claim_sessions("w1", 10, 30.0, 1, 1)
    await store.abandon_turn("w1", "k1", (suspect.items[0].seq,), None, None)
    await store.admit(req("e1", "k2"))
    await _die(store, "w1", 0)  # w1 dies while only the fresh k2 runs
    claims = {c.session_key: c for c in await store.claim_sessions("w3", 10, 30.0, 1, 1)}
    assert claims["k1"].items[0].crashes == 0 and claims["k2"].items[0].crashes == 0


@covers(Leases.record_preview, Leases.claim_sessions, Lifecycle.recover)
async def test_a_recorded_preview_survives_its_owners_death_and_is_handed_to_the_next_claim(store):
    await store.admit(req("d1", "k1"))
    (claim,) = await store.claim_sessions("dead", 10, 30.0, 1)
    assert claim.stale_preview is None
    assert await store.record_preview("dead", "k1", "pm-7")
    assert not await store.record_preview("someone-else", "k1", "pm-8"), "only the lease owner records"
    await store.recover("next")
    (resumed,) = await store.claim_sessions("next", 10, 30.0, 1)
    assert resumed.stale_preview == "pm-7"


@covers(Leases.record_preview, Leases.complete_turn, Leases.abandon_turn)
async def test_a_commit_or_an_abandon_forgets_the_recorded_preview(store):
    await store.admit(req("d1", "k1"))
    await store.admit(req("d2", "k1"))
    (first,) = await store.claim_sessions("w1", 10, 30.0, 1)
    assert await store.record_preview("w1", "k1", "pm-1")
    nxt = await store.complete_turn("w1", outcome(first), 30.0, 1)
    assert nxt is not None and nxt.stale_preview is None
    assert await store.record_preview("w1", "k1", "pm-2")
    await store.abandon_turn("w1", "k1", (nxt.items[0].seq,), None, None)
    await store.recover("w2")
    (again,) = await store.claim_sessions("w2", 10, 30.0, 1)
    assert again.stale_preview is None
    assert await store.record_preview("w2", "k1", None)


@covers(Leases.record_notices, Outbox.outbox_status)
async def test_record_notices_commits_the_notice_now_and_hands_it_the_preview(store):
    await store.admit(req("d1", "k1"))
    await store.claim_sessions("dead", 10, 30.0, 1)
    assert await store.record_preview("dead", "k1", "pm-7")
    await store.recover("next")
    (resumed,) = await store.claim_sessions("next", 10, 30.0, 1)
    notice = draft("notice:1:2", kind="notice")
    assert await store.outbox_status("notice:1:2") is None
    assert not await store.record_notices("not-the-owner", "k1", [notice])
    assert await store.outbox_status("notice:1:2") is None
    assert await store.record_notices("next", "k1", [notice])
    assert await store.outbox_status("notice:1:2") == "pending"
    (row,) = await store.claim_outbox(10)
    assert row.idem_key == "notice:1:2" and row.kind == "notice"
    await store.settle_outbox([OutboxSettlement(row.id, "sent", platform_message_id="pm-7")])
    assert await store.outbox_status("notice:1:2") == "sent"
    await store.recover("later")  # the preview belongs to the notice now, not to the session
    (after,) = await store.claim_sessions("later", 10, 30.0, 1)
    assert after.stale_preview is None and resumed.stale_preview == "pm-7"


@covers(Leases.record_notices)
async def test_record_notices_commits_several_in_order_before_the_turn_and_once(store):
    """The files of a turn that did not come through: each notice recorded before the agent
    runs, in order, in the chat's outbox ahead of anything the turn commits; recorded again by
    a re-run of the turn, nothing is added."""
    await store.admit(req("d1", "k1"))
    await store.claim_sessions("w1", 10, 30.0, 1)
    notices = [draft("media:a", kind="notice", text="a"), draft("media:b", kind="notice", text="b")]
    assert await store.record_notices("w1", "k1", notices)
    assert await store.record_notices("w1", "k1", notices)  # a re-run of the turn
    sent = []
    while rows := await store.claim_outbox(10):
        sent += [(r.idem_key, r.text) for r in rows]
        await store.settle_outbox([OutboxSettlement(r.id, "sent") for r in rows])
    assert sent == [("media:a", "a"), ("media:b", "b")]


# ---------------------------------------------------------------- commit_turn: rows claimed in the commit


async def _running(store: Store, key: str = "k1", chat_id: str = "c1") -> Claim:
    await store.admit(req(f"d-{key}", key, chat_id=chat_id))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    return claim


@covers(Leases.commit_turn, Outbox.claim_outbox, Outbox.settle_outbox)
async def test_commit_turn_records_a_final_that_heads_its_chat_claimed_as_claim_outbox_would(store):
    claim = await _running(store)
    committed = await store.commit_turn("w1", outcome(claim, draft("final:1"), reply="re"), 30.0, 1, 1)
    assert committed.next is None
    (row,) = committed.sending
    assert (row.idem_key, row.status, row.attempts, row.possibly_duplicate) == (
        "final:1",
        "sending",
        1,
        False,
    )
    assert (row.kind, row.text, row.in_reply_to, row.target) == (
        "final",
        "text of final:1",
        "m1",
        {"chat_id": "c1", "n": 1},
    )
    (stored,) = await store.unconfirmed_for_chat("webchat", "c1")
    assert (stored.id, stored.status, stored.attempts, stored.message_id) == (
        row.id,
        "sending",
        1,
        row.message_id,
    )
    assert stored.created_at == row.created_at
    assert await store.claim_outbox(10) == [], "a row claimed in the commit is not handed out again"
    assert await store.undelivered_in_chat("webchat", "c1") == 1
    await store.settle_outbox([OutboxSettlement(row.id, "sent", platform_message_id="pm-1")])
    (sent,) = await store.unconfirmed_for_chat("webchat", "c1")
    assert (sent.status, sent.platform_message_id, sent.attempts) == ("sent", "pm-1", 1)


@covers(Leases.commit_turn, Outbox.claim_outbox)
async def test_commit_turn_leaves_a_final_pending_behind_an_earlier_open_row_of_its_chat(store):
    claim = await _running(store)
    await put_outbox(store, draft("cmd:earlier", "c1", kind="command"))
    committed = await store.commit_turn("w1", outcome(claim, draft("final:1")), 30.0, 1, 1)
    assert committed.sending == ()
    statuses = [(r.idem_key, r.status, r.attempts) for r in await store.unconfirmed_for_chat("webchat", "c1")]
    assert statuses == [("cmd:earlier", "pending", 0), ("final:1", "pending", 0)]
    (head,) = await store.claim_outbox(10)
    assert head.idem_key == "cmd:earlier"
    await store.settle_outbox([OutboxSettlement(head.id, "sent")])
    (nxt,) = await store.claim_outbox(10)
    assert (nxt.idem_key, nxt.attempts) == ("final:1", 1)


@covers(Leases.commit_turn, Outbox.claim_outbox, Outbox.settle_outbox)
async def test_commit_turn_holds_back_an_earlier_row_being_sent_or_left_ambiguous(store):
    for status in ("sending", "ambiguous"):
        key = f"k-{status}"
        await put_outbox(store, draft(f"cmd:{status}", f"chat-{status}", key=key))
        (earlier,) = await store.claim_outbox(10)
        if status == "ambiguous":
            await store.settle_outbox([OutboxSettlement(earlier.id, "ambiguous", retry_at=time.time() + 60)])
        claim = await _running(store, key, f"chat-{status}")
        turn = outcome(claim, draft(f"final:{status}", f"chat-{status}", key=key))
        assert (await store.commit_turn("w1", turn, 30.0, 1, 1)).sending == ()
        rows = await store.unconfirmed_for_chat("webchat", f"chat-{status}")
        assert [(r.idem_key, r.status) for r in rows] == [
            (f"cmd:{status}", status),
            (f"final:{status}", "pending"),
        ]


@covers(Leases.commit_turn, Outbox.claim_outbox, Outbox.settle_outbox)
async def test_commit_turn_claims_only_the_first_part_of_a_split_final(store):
    claim = await _running(store)
    parts = (draft("final:1"), draft("final:1:1"), draft("final:1:2"))
    committed = await store.commit_turn("w1", outcome(claim, *parts), 30.0, 1, 4)
    assert [r.idem_key for r in committed.sending] == ["final:1"]
    assert await store.claim_outbox(10) == []
    await store.settle_outbox([OutboxSettlement(committed.sending[0].id, "sent")])
    (second,) = await store.claim_outbox(10)
    assert second.idem_key == "final:1:1"


@covers(Leases.commit_turn, Outbox.claim_outbox)
async def test_commit_turn_claims_at_most_send_room_rows_and_none_with_no_room(store):
    await store.admit(req("d1", "k1"))
    await store.admit(req("d2", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    two_chats = outcome(claim, draft("final:a", "ca"), draft("final:b", "cb"))
    committed = await store.commit_turn("w1", two_chats, 30.0, 1, 1)
    assert [r.idem_key for r in committed.sending] == ["final:a"]
    assert texts(committed.next) == ["hello"]  # the next batch is handed over as by complete_turn
    assert [r.idem_key for r in await store.claim_outbox(10)] == ["final:b"]
    assert committed.next is not None
    none = await store.commit_turn("w1", outcome(committed.next, draft("final:c", "cc")), 30.0, 1, 0)
    assert none.sending == () and none.next is None
    (pending,) = await store.claim_outbox(10)
    assert (pending.idem_key, pending.attempts) == ("final:c", 1)


@covers(Leases.commit_turn)
async def test_commit_turn_claims_no_row_whose_idem_key_was_recorded_already(store):
    await put_outbox(store, draft("final:1", "c1", text="first"))
    (earlier,) = await store.claim_outbox(10)
    await store.settle_outbox([OutboxSettlement(earlier.id, "sent")])
    claim = await _running(store)
    committed = await store.commit_turn("w1", outcome(claim, draft("final:1", text="again")), 30.0, 1, 1)
    assert committed.sending == ()
    (row,) = await store.unconfirmed_for_chat("webchat", "c1")
    assert (row.id, row.text, row.status) == (earlier.id, "first", "sent")


@covers(Leases.commit_turn)
async def test_commit_turn_by_a_non_owner_raises_lease_lost_and_claims_nothing(store):
    claim = await _running(store)
    with pytest.raises(LeaseLost):
        await store.commit_turn("w2", outcome(claim, draft("final:x")), 30.0, 1, 1)
    assert await store.unconfirmed_for_chat("webchat", "c1") == []
    assert (await store.commit_turn("w1", outcome(claim), 30.0, 1, 1)).sending == ()


@covers(Leases.commit_turn, Lifecycle.recover, Outbox.claim_outbox)
async def test_a_row_claimed_in_the_commit_and_never_sent_is_resent_once_after_a_restart(open_store):
    """The process dies between the turn's commit and the send: the row is ``sending`` on disk,
    so the next start resends it once, marked as a possible duplicate (it may have gone out)."""
    store = await open_store()
    claim = await _running(store)
    (row,) = (await store.commit_turn("w1", outcome(claim, draft("final:1")), 30.0, 1, 1)).sending
    await store.close()  # no settlement: what a death before the send leaves
    again = await open_store()
    await again.recover("w2")
    (resent,) = await again.claim_outbox(10)
    assert (resent.id, resent.idem_key, resent.possibly_duplicate, resent.attempts) == (
        row.id,
        "final:1",
        True,
        2,
    )
    assert resent.message_id == row.message_id
    assert await again.claim_outbox(10) == []
    await again.settle_outbox([OutboxSettlement(resent.id, "sent")])
    await again.recover("w3")
    assert await again.claim_outbox(10) == [], "a settled row is never resent"


@covers(Leases.abandon_turn)
async def test_a_turn_given_back_after_an_in_doubt_commit_gives_back_the_next_batch_too(store):
    """The commit took the session's next item (its attempt counted) but was reported failed,
    so the worker gives the session back: the next item's attempt is given back with it, and it
    runs as a first attempt (a second would tell the chat "the gateway restarted")."""
    await store.admit(req("d1", "ka"))
    await store.admit(req("d2", "ka"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    committed = await store.commit_turn("w1", outcome(claim), 30.0, 1, 0)
    assert committed.next is not None and committed.next.items[0].attempts == 1
    # The worker never saw that result: it gives back what it knew of, the first item.
    await store.abandon_turn("w1", "ka", tuple(i.seq for i in claim.items), None, None)
    (again,) = await store.claim_sessions("w1", 10, 30.0, 1)
    assert [(i.inbound.delivery_id, i.attempts) for i in again.items] == [("d2", 1)]
