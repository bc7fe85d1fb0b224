"""One writer thread that commits concurrent writes together (group commit).

Each write is a plain function of a connection. The thread takes whatever has
queued up, runs it in one transaction and commits once, so N concurrent
admissions cost one fsync instead of N. A write that raises is isolated: the
batch is rolled back and re-run one write per transaction, so one bad write
never fails its neighbours. Results are handed back to the event loop only
after the commit returned: a caller never sees "written" for an uncommitted row.

A write queued as ``redoable`` (one whose loss after a power cut is harmless: a claim
recovery redoes, a 'sent' settlement) lets its batch commit without an fsync when every
write of the batch is redoable; any other write makes the batch durable before its callers
hear of it. In WAL mode with a configured level above ``NORMAL`` the connection runs at
``NORMAL`` and the writer fsyncs the WAL itself after a durable batch (``wal_file.py``);
otherwise SQLite syncs every commit at the configured level. An fsync of the WAL covers
every frame before it, so a power cut can lose only a tail of redoable commits, never one
before a durable commit, and a process crash loses none (the OS has the pages). That tail
is bounded in time: once relaxed commits have waited ``SYNC_LAG`` for a durable one, the
writer fsyncs the WAL anyway (``_make_durable``).

``sync`` waits for every commit made before it to be on the disk: an adapter that admitted
replayable events relaxed calls it before it acknowledges them upstream. It lingers up to
``SYNC_LINGER`` for a durable commit to carry them (a quick turn's commit), then fsyncs the
WAL itself; either way the turn did not wait for an fsync before it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from chatgate.domain.errors import StoreError, StoreUnavailable
from chatgate.store.sqlite.space import SpareSpace, is_disk_full
from chatgate.store.sqlite.sync_waiters import Answer, SyncCall, SyncWaiters
from chatgate.store.sqlite.wal_file import WalFile

log = logging.getLogger(__name__)
T = TypeVar("T")
WriteFn = Callable[[sqlite3.Connection], Any]


class _Write(msgspec.Struct):
    fn: WriteFn
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    redoable: bool = False


_STOP = object()


class _NotSynced(StoreUnavailable):
    """The disk refused an fsync of the WAL. Linux reports a write-back error once and may have
    dropped the pages, so a later fsync can succeed with frames missing, and recovery stops at
    the first bad frame, taking every later commit with it: nothing written from then on can be
    trusted to reach the disk. The writer refuses every write until a restart (which recovers
    what is on the disk), as PostgreSQL stops at a failed fsync."""


DEFERRED_RETRY = 1.0
"""Seconds between tries of deferred writes while no other write arrives."""
RELIEVE_EVERY = 1.0
"""Seconds between checkpoints forced by a full disk (each failing batch would ask for one)."""
THREAD_NAME = "chatgate-sqlite-writer"
"""The writer thread's name (what a profile or a benchmark finds it by)."""
SYNC_LAG = 1.0
"""Seconds a relaxed commit may wait for a durable commit to carry it to the disk."""
SYNC_LINGER = 0.01
"""Seconds a ``sync`` caller may wait for a durable commit to carry the relaxed ones before
the writer fsyncs the WAL for it: long enough for a turn's commit to follow its admission,
short enough that an acknowledgement held for it costs the next poll next to nothing."""


def _wrap(exc: BaseException) -> BaseException:
    if isinstance(exc, StoreError):
        return exc
    if not isinstance(exc, sqlite3.Error):
        return exc
    if is_disk_full(exc):
        wrapped = StoreUnavailable(
            f"sqlite write failed: the disk is full ({exc}); free space on it and chatgate resumes by itself"
        )
    else:
        wrapped = StoreUnavailable(f"sqlite write failed: {exc}")
    wrapped.__cause__ = exc
    return wrapped


