"""The lifecycle role over SQLite: open, close and probe the file; take over after a dead predecessor."""

from __future__ import annotations

import sqlite3

from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import writes
from chatgate.store.sqlite.leases import release_dead_owners
from chatgate.store.sqlite.outbox import requeue_mid_send


def recover(conn: sqlite3.Connection, owner: str) -> int:
    """One transaction over two roles' tables: the leases a dead owner held, and its mid-send rows."""
    released = release_dead_owners(conn, owner)
    requeue_mid_send(conn)
    return released


class SqliteLifecycle(SqliteRole):
    """``Lifecycle`` and ``FleetView``. A closed store refuses to open again: create a new one to
    reopen the file."""

    async def open(self) -> None:
        await self._db.open()

    async def close(self) -> None:
        await self._db.close()

    async def ping(self, timeout: float = 1.0) -> None:
        await self._db.ping(timeout)

    async def fleet_members(self) -> None:
        """``FleetView``: one gateway per SQLite file, so no fleet (a closed store still says so
        with ``StoreUnavailable``, like every role method)."""
        await self._db.read(lambda c: None)

    recover = writes(recover)
