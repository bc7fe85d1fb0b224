"""One writer thread that commits concurrent writes together (group commit).

Each write is a plain function of a connection. The thread takes whatever has
queued up, runs it in one transaction and commits once, so N concurrent
admissions cost one fsync instead of N. A write that raises is isolated: the
batch is rolled back and re-run one write per transaction, so one bad write
never fails its neighbours. Results are handed back to the event loop only
after the commit returned: a caller never sees "written" for an uncommitted row.

A write queued as ``redoable`` (a claim whose loss after a power cut recovery redoes)
lets its batch commit at ``relaxed`` durability (``synchronous=NORMAL``: no fsync of
the WAL) when every write of the batch is redoable; any other write makes the batch
commit at the configured level. In WAL mode a later fsync of the WAL covers every frame
before it, so a power cut can lose only a tail of redoable commits, never one before a
durable commit, and a process crash loses none (the OS has the pages).
"""

from __future__ import annotations

import asyncio
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

log = logging.getLogger(__name__)
T = TypeVar("T")
WriteFn = Callable[[sqlite3.Connection], Any]


class _Write(msgspec.Struct):
    fn: WriteFn
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    redoable: bool = False


_STOP = object()
DEFERRED_RETRY = 1.0
"""Seconds between tries of deferred writes while no other write arrives."""
RELIEVE_EVERY = 1.0
"""Seconds between checkpoints forced by a full disk (each failing batch would ask for one)."""


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
        self._synchronous = durable
        """The connection's ``synchronous`` now (the connect function sets ``durable``)."""
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

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="chatgate-sqlite-writer", daemon=True)
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
        with self._deferred_lock:
            pending = dict(self._deferred)
        if not pending:
            return
        try:
            self._sync(conn, redoable=False)
            self._transaction(conn, list(pending.values()))
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
        if self._closed:
            raise StoreUnavailable("store is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put(_Write(fn, future, loop, redoable))
        return await future

    def _sync(self, conn: sqlite3.Connection, redoable: bool) -> None:
        """Set the connection's durability for the next transaction (before its BEGIN)."""
        level = self.relaxed if redoable else self._durable
        if level != self._synchronous:
            conn.execute(f"PRAGMA synchronous = {level}")
            self._synchronous = level

    def _run(self) -> None:
        try:
            conn = self._connect()
        except BaseException as exc:  # reported to start()
            self._startup_error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            self._loop_forever(conn)
        finally:
            conn.close()

    def _loop_forever(self, conn: sqlite3.Connection) -> None:
        stopping = False
        while not stopping:
            try:
                first = self._queue.get(timeout=DEFERRED_RETRY if self._deferred else None)
            except queue.Empty:
                self._run_deferred(conn)
                continue
            self._run_deferred(conn)
            if first is _STOP:
                return
            batch: list[_Write] = [first]  # type: ignore[list-item]
            while len(batch) < self._max_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stopping = True
                    break
                batch.append(nxt)  # type: ignore[arg-type]
            self._commit_batch(conn, batch)

    def _commit_batch(self, conn: sqlite3.Connection, batch: list[_Write]) -> None:
        started = time.perf_counter()
        outcomes: list[tuple[_Write, Any, BaseException | None]]
        try:
            self._sync(conn, redoable=all(w.redoable for w in batch))
            results = self._transaction(conn, [w.fn for w in batch])
            outcomes = [(w, r, None) for w, r in zip(batch, results, strict=True)]
        except BaseException as exc:
            if len(batch) == 1:
                outcomes = [(batch[0], None, _wrap(exc))]
            else:
                outcomes = [self._isolated(conn, w) for w in batch]
        if self._on_commit is not None:
            self._on_commit(len(batch), time.perf_counter() - started)
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, Any]]] = {}
        for write, result, error in outcomes:
            by_loop.setdefault(write.loop, []).append((write.future, result, error))
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(_resolve, items)
            except RuntimeError:  # the loop is closed; nobody is waiting any more
                log.debug("dropping %d write results for a closed loop", len(items))

    def _isolated(self, conn: sqlite3.Connection, write: _Write) -> tuple[_Write, Any, BaseException | None]:
        try:
            self._sync(conn, write.redoable)
            (result,) = self._transaction(conn, [write.fn])
            return write, result, None
        except BaseException as exc:
            return write, None, _wrap(exc)

    def _transaction(self, conn: sqlite3.Connection, fns: list[WriteFn]) -> list[Any]:
        """One transaction; on a full disk, make room (checkpoint, spare file) and try once more."""
        try:
            results = _transaction(conn, fns)
        except sqlite3.Error as exc:
            if not (is_disk_full(exc) and self._relieve(conn)):
                raise
            log.warning("the disk was full; checkpointed the WAL to make room and retried the write")
            results = _transaction(conn, fns)
        if self._space is not None:
            self._space.reserve()
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
