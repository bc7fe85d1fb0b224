"""Room to recover from a full disk: a spare file given up to checkpoint the WAL.

In WAL mode every commit appends to ``<db>-wal``; the file shrinks only when a
checkpoint copies its pages into the database and truncates it. On a small disk
the WAL can fill the disk before the automatic checkpoint (1000 pages) is due,
and then the checkpoint itself cannot run, because copying pages may grow the
database file: without help the store stays full for good. So the writer keeps
a spare file beside the database, and on ``SQLITE_FULL`` it checkpoints with
``TRUNCATE``, deleting the spare first if that is what it takes. The spare is
taken again once there is room. Nothing here runs on the event loop: only the
writer thread calls it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time

log = logging.getLogger(__name__)

SPARE_BYTES = 512 * 1024
"""Enough to checkpoint a WAL of several hundred distinct pages into the database file."""
JOURNAL_SIZE_LIMIT = 4 * 1024 * 1024
"""What a checkpointed WAL is cut back to (SQLite would otherwise keep its largest size)."""
DEFAULT_AUTOCHECKPOINT = 1000
MIN_AUTOCHECKPOINT = 32
RESERVE_EVERY = 5.0
"""Seconds between tries to take the spare again while the disk has no room for it."""


def is_disk_full(exc: BaseException) -> bool:
    """``SQLITE_FULL``, or an I/O error whose cause is a full disk (the checkpoint path)."""
    if not isinstance(exc, sqlite3.Error):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF == sqlite3.SQLITE_FULL or "disk is full" in str(exc))


class SpareSpace:
    """The spare file ``<db>.spare`` and the checkpoint that uses it."""

    def __init__(self, db_path: str, size: int = SPARE_BYTES) -> None:
        self.path = f"{db_path}.spare"
        self._size = size
        self._next_try = 0.0
        self._in_place = False
        """Whether the spare was found or made and this process has not given it up since."""

    def reserve(self) -> bool:
        """Take the spare if it is missing and there is room; True when it is in place."""
        if os.path.exists(self.path):
            self._in_place = True
            return True
        now = time.monotonic()
        if now < self._next_try:
            return False
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                _allocate(fd, self._size)
            finally:
                os.close(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            log.debug("no room for the spare file %s yet: %s", self.path, exc)
            self._next_try = now + RESERVE_EVERY
            return False
        self._in_place = True
        return True

    def retake(self) -> None:
        """After a commit: take the spare again if this process gave it up or never got it.

        No system call while it is in place: a ``stat`` after every commit cost the writer
        thread about 20 µs each (three commits a message). ``reserve`` still looks at the disk
        (the health check asks it)."""
        if not self._in_place:
            self.reserve()

    def release(self) -> bool:
        """Give the spare back to the file system; True if there was one."""
        self._in_place = False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return False
        log.warning("the disk is full: gave up the spare file %s to make room", self.path)
        return True

    def relieve(self, conn: sqlite3.Connection) -> bool:
        """Checkpoint and truncate the WAL, using the spare if needed; True if the WAL was emptied."""
        if _checkpoint(conn):
            return True
        if not (self.release() and _checkpoint(conn)):
            return False
        self._next_try = 0.0  # the emptied WAL left room: keep a spare for the next time at once
        self.reserve()
        return True


def autocheckpoint_pages(db_path: str, page_size: int) -> int:
    """WAL pages between automatic checkpoints: SQLite's 1000, fewer on a small disk.

    A WAL may take no more than an eighth of the room the disk had at open, so the
    pages one checkpoint adds to the database fit in the spare file's room.
    """
    try:
        stat = os.statvfs(os.path.dirname(os.path.abspath(db_path)))
    except OSError:
        return DEFAULT_AUTOCHECKPOINT
    room = stat.f_bavail * stat.f_frsize
    return max(MIN_AUTOCHECKPOINT, min(DEFAULT_AUTOCHECKPOINT, room // 8 // max(page_size, 512)))


def _checkpoint(conn: sqlite3.Connection) -> bool:
    try:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.Error as exc:
        log.debug("checkpoint failed: %s", exc)
        return False
    return bool(busy == 0)


def _allocate(fd: int, size: int) -> None:
    """Really take the blocks (a sparse file would give nothing back when deleted)."""
    try:
        os.posix_fallocate(fd, 0, size)
        return
    except OSError as exc:
        if exc.errno not in (95, 22):  # EOPNOTSUPP / EINVAL: the file system cannot preallocate
            raise
    block = b"\0" * 65536
    written = 0
    while written < size:
        written += os.write(fd, block[: size - written])
    os.fsync(fd)
