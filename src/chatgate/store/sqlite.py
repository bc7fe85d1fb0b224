"""The embedded default store: one SQLite file in WAL mode.

Writes go through one group-commit writer thread; reads run on a small pool of
reader threads with their own connections. Nothing here runs on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal, TypeVar

from chatgate.domain.context import ChatLabels
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbox import AdmitRequest, AdmitResult, QueueStats, RejectedInbound
from chatgate.domain.outbox import OutboxRow, OutboxSettlement
from chatgate.domain.sessions import SessionInfo
from chatgate.domain.source import Source
from chatgate.domain.turns import Claim, TurnOutcome
from chatgate.store import sqlite_ops as ops
from chatgate.store.schema import MIGRATIONS, SCHEMA_VERSION
from chatgate.store.sqlite_approval_store import ApprovalMethods
from chatgate.store.sqlite_writer import GroupCommitWriter

log = logging.getLogger(__name__)
T = TypeVar("T")
Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
Connect = Callable[[str], sqlite3.Connection]


def default_connect(path: str) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema to ``SCHEMA_VERSION``; refuse a newer database."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreUnavailable(
            f"database schema v{version} is newer than this chatgate (v{SCHEMA_VERSION});"
            " upgrade chatgate or point it at another state directory"
        )
    for target in range(version, SCHEMA_VERSION):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in MIGRATIONS[target].split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {target + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return SCHEMA_VERSION


def read_sessions(path: Path, limit: int) -> list[SessionInfo]:
    """List sessions without opening a store: read-only, no writer, no migration.

    For the CLI, which may run while a gateway owns the database.
    """
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot open {path}: {exc}") from exc
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            raise StoreUnavailable(
                f"{path} has schema v{version}; this chatgate reads v{SCHEMA_VERSION}."
                " Run the matching chatgate version (a newer gateway upgrades the file when it starts)."
            )
        return ops.list_sessions(conn, limit)
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot read {path}: {exc}") from exc
    finally:
        conn.close()


class SqliteStore(ApprovalMethods):
    """The Store protocol over one SQLite file (approval methods in ``ApprovalMethods``)."""

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
        self._writer = GroupCommitWriter(
            self._open_writer, max_batch=max_batch if group_commit else 1, on_commit=on_commit
        )
        self._readers = ThreadPoolExecutor(max_workers=readers, thread_name_prefix="chatgate-read")
        self._local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._reader_lock = threading.Lock()
        self._opened = False
        self._closed = False
        self._lock_fd: int | None = None

    # ------------------------------------------------------------ lifecycle

    def _pragmas(self, conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")

    def _open_writer(self) -> sqlite3.Connection:
        conn = self._connect(self.path)
        conn.execute("PRAGMA journal_mode = WAL")
        self._pragmas(conn)
        migrate(conn)
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

    async def open(self) -> None:
        if self._opened:
            return
        if self._closed:
            raise StoreUnavailable("this store was closed; create a new SqliteStore to reopen the file")
        await asyncio.to_thread(Path(self.path).parent.mkdir, parents=True, exist_ok=True)
        await asyncio.to_thread(self._lock_database)
        try:
            await asyncio.to_thread(self._writer.start)
        except BaseException:
            self._unlock_database()
            raise
        self._opened = True

    async def close(self) -> None:
        if not self._opened:
            return
        self._opened = False
        self._closed = True
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

    # ------------------------------------------------------------ plumbing

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if not self._opened:
            raise StoreUnavailable("store is not open")

        def call() -> T:
            if self._closed:
                raise StoreUnavailable("store is closed")
            try:
                return fn(self._reader())
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"sqlite read failed: {exc}") from exc

        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._readers, call)
        except RuntimeError as exc:  # executor shut down
            raise StoreUnavailable(f"store is closed: {exc}") from exc

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if not self._opened:
            raise StoreUnavailable("store is not open")
        return await self._writer.run(fn)

    # ------------------------------------------------------------ protocol

    async def ping(self, timeout: float = 1.0) -> None:
        """Prove the database can be read and write-locked now, on a connection of its own.

        A dedicated short-timeout connection keeps a stuck ping from tying up the
        reader pool or the writer.
        """
        if not self._opened:
            raise StoreUnavailable("store is not open")

        def probe() -> None:
            try:
                conn = self._connect(self.path)
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"cannot open {self.path}: {exc}") from exc
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
                conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"database not usable: {exc}") from exc
            finally:
                conn.close()

        await asyncio.to_thread(probe)

    async def recover(self, owner: str) -> int:
        return await self._write(lambda c: ops.recover(c, owner))

    async def admit(self, request: AdmitRequest) -> AdmitResult:
        now = time.time()
        return await self._write(lambda c: ops.admit(c, request, now))

    async def claim_sessions(self, owner: str, limit: int, lease_seconds: float, batch: int) -> list[Claim]:
        now = time.time()
        return await self._write(lambda c: ops.claim_sessions(c, owner, limit, lease_seconds, batch, now))

    async def renew_lease(self, session_key: str, owner: str, lease_seconds: float) -> bool:
        now = time.time()
        return await self._write(lambda c: ops.renew_lease(c, session_key, owner, lease_seconds, now))

    async def complete_turn(
        self, owner: str, outcome: TurnOutcome, lease_seconds: float, batch: int
    ) -> Claim | None:
        now = time.time()
        return await self._write(lambda c: ops.complete_turn(c, owner, outcome, lease_seconds, batch, now))

    async def abandon_turn(
        self,
        owner: str,
        session_key: str,
        item_seqs: tuple[int, ...],
        retry_at: float | None,
        error: str | None,
    ) -> None:
        await self._write(lambda c: ops.abandon_turn(c, owner, session_key, item_seqs, retry_at, error))

    async def session_source(self, session_key: str) -> Source | None:
        def read(c: sqlite3.Connection) -> Source | None:
            row = c.execute("SELECT source_json FROM sessions WHERE key = ?", (session_key,))
            found = row.fetchone()
            return Source.from_dict(json.loads(found[0])) if found else None

        return await self._read(read)

    async def chat_labels(self, platform: str, scope: str | None, chat_id: str) -> ChatLabels:
        def read(c: sqlite3.Connection) -> ChatLabels:
            row = c.execute(
                "SELECT chat_name, chat_topic FROM chat_labels"
                " WHERE platform = ? AND scope = ? AND chat_id = ?",
                (platform, scope or "", chat_id),
            ).fetchone()
            return ChatLabels(row[0], row[1]) if row else ChatLabels()

        return await self._read(read)

    async def history(self, session_id: str, limit: int) -> list[HistoryEntry]:
        return await self._read(lambda c: ops.history(c, session_id, limit))

    async def session_info(self, session_key: str) -> SessionInfo | None:
        return await self._read(lambda c: ops.session_info(c, session_key))

    async def list_sessions(self, limit: int = 100) -> list[SessionInfo]:
        return await self._read(lambda c: ops.list_sessions(c, limit))

    async def queue_depth(self) -> int:
        def read(c: sqlite3.Connection) -> int:
            return int(c.execute("SELECT COUNT(*) FROM inbox WHERE status = 'queued'").fetchone()[0])

        return await self._read(read)

    async def queue_stats(self) -> QueueStats:
        def read(c: sqlite3.Connection) -> QueueStats:
            depth, oldest = c.execute(
                "SELECT COUNT(*), MIN(admitted_at) FROM inbox WHERE status = 'queued'"
            ).fetchone()
            row = c.execute(
                "SELECT last_error FROM sessions WHERE last_error IS NOT NULL"
                " ORDER BY last_activity DESC LIMIT 1"
            ).fetchone()
            return QueueStats(int(depth), oldest, row[0] if row else None)

        return await self._read(read)

    async def claim_outbox(self, limit: int) -> list[OutboxRow]:
        now = time.time()
        return await self._write(lambda c: ops.claim_outbox(c, limit, now))

    async def settle_outbox(self, settlements: list[OutboxSettlement]) -> None:
        if not settlements:
            return
        now = time.time()
        await self._write(lambda c: ops.settle_outbox(c, settlements, now))

    async def unconfirmed_for_chat(self, platform: str, chat_id: str) -> list[OutboxRow]:
        return await self._read(lambda c: ops.unconfirmed_for_chat(c, platform, chat_id))

    async def confirm_outbox(self, platform: str, chat_id: str, row_id: int) -> bool:
        now = time.time()
        return await self._write(lambda c: ops.confirm_outbox(c, platform, chat_id, row_id, now))

    async def get_cursor(self, name: str) -> str | None:
        def read(c: sqlite3.Connection) -> str | None:
            row = c.execute("SELECT value FROM cursors WHERE name = ?", (name,)).fetchone()
            return str(row[0]) if row else None

        return await self._read(read)

    async def set_cursor(self, name: str, value: str) -> None:
        now = time.time()

        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO cursors (name, value, updated_at) VALUES (?,?,?) ON CONFLICT (name)"
                " DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                (name, value, now),
            )

        await self._write(write)

    async def cancel_running(self, session_key: str, reason: str) -> int:
        now = time.time()

        def write(c: sqlite3.Connection) -> int:
            return c.execute(
                "UPDATE inbox SET status = 'cancelled', finished_at = ?, outcome = ?"
                " WHERE session_key = ? AND status = 'queued' AND claimed_by IS NOT NULL",
                (now, reason[:80], session_key),
            ).rowcount

        return await self._write(write)

    async def record_rejected(
        self, transport: str, delivery_id: str | None, reason: str, excerpt: str
    ) -> None:
        now = time.time()

        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO rejected_inbound (transport, delivery_id, reason, excerpt, received_at)"
                " VALUES (?,?,?,?,?)",
                (transport, delivery_id, reason[:500], excerpt[:500], now),
            )

        await self._write(write)

    async def rejected(self, limit: int = 100) -> list[RejectedInbound]:
        def read(c: sqlite3.Connection) -> list[RejectedInbound]:
            rows = c.execute(
                "SELECT transport, delivery_id, reason, excerpt, received_at FROM rejected_inbound"
                " ORDER BY id DESC LIMIT ?",
                (limit,),
            ).fetchall()
            return [RejectedInbound(*row) for row in rows]

        return await self._read(read)
