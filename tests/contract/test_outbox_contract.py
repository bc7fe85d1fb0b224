"""The outbox role's contract: a ledger claimed head of chat first, settled per row, confirmed once
by a client, and idempotent by key however a row is recorded."""

from __future__ import annotations

import time

from chatgate.domain.outbox import OutboxSettlement
from chatgate.domain.store_roles import (
    Inbox,
    Leases,
    Outbox,
)
from contract.kit import covers, draft, eventually, put_outbox, req
from support.store_values import outcome


@covers(Outbox.claim_outbox)
async def test_claim_outbox_hands_out_only_the_head_row_of_each_chat(store):
    await put_outbox(store, draft("a1", "c1"), draft("a2", "c1"), draft("b1", "c2"), draft("a3", "c1"))
    claimed = await store.claim_outbox(10)
    assert [r.idem_key for r in claimed] == ["a1", "b1"]
    assert await store.claim_outbox(10) == []
    statuses = {r.idem_key: r.status for r in await store.unconfirmed_for_chat("webchat", "c1")}
    assert statuses == {"a1": "sending", "a2": "pending", "a3": "pending"}


@covers(Outbox.claim_outbox)
async def test_claimed_outbox_rows_are_sending_and_count_this_attempt(store):
    await put_outbox(store, draft("a1", "c1"))
    (row,) = await store.claim_outbox(10)
    assert (row.status, row.attempts) == ("sending", 1)


@covers(Outbox.claim_outbox, Outbox.settle_outbox)
async def test_next_row_of_a_chat_is_handed_out_once_its_head_is_sent(store):
    await put_outbox(store, draft("a1", "c1"), draft("a2", "c1"))
    (head,) = await store.claim_outbox(10)
    await store.settle_outbox([OutboxSettlement(id=head.id, status="sent", platform_message_id="pm-a1")])
    (nxt,) = await store.claim_outbox(10)
    assert nxt.idem_key == "a2"
    first = (await store.unconfirmed_for_chat("webchat", "c1"))[0]
    assert (first.idem_key, first.status, first.platform_message_id) == ("a1", "sent", "pm-a1")


@covers(Outbox.settle_outbox)
async def test_settle_outbox_says_whether_a_settled_rows_chat_has_an_open_row_behind_it(store):
    await put_outbox(store, draft("a1", "c1"), draft("a2", "c1"), draft("b1", "c2"), draft("a3", "c1"))
    claimed = {r.idem_key: r for r in await store.claim_outbox(10)}
    assert await store.settle_outbox([OutboxSettlement(id=claimed["b1"].id, status="sent")]) is False
    assert await store.settle_outbox([OutboxSettlement(id=claimed["a1"].id, status="sent")]) is True
    (a2,) = await store.claim_outbox(10)
    assert await store.settle_outbox([OutboxSettlement(id=a2.id, status="failed", error="rejected")]) is True
    (a3,) = await store.claim_outbox(10)  # the chat's last row: nothing behind it
    assert await store.settle_outbox([OutboxSettlement(id=a3.id, status="sent")]) is False
    await put_outbox(store, draft("d1", "c3"), draft("d2", "c3"))
    (d1,) = await store.claim_outbox(10)
    retry = OutboxSettlement(id=d1.id, status="pending", retry_at=time.time() + 60, error="429")
    assert await store.settle_outbox([retry]) is True  # put back with its chat's next row behind it
    assert await store.settle_outbox([]) is False


@covers(Outbox.settle_outbox)
async def test_head_row_waiting_to_retry_holds_back_the_rest_of_its_chat(store):
    await put_outbox(store, draft("a1", "c1"), draft("a2", "c1"), draft("b1", "c2"))
    claimed = {r.idem_key: r for r in await store.claim_outbox(10)}
    retry_at = time.time() + 0.3
    await store.settle_outbox(
        [
            OutboxSettlement(id=claimed["a1"].id, status="pending", retry_at=retry_at, error="429"),
            OutboxSettlement(id=claimed["b1"].id, status="sent"),
        ]
    )
    assert await store.claim_outbox(10) == []
    (again,) = await eventually(lambda: store.claim_outbox(10))
    assert time.time() >= retry_at
    assert (again.idem_key, again.attempts) == ("a1", 2)  # the second attempt, this one counted


