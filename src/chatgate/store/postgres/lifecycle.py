"""The lifecycle role over PostgreSQL: open, close and probe the pool; take over after the dead."""

from __future__ import annotations

import asyncpg

from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.fleet import reap_dead
from chatgate.store.postgres.leases import release_dead_owners
from chatgate.store.postgres.outbox import requeue_mid_send


async def recover(conn: asyncpg.Connection, owner: str, holder: str, grace: float) -> int:
    """One transaction over two roles' tables: dead owners' leases, and dead claimers' mid-send rows.

    A fleet shares the database, so only what the dead left is taken: see
    ``release_dead_owners`` and ``requeue_mid_send`` for how a peer is known dead."""
    reaped = await reap_dead(conn, holder, grace)
    await conn.execute("UPDATE processes SET owner = $1 WHERE holder = $2", owner, holder)
    released = await release_dead_owners(conn, owner, holder)
    await requeue_mid_send(conn, holder)
    return reaped + released


class PgLifecycle(PgRole):
    """``Lifecycle``. A closed store refuses to open again: create a new one to reconnect."""

    async def open(self) -> None:
        await self._db.open()

    async def close(self) -> None:
        await self._db.close()

    async def ping(self, timeout: float = 1.0) -> None:
        await self._db.ping(timeout)

    async def recover(self, owner: str) -> int:
        holder, grace = self._db.holder, self._db.reap_grace
        return await self._db.write(lambda c: recover(c, owner, holder, grace))