def _resolve(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, result, error in outcomes:
        if future.done():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


def _hand_back(answers: list[Answer]) -> None:
    """Resolve each caller's future on its own loop: one ``call_soon_threadsafe`` a loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, Any]]] = {}
    for loop, future, result, error in answers:
        by_loop.setdefault(loop, []).append((future, result, error))
    for loop, items in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve, items)
        except RuntimeError:  # the loop is closed; nobody is waiting any more
            log.debug("dropping %d results for a closed loop", len(items))


class GroupCommitWriter:
    """Owns the only write connection to the database."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        *,
        max_batch: int = 512,
        on_commit: Callable[[int, float], None] | None = None,
        space: SpareSpace | None = None,
        durable: str = "FULL",
        relaxed: str = "FULL",
    ) -> None:
        self._connect = connect
        self._durable = durable
        self.relaxed = relaxed
        """The level of an all-redoable batch; only WAL makes a later fsync cover earlier commits."""
        self._wal: WalFile | None = None
        """Set when the writer, not SQLite, fsyncs the WAL (``relaxed`` below ``durable``)."""
        self._space = space
        self._relieved_at = -RELIEVE_EVERY
        self._max_batch = max(1, max_batch)
        self._on_commit = on_commit
        self._queue: queue.SimpleQueue[_Write | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._closed = False
        self._deferred: dict[str, WriteFn] = {}
        self._deferred_lock = threading.Lock()
        self.sync_lag = SYNC_LAG
        self._unsynced_since: float | None = None
        """When the oldest relaxed commit no fsync has covered yet was made (monotonic)."""
        self._sync_failure: _NotSynced | None = None
        self.sync_linger = SYNC_LINGER
        self._sync_waiters = SyncWaiters(_hand_back)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            raise StoreUnavailable(f"cannot open database: {self._startup_error}")

    def stop(self) -> None:
        """Drain queued writes, then close. Blocking: call from a worker thread."""
        if self._thread is None or self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join()

    def defer(self, key: str, fn: WriteFn) -> None:
        """Commit ``fn`` once writes succeed again, before the next batch (a later ``key`` replaces it).

        For a write whose failure would otherwise hold state until a timeout, such as the
        release of a session lease when the disk was full: it runs as soon as there is room.
        """
        with self._deferred_lock:
            self._deferred[key] = fn

    def forget(self, key: str) -> None:
        """Drop the deferred write of ``key`` (whatever it would have undone was taken over)."""
        with self._deferred_lock:
            self._deferred.pop(key, None)

    def _run_deferred(self, conn: sqlite3.Connection) -> None:
        if not self._deferred:  # unlocked: a write deferred before this batch was queued is seen
            return
        with self._deferred_lock:
            pending = dict(self._deferred)
        if not pending or self._sync_failure is not None:
            return
        try:
            self._transaction(conn, list(pending.values()), durable=True)
        except Exception as exc:
            log.debug("%d deferred writes still cannot commit: %s", len(pending), exc)
            return
        log.info("committed %d writes deferred while the store could not write", len(pending))
        with self._deferred_lock:
            for key, fn in pending.items():
                if self._deferred.get(key) is fn:
                    del self._deferred[key]

    async def run(self, fn: Callable[[sqlite3.Connection], T], *, redoable: bool = False) -> T:
        """Commit ``fn``; ``redoable``: its loss after a power cut is harmless (see the module)."""
        loop = self._callers_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put(_Write(fn, future, loop, redoable))
        return await future

    async def sync(self) -> None:
        """Return once every commit made before this call is on the disk (see the module)."""
        loop = self._callers_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._queue.put(SyncCall(future, loop))
        await future

    def _callers_loop(self) -> asyncio.AbstractEventLoop:
        """The caller's loop, once the writer takes calls at all (not closed, no failed fsync)."""
        if self._closed:
            raise StoreUnavailable("store is closed")
        if self._sync_failure is not None:
            raise StoreUnavailable(str(self._sync_failure))
        return asyncio.get_running_loop()

    def _run(self) -> None:
        try:
            conn = self._connect()
        except BaseException as exc:  # reported to start()
            self._startup_error = exc
            self._ready.set()
            return
        try:
            if self.relaxed != self._durable:  # WAL (the connect function says): we fsync it
                conn.execute(f"PRAGMA synchronous = {self.relaxed}")
                self._wal = WalFile.of(conn)
        except BaseException as exc:  # reported to start()
            conn.close()
            self._startup_error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            self._loop_forever(conn)
        finally:
            if self._wal is not None:
                self._wal.close()
            conn.close()

    def _loop_forever(self, conn: sqlite3.Connection) -> None:
        stopping = False
        while not stopping:
            try:
                first = self._queue.get(timeout=self._idle_timeout())
            except queue.Empty:
                self._run_deferred(conn)
                self._sync_if_due()
                self._answer_sync_calls()
                continue
            self._run_deferred(conn)
            if first is _STOP:
                break
            items = [first]
            while len(items) < self._max_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stopping = True
                    break
                items.append(nxt)
            batch = [w for w in items if isinstance(w, _Write)]
            if batch:
                self._commit_batch(conn, batch)
            if len(batch) < len(items):  # a sync call waits for what was committed before it
                calls = [c for c in items if isinstance(c, SyncCall)]
                self._sync_waiters.wait(calls, time.monotonic(), self.sync_linger)
            self._sync_if_due()
            self._answer_sync_calls()
        if self._unsynced_since is not None:
            self._make_durable()  # a clean stop leaves nothing for a power cut to take
        self._answer_sync_calls()

    def _idle_timeout(self) -> float | None:
        waits = [DEFERRED_RETRY] if self._deferred else []
        if self._unsynced_since is not None:
            waits.append(max(0.0, self._sync_due() - time.monotonic()))
        return min(waits, default=None)

    def _sync_due(self) -> float:
        """When the writer fsyncs the relaxed commits itself if no durable commit came first."""
        assert self._unsynced_since is not None
        due = self._unsynced_since + self.sync_lag
        waiters_due = self._sync_waiters.due
        return due if waiters_due is None else min(due, waiters_due)

    def _sync_if_due(self) -> None:
        if self._unsynced_since is not None and time.monotonic() >= self._sync_due():
            self._make_durable()

    def _answer_sync_calls(self) -> None:
        """Answer the sync calls once nothing relaxed is unsynced (or never will be). Called after
        a batch's own callers were answered: a lane's acknowledgement need not go before a reply."""
        if self._sync_waiters and (self._unsynced_since is None or self._sync_failure is not None):
            self._sync_waiters.release(self._sync_failure)

    def _make_durable(self) -> None:
        """Carry every relaxed commit to the disk (only set when the writer fsyncs the WAL)."""
        if self._wal is not None:
            with contextlib.suppress(_NotSynced):  # logged, and final: see ``_sync_wal``
                self._sync_wal(self._wal)

    def _sync_wal(self, wal: WalFile) -> None:
        """fsync the WAL; a refusal is final (``_NotSynced``)."""
        try:
            wal.sync()
        except OSError as exc:
            self._unsynced_since = None  # nothing more is tried
            self._sync_failure = _NotSynced(
                f"the disk refused to fsync {wal.path} ({exc}), so what was committed since the last"
                " good fsync may not be on it: chatgate refuses every write until it is restarted."
                " Check the disk (dmesg, free space), then restart chatgate"
            )
            log.error("%s", self._sync_failure)
            raise self._sync_failure from exc
        self._unsynced_since = None

    def _commit_batch(self, conn: sqlite3.Connection, batch: list[_Write]) -> None:
        started = time.perf_counter()
        outcomes: list[tuple[_Write, Any, BaseException | None]]
        try:
            durable = not all(w.redoable for w in batch)
            results = self._transaction(conn, [w.fn for w in batch], durable=durable)
            outcomes = [(w, r, None) for w, r in zip(batch, results, strict=True)]
        except _NotSynced as exc:  # perhaps committed, not durable: never run again, each is told
            outcomes = [(w, None, exc) for w in batch]
        except BaseException as exc:
            if len(batch) == 1:
                outcomes = [(batch[0], None, _wrap(exc))]
            else:
                outcomes = [self._isolated(conn, w) for w in batch]
        if self._on_commit is not None:
            try:
                self._on_commit(len(batch), time.perf_counter() - started)
            except Exception:  # a metrics hook must never stop the only writer (callers would hang)
                log.exception("the writer's commit hook failed")
        _hand_back([(w.loop, w.future, result, error) for w, result, error in outcomes])

    def _isolated(self, conn: sqlite3.Connection, write: _Write) -> tuple[_Write, Any, BaseException | None]:
        try:
            (result,) = self._transaction(conn, [write.fn], durable=not write.redoable)
            return write, result, None
        except BaseException as exc:
            return write, None, _wrap(exc)

    def _transaction(self, conn: sqlite3.Connection, fns: list[WriteFn], *, durable: bool) -> list[Any]:
        """One transaction; on a full disk, make room (checkpoint, spare file) and try once more.
        ``durable``: on the disk before this returns (else a later fsync carries it there).
        Refused after a failed fsync (``_NotSynced``): nothing written since can be trusted."""
        if self._sync_failure is not None:
            raise self._sync_failure
        changes = conn.total_changes
        try:
            results = _transaction(conn, fns)
        except sqlite3.Error as exc:
            if not (is_disk_full(exc) and self._relieve(conn)):
                raise
            log.warning("the disk was full; checkpointed the WAL to make room and retried the write")
            results = _transaction(conn, fns)
        if self._wal is not None:
            wrote = conn.total_changes != changes  # it wrote WAL frames
            # A durable write that wrote none may still stand on relaxed ones (a redelivery).
            if durable and (wrote or self._unsynced_since is not None):
                self._sync_wal(self._wal)
            elif wrote and self._unsynced_since is None:
                self._unsynced_since = time.monotonic()
        if self._space is not None:
            self._space.retake()
        return results

    def _relieve(self, conn: sqlite3.Connection) -> bool:
        now = time.monotonic()
        if self._space is None or now - self._relieved_at < RELIEVE_EVERY:
            return False
        self._relieved_at = now
        return self._space.relieve(conn)


def _transaction(conn: sqlite3.Connection, fns: list[WriteFn]) -> list[Any]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        results = [fn(conn) for fn in fns]
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return results
