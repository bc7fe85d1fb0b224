"""A short-lived store beside a running gateway: the CLI's way into the SQLite file.

The gateway holds the file's lock (one gateway per database) and its one writer thread; a
command (``chatgate pairing``, ``api-key``, ``schedules``, ``sessions``, ``user``) must still
read and change the file while it runs. ``SideDatabase`` takes no lock and starts no writer:
it opens a connection of its own and commits each write in a WAL transaction of its own
(``BEGIN IMMEDIATE``: SQLite serializes it with the gateway's writer, the busy timeout waits
for a batch to commit). The gateway's readers see the commit at once. It never migrates: a
file of another schema version is refused, naming the version that reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from chatgate import __version__
from chatgate.domain.errors import StoreUnavailable
from chatgate.store.sqlite.schema import SCHEMA_VERSION

T = TypeVar("T")
BUSY_TIMEOUT_MS = 30000


def version_problem(path: str, version: int) -> str | None:
    """Why this chatgate must not touch a file of schema ``version`` (None when it may)."""
    if version == SCHEMA_VERSION:
        return None
    if version < SCHEMA_VERSION:
        return (
            f"{path} has schema v{version}; chatgate {__version__} uses v{SCHEMA_VERSION}. Start the"
            f" gateway of chatgate {__version__} once (it upgrades the file), then run this again."
        )
    return (
        f"{path} has schema v{version}, newer than chatgate {__version__} knows (v{SCHEMA_VERSION}):"
        " run this with the chatgate version the gateway runs."
    )


class SideDatabase:
    """``Database``'s reads and writes on one connection of its own, run in a thread."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()  # one statement sequence at a time on the one connection

    async def open(self) -> None:
        if self._conn is None:
            self._conn = await asyncio.to_thread(self._connect)

    def _connect(self) -> sqlite3.Connection:
        try:  # mode=rw: a missing file is an error, never a new empty database
            conn = sqlite3.connect(
                f"file:{self.path}?mode=rw", uri=True, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open {self.path}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA foreign_keys = ON")
            problem = version_problem(self.path, int(conn.execute("PRAGMA user_version").fetchone()[0]))
        except sqlite3.Error as exc:
            conn.close()
            raise StoreUnavailable(f"cannot read {self.path}: {exc}") from exc
        if problem is not None:
            conn.close()
            raise StoreUnavailable(problem)
        return conn

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await asyncio.to_thread(self._closing, conn)

    def _closing(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            conn.close()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreUnavailable("store is not open")
        return self._conn

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self._read, fn)

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                return fn(self._connection())
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"{self.path}: {exc}") from exc

    async def write(self, fn: Callable[[sqlite3.Connection], T], *, redoable: bool = False) -> T:
        """Commit ``fn`` in a transaction of its own (``redoable`` changes nothing here: every
        commit is at the file's configured level)."""
        return await asyncio.to_thread(self._write, fn)

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                result = fn(conn)
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise StoreUnavailable(f"{self.path}: {exc}") from exc
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            return result

    async def sync(self) -> None:
        """Every commit here was at the file's configured level already (``write``)."""

    def defer_write(self, key: str, fn: Callable[[sqlite3.Connection], object]) -> None:
        """Nothing to keep for later: a side store runs no turns and outlives no outage."""

    def forget_deferred(self, key: str) -> None:
        """Nothing was deferred (``defer_write``)."""

    async def ping(self, timeout: float = 1.0) -> None:
        await asyncio.wait_for(self.read(lambda c: c.execute("SELECT 1").fetchone()), timeout)
