"""Failures through the ``connect`` seam: a failed write changes nothing, raises
StoreUnavailable, and never fails the other writes that shared its batch."""

from __future__ import annotations

import asyncio

import pytest

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.outbox import OutboxSettlement


class Commits:
    def __init__(self) -> None:
        self.sizes: list[int] = []

    def __call__(self, size: int, seconds: float) -> None:
        self.sizes.append(size)


async def test_denied_admission_raises_store_unavailable_and_leaves_nothing(
    open_store, make, connect_seam, query
):
    store = await open_store(connect=connect_seam)
    connect_seam.deny_insert.add("inbox")
    with pytest.raises(StoreUnavailable, match="not authorized"):
        await store.admit(make.request("d1", "k1", chat_name="Team"))
    assert query("SELECT COUNT(*) FROM inbox") == [(0,)]
    assert query("SELECT COUNT(*) FROM sessions") == [(0,)]
    assert await store.session_info("k1") is None
    assert await store.queue_depth() == 0


async def test_delivery_that_failed_to_commit_is_admitted_as_new_when_retried(open_store, make, connect_seam):
    store = await open_store(connect=connect_seam)
    connect_seam.deny_insert.add("inbox")
    with pytest.raises(StoreUnavailable):
        await store.admit(make.request("d1"))
    connect_seam.deny_insert.clear()
    retried = await store.admit(make.request("d1"))
    assert retried.new
    again = await store.admit(make.request("d1"))
    assert (again.new, again.seq) == (False, retried.seq)


async def test_failed_write_does_not_fail_the_other_writes_of_its_batch(
    open_store, make, connect_seam, query
):
    commits = Commits()
    store = await open_store(connect=connect_seam, on_commit=commits)
    await store.admit(make.request("d1", "k1"))
    (claim,) = await store.claim_sessions("w", 10, 5.0, 1)
    await store.complete_turn("w", make.outcome(claim, make.draft("f1")), 5.0, 1)
    (row,) = await store.claim_outbox(10)
    await store.admit(make.request("d2", "k2"))
    (held,) = await store.claim_sessions("w", 10, 5.0, 1)
    expires_before = query("SELECT lease_expires FROM sessions WHERE key = 'k2'")[0][0]

    connect_seam.deny_insert.add("inbox")
    async with connect_seam.writer_paused(store):
        denied = asyncio.ensure_future(store.admit(make.request("d3", "k3")))
        renewed = asyncio.ensure_future(store.renew_lease(held.session_key, "w", 60.0))
        settled = asyncio.ensure_future(
            store.settle_outbox([OutboxSettlement(id=row.id, status="sent", platform_message_id="pm-1")])
        )
    with pytest.raises(StoreUnavailable):
        await denied
    assert await renewed is True
    assert await settled is False  # recorded (and no row waits behind it in its chat)
    assert commits.sizes[-2:] == [1, 3]  # the three writes really shared one batch

    assert query("SELECT COUNT(*) FROM inbox WHERE delivery_id = 'd3'") == [(0,)]
    assert query("SELECT lease_expires FROM sessions WHERE key = 'k2'")[0][0] > expires_before + 30
    assert query("SELECT status, platform_message_id FROM outbox WHERE id = ?", row.id) == [("sent", "pm-1")]

    connect_seam.deny_insert.clear()
    assert (await store.admit(make.request("d3", "k3"))).new


