"""``PostgresStore``: every role over one PostgreSQL schema, shared by a fleet of gateways.

Each role's SQL lives in its own module, as in the SQLite backend; this class only
composes them over one ``PgDatabase`` (the pool, the migrations, the liveness lock).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from chatgate.store.postgres.accounts import PgAccounts
from chatgate.store.postgres.api import PgApiKeys
from chatgate.store.postgres.approvals import PgApprovals
from chatgate.store.postgres.cursors import PgCursors
from chatgate.store.postgres.database import PgDatabase
from chatgate.store.postgres.fleet import members
from chatgate.store.postgres.inbox import PgInbox
from chatgate.store.postgres.labels import PgLabels
from chatgate.store.postgres.leases import PgLeases
from chatgate.store.postgres.lifecycle import PgLifecycle
from chatgate.store.postgres.media import PgMedia
from chatgate.store.postgres.outbox import PgOutbox
from chatgate.store.postgres.pairing import PgPairing
from chatgate.store.postgres.profiles import PgSessionProfiles
from chatgate.store.postgres.schedules import PgSchedules
from chatgate.store.postgres.tasks import PgTasks
from chatgate.store.postgres.transcript import PgTranscript
from chatgate.store.postgres.web_chats import PgWebChats


class PostgresStore(
    PgLifecycle,
    PgInbox,
    PgLeases,
    PgTranscript,
    PgOutbox,
    PgApprovals,
    PgCursors,
    PgLabels,
    PgSessionProfiles,
    PgPairing,
    PgApiKeys,
    PgSchedules,
    PgTasks,
    PgAccounts,
    PgWebChats,
    PgMedia,
):
    """The ``Store`` protocol over one PostgreSQL schema (``asyncpg``, pooled)."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "public",
        password: str | None = None,
        pool_size: int = 10,
        outbox_lease_seconds: float = 300.0,
        connect_timeout: float = 5.0,
        reap_grace: float = 5.0,
    ) -> None:
        db = PgDatabase(
            dsn,
            schema=schema,
            password=password,
            max_size=pool_size,
            connect_timeout=connect_timeout,
            reap_grace=reap_grace,
        )
        super().__init__(db)
        self.outbox_lease_seconds = outbox_lease_seconds
        self.schema = schema
        self.dsn = dsn
        self.password = password

    async def close(self) -> None:
        await self._admissions.aclose()  # what waits to be admitted commits first
        await super().close()

    def add_listener(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(notice)`` for the fleet's notices: ``inbox`` (a message was queued),
        ``outbox`` (a reply was recorded), ``stop:<session key>`` (its running turn was
        cancelled), ``approval:<prompt id>`` (it was answered), from every process."""
        self._db.add_listener(fn)

    async def hold_credential(self, key: str) -> bool:
        """The fleet-wide lock of one platform credential (a bot token's digest): exactly one
        process holds it, and the server drops it when that process dies."""
        return await self._db.hold_credential(key)

    async def credential_held(self, key: str) -> bool:
        """Whether this process still holds ``key``'s lock: a round trip on the connection that
        holds it (False when it fails or is slow: a poller asks this before every poll)."""
        return await self._db.credential_held(key)

    def add_credential_listener(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(key)`` as soon as this process loses the lock of credential ``key`` (its
        connection to the server was cut): whatever the lock guards must stop at once."""
        self._db.add_credential_listener(fn)

    async def announce_adapters(self, adapters: dict[str, str]) -> None:
        """What this process serves (platform -> state), for the fleet listing of ``chatgate status``."""
        holder, text = self._db.holder, json.dumps(adapters, sort_keys=True)
        await self._db.write(
            lambda c: c.execute("UPDATE processes SET adapters = $1 WHERE holder = $2", text, holder)
        )

    async def fleet_members(self) -> list[dict[str, object]]:
        """``FleetView``: the other processes on this schema (``fleet.members``)."""
        holder = self._db.holder
        return await self._db.write(lambda c: members(c, holder))

    @property
    def holder(self) -> str:
        """This instance's id in the fleet (its leases and mid-send rows carry it)."""
        return self._db.holder
