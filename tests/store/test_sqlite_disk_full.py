"""The SQLite store on a real 2 MiB file system: writes refused while full, and nothing held after.

The disk is filled by another writer (``disk_hog``), the way a log or a backup fills a
shared disk; the store must say why a write failed and take up again by itself.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from chatgate.domain.errors import StoreUnavailable
from chatgate.store.sqlite import SqliteStore
from store.conftest import Make, OpenStore
from support.smallfs import disk_hog, fill, small_fs

OWNER = "me"
LEASE = 600.0
"""Far longer than the test: a lease left behind would never expire while it runs."""


async def _until_full(store: SqliteStore, make: Make) -> None:
    """Add rows until a write fails: the first ones may get through on the room a checkpoint frees.

    New rows, not updates of one row: a checkpointed WAL is rewritten from its start, so
    rewriting the same page over and over needs no new room at all.
    """
    for i in range(2000):
        try:
            await store.admit(make.request(f"filler{i}", key="filler", text="f" * 2000))
        except StoreUnavailable as exc:
            assert "disk is full" in str(exc)
            return
    raise AssertionError("the disk never filled up")


async def test_a_release_that_failed_on_a_full_disk_is_committed_once_there_is_room(
    tmp_path: Path, open_store: OpenStore, make: Make
) -> None:
    """A small release can still fit in WAL pages the failed commit already allocated; then
    there is no failed release to keep. The scenario is run until the release fails too (in
    practice within a few tries), and that run must free the session at the next claim."""
    for attempt in range(20):
        if await _commit_and_release_fail_then_room_returns(tmp_path / f"try{attempt}", open_store, make):
            return
    raise AssertionError("in 20 tries the release never failed on the full disk")


async def _commit_and_release_fail_then_room_returns(root: Path, open_store: OpenStore, make: Make) -> bool:
    """False when the release got through on the full disk (nothing kept to test)."""
    with small_fs(root) as disk:
        store = await open_store(disk / "chatgate.db")
        await store.admit(make.request("m1", key="k1"))
        (claim,) = await store.claim_sessions(OWNER, 10, LEASE, 1)
        async with disk_hog(disk / "ballast"):
            await _until_full(store, make)
            # The room the store's own rescue just freed is taken back now, not at the hog's
            # next round: a rescue runs at most once a second, so the commit finds no room.
            await asyncio.to_thread(fill, disk / "ballast-now")
            with pytest.raises(StoreUnavailable, match="disk is full"):
                await store.complete_turn(OWNER, make.outcome(claim), LEASE, 1)
            try:
                await store.abandon_turn(OWNER, "k1", (claim.items[0].seq,), None, "commit failed")
            except StoreUnavailable as exc:
                assert "disk is full" in str(exc)
            else:
                await store.close()
                return False
            (disk / "ballast-now").unlink()
        # Room again: the session is free at the next claim, not when its lease runs out.
        claims = await store.claim_sessions(OWNER, 10, LEASE, 1)
        (again,) = [c for c in claims if c.session_key == "k1"]
        assert [i.seq for i in again.items] == [claim.items[0].seq]
        assert await store.complete_turn(OWNER, make.outcome(again), LEASE, 1) is None
        await store.close()
        return True


async def test_the_wal_alone_cannot_fill_a_small_disk_for_good(
    tmp_path: Path, open_store: OpenStore, make: Make
) -> None:
    with small_fs(tmp_path / "disk") as disk:
        store = await open_store(disk / "chatgate.db")
        for i in range(600):  # about 500 KiB of rows, rewritten many times over in the WAL
            await store.admit(make.request(f"m{i}", key=f"k{i % 7}", text="x" * 300))
        assert await store.queue_depth() == 600
