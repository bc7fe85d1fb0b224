"""Readiness of the database: can a write commit now, and is the file intact.

Taking the write lock proves neither: a full disk and a damaged page both let a
``BEGIN IMMEDIATE`` through. So the probe commits a real row through the one
writer (the path every admission takes, including its full-disk relief), and
runs SQLite's ``quick_check`` on a connection of its own now and then (at the
first probe, every ``INTEGRITY_EVERY`` seconds, and at once after any store call
reported a damaged page). Answers are cached briefly and only one probe write is
ever in flight, so ``/readyz`` cannot be used to hammer the writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any

from chatgate.domain.errors import StoreUnavailable

WRITE_EVERY = 1.0
"""Seconds one probe write's answer (good or bad) is reused for."""
INTEGRITY_EVERY = 600.0
"""Seconds between integrity checks while no store call reported damage (each reads the whole file)."""
FREE_FLOOR = 128 * 1024
"""Below this much free room the disk counts as full: the next WAL growth or checkpoint may not fit."""
PROBE_CURSOR = "chatgate.readiness-probe"
DAMAGE_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})

Write = Callable[[Callable[[sqlite3.Connection], Any]], Awaitable[Any]]


def is_damage(exc: BaseException | None) -> bool:
    """A damaged page or a file that is not a database (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.Error) and code is not None and code & 0xFF in DAMAGE_CODES


def _probe_write(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO cursors (name, value, updated_at) VALUES (?, 'ok', ?) ON CONFLICT (name)"
        " DO UPDATE SET updated_at = excluded.updated_at",
        (PROBE_CURSOR, time.time()),
    )


def _retrieve(future: asyncio.Future[Any]) -> None:
    """A probe whose caller timed out: its outcome is read by the next probe, not logged as lost."""
    if not future.cancelled():
        future.exception()


class DatabaseHealth:
    """The cached answers of the write probe and of the integrity check."""

    def __init__(
        self,
        path: str,
        connect: Callable[[str], sqlite3.Connection],
        write: Write,
        reserve: Callable[[], bool] = lambda: True,
    ) -> None:
        self._path = path
        self._reserve = reserve
        self._connect = connect
        self._write = write
        self._write_checked = -WRITE_EVERY
        self._write_error: str | None = None
        self._in_flight: asyncio.Future[Any] | None = None
        self._integrity_checked: float | None = None
        self._integrity: asyncio.Task[str | None] | None = None
        self._checking: sqlite3.Connection | None = None
        self._damage: str | None = None
        self._lock = asyncio.Lock()

    def saw(self, exc: BaseException | None) -> None:
        """A store call failed; if on a damaged page, check the whole file at the next probe."""
        if is_damage(exc):
            self._integrity_checked = None

    async def check(self, timeout: float) -> None:
        """Raise ``StoreUnavailable`` with the reason unless a write can commit now and the file is intact."""
        async with self._lock:
            now = time.monotonic()
            await self._integrity_answer(timeout)
            if now - self._write_checked >= WRITE_EVERY:
                self._write_error = await self._probe(timeout)
                self._write_checked = time.monotonic()
        if self._damage is not None:
            raise StoreUnavailable(
                f"{self._path} is damaged ({self._damage}); see docs/operations.md, 'A damaged database'"
            )
        if self._write_error is not None:
            raise StoreUnavailable(self._write_error)

    async def _integrity_answer(self, timeout: float) -> None:
        """Start the page check when due and take its answer if it comes within ``timeout``.

        On a large file the check can outlast a readiness probe: it then keeps running
        (one at a time) and a later probe takes its answer.
        """
        due = self._integrity_checked is None or time.monotonic() - self._integrity_checked > INTEGRITY_EVERY
        if due and self._integrity is None:
            check = asyncio.to_thread(self._quick_check)
            self._integrity = asyncio.create_task(check, name="chatgate-db-check")
        if self._integrity is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._integrity), timeout)
        if self._integrity.done():
            task, self._integrity = self._integrity, None
            self._damage = task.result()
            self._integrity_checked = time.monotonic()

    async def close(self) -> None:
        """Stop a page check still running (it reads the whole file) and wait for its thread."""
        task, self._integrity = self._integrity, None
        if task is None:
            return
        conn = self._checking
        if conn is not None:
            conn.interrupt()  # thread-safe: the running PRAGMA stops with "interrupted"
        await asyncio.gather(task, return_exceptions=True)

    async def _probe(self, timeout: float) -> str | None:
        if self._in_flight is None or self._in_flight.done():
            self._in_flight = asyncio.ensure_future(self._write(self._probe_write))
            self._in_flight.add_done_callback(_retrieve)
        try:
            await asyncio.wait_for(asyncio.shield(self._in_flight), timeout)
        except TimeoutError:
            return f"no write committed within {timeout:g}s (the database is locked or very slow)"
        except StoreUnavailable as exc:
            self.saw(exc.__cause__)
            return str(exc)
        spare, free = self._in_flight.result()
        if not spare or free < FREE_FLOOR:
            return (
                f"the disk holding {self._path} is full ({free // 1024} KiB free"
                + ("" if spare else ", no room for its spare file")
                + "): writes get through only while a checkpoint frees room; free space on it"
            )
        return None

    def _probe_write(self, conn: sqlite3.Connection) -> tuple[bool, int]:
        """Commit the probe row (in the writer thread); whether the spare is in place, and the room left."""
        _probe_write(conn)
        spare = self._reserve()
        try:
            stat = os.statvfs(os.path.dirname(os.path.abspath(self._path)))
        except OSError:
            return spare, FREE_FLOOR
        return spare, stat.f_bavail * stat.f_frsize

    def _quick_check(self) -> str | None:
        """SQLite's page-by-page check (without the slower index-content cross-check); None if intact."""
        try:
            conn = self._connect(self._path)
        except sqlite3.Error as exc:
            return f"cannot open it: {exc}"
        self._checking = conn
        try:
            conn.execute("PRAGMA query_only = ON")
            rows = conn.execute("PRAGMA quick_check(3)").fetchall()
        except sqlite3.Error as exc:
            return str(exc) if is_damage(exc) else None  # busy, locked or interrupted: not damage
        finally:
            self._checking = None
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        problems = [str(r[0]) for r in rows if r[0] != "ok"]
        return "; ".join(problems)[:300] if problems else None