async def test_admission_failing_midway_is_rolled_back_while_its_batch_neighbours_commit(
    open_store, make, connect_seam, query
):
    """A command whose reply cannot be written loses its inbox row too (one transaction);
    plain admissions in the same batch are unaffected."""
    commits = Commits()
    store = await open_store(connect=connect_seam, on_commit=commits)
    connect_seam.deny_insert.add("outbox")
    command = make.request(
        "cmd-1", "k1", "/status", queued=False, reply=make.draft("cmd:cmd-1", kind="command")
    )
    async with connect_seam.writer_paused(store):
        before = asyncio.ensure_future(store.admit(make.request("d1", "k1")))
        failing = asyncio.ensure_future(store.admit(command))
        after = [asyncio.ensure_future(store.admit(make.request(f"d{i}", f"k{i}"))) for i in (2, 3)]
    with pytest.raises(StoreUnavailable):
        await failing
    results = [await before, *[await t for t in after]]
    assert all(r.new for r in results)
    assert commits.sizes[-1] == 4

    assert query("SELECT delivery_id FROM inbox ORDER BY seq") == [("d1",), ("d2",), ("d3",)]
    assert query("SELECT COUNT(*) FROM outbox") == [(0,)]
    assert await store.queue_depth() == 3

    connect_seam.deny_insert.clear()
    retried = await store.admit(command)
    assert retried.new
    assert query("SELECT idem_key, kind FROM outbox") == [("cmd:cmd-1", "command")]
    assert query("SELECT status FROM inbox WHERE delivery_id = 'cmd-1'") == [("done",)]


async def test_complete_turn_failing_midway_changes_nothing(open_store, make, connect_seam, query):
    store = await open_store(connect=connect_seam)
    await store.admit(make.request("d1", "k1", "one"))
    await store.admit(make.request("d2", "k1", "two"))
    (claim,) = await store.claim_sessions("w", 10, 30.0, 1)
    connect_seam.deny_insert.add("outbox")
    with pytest.raises(StoreUnavailable):
        await store.complete_turn("w", make.outcome(claim, make.draft("final:1")), 30.0, 1)
    assert query("SELECT status, attempts FROM inbox ORDER BY seq") == [("queued", 1), ("queued", 0)]
    assert query("SELECT COUNT(*) FROM transcript") == [(0,)]
    assert query("SELECT COUNT(*) FROM outbox") == [(0,)]
    info = await store.session_info("k1")
    assert info is not None and info.leased_by == "w"

    connect_seam.deny_insert.clear()
    nxt = await store.complete_turn("w", make.outcome(claim, make.draft("final:1")), 30.0, 1)
    assert nxt is not None and [i.inbound.text for i in nxt.items] == ["two"]
    assert query("SELECT COUNT(*) FROM outbox") == [(1,)]


async def test_store_stays_usable_after_a_failed_write(open_store, make, connect_seam):
    store = await open_store(connect=connect_seam)
    connect_seam.deny_insert.add("inbox")
    for i in range(3):
        with pytest.raises(StoreUnavailable):
            await store.admit(make.request(f"x{i}"))
    connect_seam.deny_insert.clear()
    results = await asyncio.gather(*(store.admit(make.request(f"d{i}")) for i in range(20)))
    assert all(r.new for r in results)
    assert await store.queue_depth() == 20
    assert not connect_seam.writer.in_transaction  # no transaction was left open by the failures


async def test_a_settlement_that_failed_is_recorded_once_a_write_commits_and_the_chat_goes_on(
    open_store, make, connect_seam, query
):
    """A send went out but its record failed (a full disk, say). Left ``sending``, the row
    would hold its chat's later replies until a restart (one process: no lease hands a
    ``sending`` row on), which the e2e disk-full test caught; the store records it as soon as a
    write commits again, ahead of that write."""
    store = await open_store(connect=connect_seam)
    await store.admit(make.request("d1", "k1"))
    (claim,) = await store.claim_sessions("w", 10, 5.0, 1)
    await store.complete_turn("w", make.outcome(claim, make.draft("f1"), make.draft("f2")), 5.0, 1)
    (head,) = await store.claim_outbox(10)  # the chat's first reply; the second waits behind it
    assert head.idem_key == "f1"
    connect_seam.deny_update.add("outbox")
    with pytest.raises(StoreUnavailable, match="not authorized"):
        await store.settle_outbox([OutboxSettlement(head.id, "sent", platform_message_id="p1")])
    assert query("SELECT status FROM outbox WHERE id = ?", head.id) == [("sending",)]
    connect_seam.deny_update.clear()
    (after,) = await store.claim_outbox(10)
    assert after.idem_key == "f2", after
    assert query("SELECT status, platform_message_id FROM outbox WHERE id = ?", head.id) == [("sent", "p1")]