@covers(Outbox.settle_outbox)
async def test_failed_head_row_no_longer_holds_back_its_chat(store):
    await put_outbox(store, draft("a1", "c1"), draft("a2", "c1"))
    (head,) = await store.claim_outbox(10)
    await store.settle_outbox([OutboxSettlement(id=head.id, status="failed", error="rejected")])
    (nxt,) = await store.claim_outbox(10)
    assert nxt.idem_key == "a2"
    assert [r.idem_key for r in await store.unconfirmed_for_chat("webchat", "c1")] == ["a2"]


@covers(Outbox.claim_outbox, Outbox.unconfirmed_for_chat)
async def test_one_chat_id_on_two_platforms_is_two_chats(store):
    await put_outbox(store, draft("w1", "c1", platform="webchat"), draft("t1", "c1", platform="telegram"))
    assert {r.idem_key for r in await store.claim_outbox(10)} == {"w1", "t1"}
    assert [r.idem_key for r in await store.unconfirmed_for_chat("telegram", "c1")] == ["t1"]


@covers(Outbox.claim_outbox)
async def test_claim_outbox_respects_its_limit_in_id_order(store):
    await put_outbox(store, *(draft(f"x{i}", f"c{i}") for i in range(5)))
    assert [r.idem_key for r in await store.claim_outbox(2)] == ["x0", "x1"]
    assert [r.idem_key for r in await store.claim_outbox(10)] == ["x2", "x3", "x4"]


@covers(Outbox.unconfirmed_for_chat)
async def test_unconfirmed_for_chat_lists_unconfirmed_pending_sending_and_sent_rows_in_id_order(store):
    await put_outbox(store, *(draft(f"r{i}", "c1") for i in range(1, 6)), draft("other", "c2"))

    async def head() -> int:
        rows = [r for r in await store.claim_outbox(10) if r.chat_id == "c1"]
        assert len(rows) == 1
        return rows[0].id

    r1 = await head()
    await store.settle_outbox([OutboxSettlement(id=r1, status="sent")])
    assert await store.confirm_outbox("webchat", "c1", r1) is True
    await store.settle_outbox([OutboxSettlement(id=await head(), status="sent", platform_message_id="p2")])
    await store.settle_outbox([OutboxSettlement(id=await head(), status="failed")])
    await head()  # r4 stays 'sending'
    rows = await store.unconfirmed_for_chat("webchat", "c1")
    assert [(r.idem_key, r.status) for r in rows] == [("r2", "sent"), ("r4", "sending"), ("r5", "pending")]
    assert [r.id for r in rows] == sorted(r.id for r in rows)
    assert [r.idem_key for r in await store.unconfirmed_for_chat("webchat", "c2")] == ["other"]


@covers(Outbox.unconfirmed_page)
async def test_unconfirmed_page_walks_the_backlog_after_a_cursor_in_id_order_skipping_confirmed(store):
    await put_outbox(store, *(draft(f"r{i}", "c1") for i in range(1, 8)), draft("other", "c2"))
    everything = await store.unconfirmed_for_chat("webchat", "c1")
    assert await store.confirm_outbox("webchat", "c1", everything[2].id) is True  # r3 was shown
    pages: list[list[str]] = []
    cursor = 0
    while page := await store.unconfirmed_page("webchat", "c1", cursor, 2):
        assert len(page) <= 2
        pages.append([r.idem_key for r in page])
        cursor = page[-1].id
    assert pages == [["r1", "r2"], ["r4", "r5"], ["r6", "r7"]]
    assert await store.unconfirmed_page("webchat", "c1", everything[-1].id, 10) == []
    assert [r.idem_key for r in await store.unconfirmed_page("webchat", "c2", 0, 10)] == ["other"]
    assert await store.unconfirmed_page("telegram", "c1", 0, 10) == []


