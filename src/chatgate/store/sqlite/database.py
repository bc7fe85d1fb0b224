"""One SQLite file in WAL mode: the group-commit writer, the reader pool and the file lock.

Every role module reads and writes through a ``Database``: writes are plain functions of
a connection queued to the one writer thread (``writer.py``), reads run on a small pool
of reader threads with their own connections. Nothing here runs on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from chatgate.domain.errors import StoreUnavailable
from chatgate.store.sqlite import identity
from chatgate.store.sqlite.health import DatabaseHealth
from chatgate.store.sqlite.schema import migrate
from chatgate.store.sqlite.space import JOURNAL_SIZE_LIMIT, SpareSpace, autocheckpoint_pages
from chatgate.store.sqlite.writer import GroupCommitWriter

T = TypeVar("T")
Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
Connect = Callable[[str], sqlite3.Connection]


def relaxed_level(synchronous: Synchronous) -> Synchronous:
    """The level of a commit recovery can redo: NORMAL in WAL (never above the configured one)."""
    return "NORMAL" if synchronous in ("FULL", "EXTRA") else synchronous


def default_connect(path: str) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)


class Database:
    """The connections to one database file, and their lifetime."""

    def __init__(
        self,
        path: Path | str,
        *,
        synchronous: Synchronous = "FULL",
        group_commit: bool = True,
        max_batch: int = 512,
        readers: int = 2,
        connect: Connect = default_connect,
        on_commit: Callable[[int, float], None] | None = None,
    ) -> None:
        self.path = str(path)
        self._synchronous = synchronous
        self._connect = connect
        self._space = SpareSpace(self.path)
        self._writer = GroupCommitWriter(
            self._open_writer,
            max_batch=max_batch if group_commit else 1,
            on_commit=on_commit,
            space=self._space,
            durable=synchronous,
            relaxed=relaxed_level(synchronous),
        )
        self._health = DatabaseHealth(self.path, connect, self._writer.run, self._space.reserve)
        self._readers = ThreadPoolExecutor(max_workers=readers, thread_name_prefix="chatgate-read")
        self._local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._reader_lock = threading.Lock()
        self._opened = False
        self._closed = False
        self._lock_fd: int | None = None

    # ------------------------------------------------------------ connections

    def _pragmas(self, conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")

    def _open_writer(self) -> sqlite3.Connection:
        conn = self._connect(self.path)
        if str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower() != "wal":
            self._writer.relaxed = self._synchronous  # a rollback journal: every commit at the set level
        conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute(f"PRAGMA wal_autocheckpoint = {autocheckpoint_pages(self.path, page_size)}")
        self._pragmas(conn)
        migrate(conn)
        identity.record(self.path)
        self._space.reserve()
        return conn

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect(self.path)
            self._pragmas(conn)
            conn.execute("PRAGMA query_only = ON")
            self._local.conn = conn
            with self._reader_lock:
                self._reader_conns.append(conn)
        return conn

    # ------------------------------------------------------------ lifetime

    async def open(self) -> None:
        if self._opened:
            return
        if self._closed:
            raise StoreUnavailable("this store was closed; create a new SqliteStore to reopen the file")
        await asyncio.to_thread(Path(self.path).parent.mkdir, parents=True, exist_ok=True)
        await asyncio.to_thread(self._lock_database)
        try:
            await asyncio.to_thread(identity.refuse_if_damaged, self.path)
            await asyncio.to_thread(self._writer.start)
        except BaseException:
            self._unlock_database()
            raise
        self._opened = True

    def _require_open(self) -> None:
        if not self._opened:
            raise StoreUnavailable("store is not open")

    async def close(self) -> None:
        if not self._opened:
            return
        self._opened = False
        self._closed = True
        await self._health.close()
        await asyncio.to_thread(self._writer.stop)
        # Let running reads finish (queued ones see _closed and fail fast) before their
        # connections are closed: closing a connection under a running read crashes sqlite3.
        await asyncio.to_thread(self._readers.shutdown, wait=True)
        await asyncio.to_thread(self._close_readers)
        self._unlock_database()

    def _lock_database(self) -> None:
        """One store per database file, across processes and state directories.

        The gateway's runtime lock guards a state directory; two directories can
        still name the same ``store.sqlite.path``, and two owners of one file would
        take each other's leases at start-up. The kernel drops this lock on death.
        """
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreUnavailable(
                f"{self.path} is already open in another chatgate process; a database serves one"
                " gateway (stop the other one, or give this one its own store.sqlite.path)"
            ) from None
        self._lock_fd = fd

    def _unlock_database(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _close_readers(self) -> None:
        with self._reader_lock:
            conns, self._reader_conns = self._reader_conns, []
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):  # another thread's handle; harmless
                conn.close()

    # ------------------------------------------------------------ access

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on a reader thread's connection (committed data only)."""
        self._require_open()

        def call() -> T:
            if self._closed:
                raise StoreUnavailable("store is closed")
            try:
                return fn(self._reader())
            except sqlite3.Error as exc:
                self._health.saw(exc)
                raise StoreUnavailable(f"sqlite read failed: {exc}") from exc

        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._readers, call)
        except RuntimeError as exc:  # executor shut down
            raise StoreUnavailable(f"store is closed: {exc}") from exc

    async def write(self, fn: Callable[[sqlite3.Connection], T], *, redoable: bool = False) -> T:
        """Queue ``fn`` to the writer; returns its result once its transaction committed.

        ``redoable``: a write whose loss after a power cut is harmless: recovery redoes it (a
        session claim, a lease renewal, an upstream cursor), or a reply it recorded as sent is
        sent again marked as a possible duplicate (a 'sent' settlement). It may commit without
        an fsync of its own (``GroupCommitWriter``); the next durable commit, or an fsync
        ``SYNC_LAG`` later, carries it to the disk. Whatever the gateway acknowledges or sends
        next depends on a later durable commit, never on it alone.
        """
        self._require_open()
        try:
            return await self._writer.run(fn, redoable=redoable)
        except StoreUnavailable as exc:
            self._health.saw(exc.__cause__)
            raise

    async def sync(self) -> None:
        """Return once every write committed so far, redoable ones included, is on the disk."""
        self._require_open()
        await self._writer.sync()

    def defer_write(self, key: str, fn: Callable[[sqlite3.Connection], object]) -> None:
        """Commit ``fn`` as soon as writes succeed again (see ``GroupCommitWriter.defer``)."""
        self._writer.defer(key, fn)

    def forget_deferred(self, key: str) -> None:
        self._writer.forget(key)

    async def ping(self, timeout: float = 1.0) -> None:
        """Prove a write commits now and the file is intact (``health.py``); raises with the reason."""
        self._require_open()
        await self._health.check(timeout)


class Connections(Protocol):
    """What the role classes read and write through: the gateway's ``Database`` (its writer
    thread, readers and lock), or a ``side.SideDatabase`` beside a running gateway."""

    path: str

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def ping(self, timeout: float = 1.0) -> None: ...

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    async def write(self, fn: Callable[[sqlite3.Connection], T], *, redoable: bool = False) -> T: ...

    async def sync(self) -> None: ...

    def defer_write(self, key: str, fn: Callable[[sqlite3.Connection], object]) -> None: ...

    def forget_deferred(self, key: str) -> None: ...


class SqliteRole:
    """Base of the role classes: each reads and writes through the store's one ``Connections``."""

    def __init__(self, db: Connections) -> None:
        self._db = db
