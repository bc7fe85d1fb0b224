"""``make_durable``: what a lane waits for before it acknowledges relaxed admissions upstream.

A replayable message (Telegram's) is admitted at ``NORMAL``; the lane confirms it to the
platform only once ``Inbox.make_durable`` returns, which the writer answers at the first
fsync of the WAL after the call: a durable commit's (the turn's, usually), or its own once
``SYNC_LINGER`` has passed. Observed on the store's real writer connection and at its real
fsync (``CommitLevels``), with the lag and the linger stretched so that which fsync answered
is not a matter of timing.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from msgspec.structs import replace
from test_sqlite_durability import CommitLevels, refuse_fsyncs

from chatgate.domain.errors import StoreUnavailable

LONG = 30.0
"""A lag or linger no test waits out: a call it would hold fails the test's own timeout."""


@pytest.fixture(autouse=True)
def _no_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("chatgate.store.sqlite.writer.SYNC_LAG", LONG)


async def test_a_relaxed_admission_is_made_durable_by_the_writer_once_the_linger_is_over(
    open_store, make, connect_seam, monkeypatch
):
    monkeypatch.setattr("chatgate.store.sqlite.writer.SYNC_LINGER", 0.3)
    store = await open_store(connect=connect_seam)
    levels = CommitLevels(connect_seam.writer, monkeypatch)
    await store.admit(replace(make.request("d1", "k1"), redoable=True))
    assert levels.take() == ["NORMAL"]
    asked = time.monotonic()
    await asyncio.wait_for(store.make_durable(), 10)
    assert len(levels.syncs) == 1, "returned without the fsync that carries the admission"
    assert levels.syncs[0] - asked >= 0.25, "fsynced before the linger: a durable commit may come"
    assert levels.take() == [], "the writer's own fsync needs no commit"


async def test_a_durable_commit_during_the_linger_carries_the_admission_with_one_fsync(
    open_store, make, connect_seam, monkeypatch
):
    monkeypatch.setattr("chatgate.store.sqlite.writer.SYNC_LINGER", LONG)
    store = await open_store(connect=connect_seam)
    await store.admit(replace(make.request("d1", "k1"), redoable=True))
    (claim,) = await store.claim_sessions("w", 4, 30.0, 10)
    levels = CommitLevels(connect_seam.writer, monkeypatch)
    waiting = asyncio.ensure_future(store.make_durable())
    await asyncio.sleep(0.1)
    assert not waiting.done(), "answered before anything reached the disk"
    await store.commit_turn("w", make.outcome(claim, make.draft("r1")), 30.0, 10, 1)
    await asyncio.wait_for(waiting, 10)
    assert levels.take() == ["FULL"], "the turn commit, whose fsync covers the admission before it"
    assert len(levels.syncs) == 1


async def test_nothing_relaxed_to_carry_returns_without_an_fsync(open_store, make, connect_seam, monkeypatch):
    monkeypatch.setattr("chatgate.store.sqlite.writer.SYNC_LINGER", LONG)
    store = await open_store(connect=connect_seam)
    await store.admit(make.request("d1", "k1"))
    levels = CommitLevels(connect_seam.writer, monkeypatch)
    await asyncio.wait_for(store.make_durable(), 10)
    assert levels.syncs == [], "every commit was durable already"


async def test_a_redelivery_recognized_after_a_relaxed_admission_waits_for_its_fsync(
    open_store, make, connect_seam, monkeypatch
):
    """The duplicate writes nothing, but an adapter acknowledges on its answer: it must stand on
    a durable row, not on the relaxed one a power cut could still take."""
    monkeypatch.setattr("chatgate.store.sqlite.writer.SYNC_LINGER", LONG)
    store = await open_store(connect=connect_seam)
    await store.admit(replace(make.request("d1", "k1"), redoable=True))
    levels = CommitLevels(connect_seam.writer, monkeypatch)
    again = await store.admit(make.request("d1", "k1"))
    assert not again.new
    assert levels.take() == ["FULL"], "a durable write that changed nothing still fsyncs what it stands on"


async def test_a_refused_fsync_is_the_callers_error_and_final(open_store, make, connect_seam, monkeypatch):
    monkeypatch.setattr("chatgate.store.sqlite.writer.SYNC_LINGER", 0.05)
    store = await open_store(connect=connect_seam)
    await store.admit(replace(make.request("d1", "k1"), redoable=True))
    tries = refuse_fsyncs(monkeypatch)
    with pytest.raises(StoreUnavailable, match="restart chatgate"):
        await asyncio.wait_for(store.make_durable(), 10)
    assert len(tries) == 1
    with pytest.raises(StoreUnavailable, match="restart chatgate"):
        await store.make_durable()


async def test_a_clean_stop_answers_a_waiting_caller(open_store, make, connect_seam, monkeypatch):
    monkeypatch.setattr("chatgate.store.sqlite.writer.SYNC_LINGER", LONG)
    store = await open_store(connect=connect_seam)
    await store.admit(replace(make.request("d1", "k1"), redoable=True))
    levels = CommitLevels(connect_seam.writer, monkeypatch)
    waiting = asyncio.ensure_future(store.make_durable())
    await asyncio.sleep(0.1)
    await store.close()
    await asyncio.wait_for(waiting, 10)
    assert len(levels.syncs) == 1, "the stop fsynced the relaxed admission, then answered"


async def test_a_store_configured_below_full_answers_at_once(open_store, make, connect_seam, monkeypatch):
    """At ``NORMAL`` nothing is ever fsynced, the operator's choice: waiting would change nothing."""
    monkeypatch.setattr("chatgate.store.sqlite.writer.SYNC_LINGER", LONG)
    store = await open_store(connect=connect_seam, synchronous="NORMAL")
    levels = CommitLevels(connect_seam.writer, monkeypatch)
    await store.admit(replace(make.request("d1", "k1"), redoable=True))
    await asyncio.wait_for(store.make_durable(), 10)
    assert levels.syncs == []
    assert levels.take() == ["NORMAL"]
