"""Store calls that wait on SQLite locks wait in threads, never on the event loop.

Why not the obvious blocker (a second connection in ``locking_mode=EXCLUSIVE`` holding a
write transaction): in WAL mode every open connection keeps a SHARED lock on the database
file, so while the store is open such a connection cannot get its EXCLUSIVE lock at all
(``BEGIN EXCLUSIVE`` fails at once with "database is locked"); a WAL writer never blocks
WAL readers. What does block a WAL reader is its read-mark slots in the -shm file being
held exclusively (briefly done by checkpointers and by writers restarting the WAL). The
``read_blocker`` fixture holds exactly those locks from a child process (POSIX locks are
per process) and releases them on its own clock.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest


class Ticker:
    """Counts 5 ms ticks of the event loop; a blocked loop stops counting."""

    def __init__(self) -> None:
        self.ticks = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0.005)
            self.ticks += 1

    async def __aenter__(self) -> Ticker:
        self._task = asyncio.create_task(self._run())
        await asyncio.sleep(0.02)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def test_read_blocked_by_a_lock_waits_in_a_thread_while_the_event_loop_keeps_running(
    open_store, make, read_blocker
):
    store = await open_store()
    await store.admit(make.request("d1"))
    assert await store.queue_depth() == 1  # readers connected, -shm exists
    async with read_blocker() as blocker, Ticker() as ticker:
        blocker.release_after(0.3)
        started, ticks_before = time.perf_counter(), ticker.ticks
        depth = await store.queue_depth()
        elapsed, ticks_during = time.perf_counter() - started, ticker.ticks - ticks_before
    assert depth == 1
    assert elapsed >= 0.25, f"the read was not blocked (took {elapsed:.3f} s); the test proves nothing"
    assert ticks_during >= 5, f"event loop ticked {ticks_during} times during a {elapsed:.3f} s read"


async def test_history_read_blocked_by_a_lock_does_not_freeze_the_event_loop(open_store, make, read_blocker):
    store = await open_store()
    await store.admit(make.request("d1"))
    (claim,) = await store.claim_sessions("w", 10, 30.0, 1)
    await store.complete_turn("w", make.outcome(claim), 30.0, 1)
    assert len(await store.history(claim.session_id, 10)) == 2
    async with read_blocker() as blocker, Ticker() as ticker:
        blocker.release_after(0.3)
        started, ticks_before = time.perf_counter(), ticker.ticks
        entries = await store.history(claim.session_id, 10)
        elapsed, ticks_during = time.perf_counter() - started, ticker.ticks - ticks_before
    assert [e.role for e in entries] == ["user", "assistant"]
    assert elapsed >= 0.25, f"the read was not blocked (took {elapsed:.3f} s); the test proves nothing"
    assert ticks_during >= 5, f"event loop ticked {ticks_during} times during a {elapsed:.3f} s read"


async def test_write_blocked_by_another_connections_write_lock_does_not_freeze_the_event_loop(
    open_store, make, db_path
):
    store = await open_store()
    other = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False, timeout=30.0)
    try:
        other.execute("BEGIN IMMEDIATE")  # holds the WAL write lock
        release = threading.Timer(0.3, other.execute, ("COMMIT",))
        async with Ticker() as ticker:
            started, ticks_before = time.perf_counter(), ticker.ticks
            release.start()
            result = await store.admit(make.request("d1"))
            elapsed, ticks_during = time.perf_counter() - started, ticker.ticks - ticks_before
        release.join()
    finally:
        other.close()
    assert result.new
    assert elapsed >= 0.25, f"the write was not blocked (took {elapsed:.3f} s); the test proves nothing"
    assert ticks_during >= 5, f"event loop ticked {ticks_during} times during a {elapsed:.3f} s write"


# Run in a child process: the failure mode includes a segmentation fault, which would take
# the test runner down with it.
_CLOSE_DURING_READS = textwrap.dedent(
    r"""
    import asyncio, sys
    from pathlib import Path
    from chatgate.domain.inbound import Inbound
    from chatgate.domain.source import Source
    from chatgate.domain.errors import StoreUnavailable
    from chatgate.domain.inbox import AdmitRequest
    from chatgate.store.sqlite import SqliteStore

    LOCKER = sys.argv[2]

    async def once(path):
        store = SqliteStore(path, readers=1)
        await store.open()
        src = Source(platform="webchat", chat_id="c1", user_id="u1")
        await store.admit(AdmitRequest(Inbound("webchat", "d1", src, "hi"), "k1"))
        await store.queue_depth()
        locker = await asyncio.create_subprocess_exec(
            sys.executable, "-c", LOCKER, path + "-shm",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        assert await locker.stdout.readline() == b"locked\n"
        in_flight = asyncio.ensure_future(store.queue_depth())   # blocked in the one reader
        queued = asyncio.ensure_future(store.queue_depth())      # waiting for that reader
        await asyncio.sleep(0.05)
        locker.stdin.write(b"0.1\n")
        await store.close()
        await locker.wait()
        outcomes = []
        for read in (in_flight, queued):
            try:
                outcomes.append(repr(await read))
            except StoreUnavailable:
                outcomes.append("StoreUnavailable")
            except BaseException as exc:
                outcomes.append(type(exc).__name__)
        print(" ".join(outcomes), flush=True)

    async def main(directory):
        for i in range(5):
            await once(str(Path(directory) / f"s{i}.db"))

    asyncio.run(main(sys.argv[1]))
    """
)


def test_closing_the_store_during_reads_neither_crashes_nor_leaks_cancellation(
    tmp_path: Path, shm_locker_script: str
):
    child = subprocess.run(
        [sys.executable, "-c", _CLOSE_DURING_READS, str(tmp_path), shm_locker_script],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, f"child died with {child.returncode}: {child.stderr[-2000:]}"
    lines = child.stdout.split("\n")[:-1]
    assert len(lines) == 5
    for line in lines:
        in_flight, queued = line.split()
        assert in_flight in ("1", "StoreUnavailable"), line
        assert queued in ("1", "StoreUnavailable"), line


async def test_exclusive_locking_mode_cannot_lock_out_an_open_wal_store(open_store, make, db_path):
    """Why the read tests use ``read_blocker``: the textbook blocker does not block here."""
    store = await open_store()
    await store.admit(make.request("d1"))
    other = sqlite3.connect(db_path, isolation_level=None, timeout=0.1)
    try:
        other.execute("PRAGMA locking_mode = EXCLUSIVE")
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN EXCLUSIVE")
    finally:
        other.close()
    assert await store.queue_depth() == 1