@covers(Outbox.confirm_outbox)
async def test_confirm_outbox_is_true_once_and_false_on_repeat_or_for_another_chat(store):
    await put_outbox(store, draft("a1", "c1"))
    (row,) = await store.claim_outbox(10)
    await store.settle_outbox([OutboxSettlement(id=row.id, status="sent")])
    assert await store.confirm_outbox("webchat", "c2", row.id) is False
    assert await store.confirm_outbox("telegram", "c1", row.id) is False
    assert await store.confirm_outbox("webchat", "c1", row.id + 1000) is False
    assert await store.confirm_outbox("webchat", "c1", row.id) is True
    assert await store.confirm_outbox("webchat", "c1", row.id) is False
    assert await store.unconfirmed_for_chat("webchat", "c1") == []


@covers(Inbox.admit, Leases.complete_turn)
async def test_recording_an_outbox_draft_again_with_the_same_idem_key_is_a_noop(store):
    await put_outbox(store, draft("cmd:x", "c1", text="first"))
    await put_outbox(store, draft("cmd:x", "c1", text="second"))
    await store.admit(req("d1", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    await store.complete_turn("w1", outcome(claim, draft("cmd:x", "c1", text="third")), 30.0, 1)
    (row,) = await store.unconfirmed_for_chat("webchat", "c1")
    assert (row.idem_key, row.text) == ("cmd:x", "first")


@covers(Outbox.settle_outbox)
async def test_a_settlement_that_tried_nothing_gives_the_attempt_back(store):
    await put_outbox(store, draft("a1"))
    (row,) = await store.claim_outbox(10)
    assert row.attempts == 1
    await store.settle_outbox(
        [OutboxSettlement(id=row.id, status="pending", error="no client", counts_attempt=False)]
    )
    (again,) = await store.claim_outbox(10)
    assert (again.id, again.attempts) == (row.id, 1)


@covers(Outbox.settle_outbox)
async def test_a_rate_limited_row_waits_until_its_retry_time_and_never_spends_an_attempt(store):
    await put_outbox(store, draft("a1"))
    for _ in range(12):  # more waits than any max_attempts: still its first attempt
        (row,) = await store.claim_outbox(10)
        assert row.attempts == 1
        await store.settle_outbox(
            [OutboxSettlement(row.id, "pending", retry_at=time.time() - 1, error="429", counts_attempt=False)]
        )
    (row,) = await store.claim_outbox(10)
    await store.settle_outbox(
        [OutboxSettlement(row.id, "pending", retry_at=time.time() + 60, error="429", counts_attempt=False)]
    )
    assert await store.claim_outbox(10) == [], "claimed before the platform's retry_after"


@covers(Outbox.settle_outbox, Outbox.confirm_outbox)
async def test_a_confirmed_row_stays_sent_whatever_a_racing_settlement_reports(store):
    await put_outbox(store, draft("a1"), draft("a2"))
    (row,) = await store.claim_outbox(10)
    assert await store.confirm_outbox("webchat", "c1", row.id) is True
    await store.settle_outbox([OutboxSettlement(id=row.id, status="failed", error="late answer")])
    assert [r.idem_key for r in await store.unconfirmed_for_chat("webchat", "c1")] == ["a2"]
    (nxt,) = await store.claim_outbox(10)
    assert nxt.idem_key == "a2"  # the confirmed head was sent, so it holds nothing back


@covers(Outbox.enqueue_outbox)
async def test_enqueued_rows_are_recorded_once_by_key_and_claimed_in_order(store):
    await store.enqueue_outbox([draft("p:1", text="first", kind="notice"), draft("p:2", text="second")])
    await store.enqueue_outbox([draft("p:1", text="changed", kind="notice")])
    await store.enqueue_outbox([])
    rows = await store.unconfirmed_for_chat("webchat", "c1")
    assert [(r.idem_key, r.text, r.kind, r.status) for r in rows] == [
        ("p:1", "first", "notice", "pending"),
        ("p:2", "second", "final", "pending"),
    ]
    assert (rows[0].in_reply_to, rows[0].target, rows[0].session_key) == (
        "m1",
        {"chat_id": "c1", "n": 1},
        "k1",
    )
    (head,) = await store.claim_outbox(10)
    assert (head.idem_key, head.status, head.attempts) == ("p:1", "sending", 1)


@covers(Outbox.undelivered_in_chat)
async def test_undelivered_in_chat_counts_the_rows_that_have_not_reached_the_platform(store):
    assert await store.undelivered_in_chat("webchat", "c1") == 0
    await put_outbox(store, draft("a1", "c1"), draft("a2", "c1"), draft("b1", "c2"))
    assert await store.undelivered_in_chat("webchat", "c1") == 2
    assert await store.undelivered_in_chat("webchat", "c2") == 1
    assert await store.undelivered_in_chat("telegram", "c1") == 0  # another platform's chat
    (head, _other) = sorted(await store.claim_outbox(10), key=lambda r: r.chat_id)
    assert head.idem_key == "a1"
    assert await store.undelivered_in_chat("webchat", "c1") == 2  # sending still counts
    await store.settle_outbox([OutboxSettlement(head.id, "sent", platform_message_id="m1")])
    assert await store.undelivered_in_chat("webchat", "c1") == 1
    (nxt,) = [r for r in await store.claim_outbox(10) if r.chat_id == "c1"]
    await store.settle_outbox([OutboxSettlement(nxt.id, "failed", error="rejected")])
    assert await store.undelivered_in_chat("webchat", "c1") == 0


@covers(Outbox.hold_chat_route)
async def test_the_process_holding_a_chats_route_delivers_its_replies_in_order_and_nothing_moves_twice(store):
    """One process (a single store) already holds every route: holding it again moves nothing,
    and the chat's replies are still claimed here, head first (the fleet's move of a route to
    another process is shown in tests/store/test_postgres_fleet.py)."""
    await put_outbox(store, draft("r1", "c1"), draft("r2", "c1"))
    assert await store.hold_chat_route("webchat", "c1") == 0
    assert [r.idem_key for r in await store.claim_outbox(10)] == ["r1"]


@covers(Outbox.undelivered)
async def test_undelivered_counts_the_backlog_and_names_only_heads_that_are_claimed_or_due(store):
    """Stuck: the head of its chat, old, and claimed or due. A row behind its chat's head waits
    its turn, and a row put back until a retry time (no client, a rate limit) waits for that."""
    await put_outbox(store, draft("r1", "c1"), draft("r2", "c1"), draft("r3", "c2"))
    now = time.time()
    fresh = await store.undelivered(now, 120.0, 20)
    assert (fresh.count, fresh.stuck) == (3, ())
    assert fresh.oldest_created_at is not None and fresh.oldest_created_at <= now
    later = now + 200.0
    assert [r.chat_id for r in (await store.undelivered(later, 120.0, 20)).stuck] == ["c1", "c2"]
    rows = {r.idem_key: r for r in await store.claim_outbox(10)}
    await store.settle_outbox(
        [OutboxSettlement(rows["r3"].id, "pending", retry_at=later + 1000.0, counts_attempt=False)]
    )
    (stuck,) = (await store.undelivered(later, 120.0, 20)).stuck
    assert (stuck.id, stuck.status) == (rows["r1"].id, "sending")
    assert "webchat/c1 sending for 200s" in stuck.describe(later)
    assert len((await store.undelivered(later, 120.0, 1)).stuck) == 1
