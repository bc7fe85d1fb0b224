"""The writer's own descriptor of the database's ``-wal`` file, to fsync it after a durable batch.

SQLite decides at each commit whether to fsync the WAL from the connection's ``synchronous``
level, and changing that level between transactions cost the writer thread 50-120 µs of CPU
a switch (measured there; a standalone loop switches in 5-17 µs), as much as the fsync a
relaxed commit saves. So in WAL mode the writer connection stays
at ``NORMAL`` (SQLite never fsyncs the WAL at a commit, and keeps the file consistent across a
power cut) and the writer fsyncs the WAL itself, through this descriptor, after every batch
that must be durable. ``fdatasync`` of a file covers every write to it that came before, so one
call makes that batch and every relaxed commit before it as durable as ``FULL`` would have.

SQLite takes its WAL locks on the ``-shm`` file, never on ``-wal``, so closing this descriptor
cannot release a lock of SQLite's (POSIX drops a process's locks on a file when any of its
descriptors of that file is closed).
"""

from __future__ import annotations

import os
import sqlite3

_datasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


class WalFile:
    def __init__(self, path: str) -> None:
        self.path = f"{path}-wal"
        self._fd: int | None = None

    @classmethod
    def of(cls, conn: sqlite3.Connection) -> WalFile:
        """The WAL of ``conn``'s main database (its file name as SQLite resolved it)."""
        rows = conn.execute("PRAGMA database_list").fetchall()
        return cls(next(str(file) for _, name, file in rows if name == "main"))

    def sync(self) -> None:
        """Make every write to the WAL so far durable; raises ``OSError`` if the disk refuses.

        Called after a commit that wrote frames, so a missing file is an error too (a path that
        is not SQLite's would otherwise turn durability off unseen)."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        _datasync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
