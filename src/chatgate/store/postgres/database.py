"""The connection pool to one PostgreSQL schema, its lifetime, and the liveness lock.

Every role module reads and writes through a ``PgDatabase``: ``read`` runs a coroutine
on a pooled connection, ``write`` runs it in one transaction (retried on a deadlock or
a serialization failure, which PostgreSQL rolled back whole). A lost connection, a
refused one or a dead server is ``StoreUnavailable``, never an asyncpg error.

The liveness lock is how one process tells a dead peer from a live one without a
clock: each store holds a session-level advisory lock on its own instance id on a
connection of its own. The server drops the lock when that connection dies (the
process was killed, its host is gone), so ``pg_try_advisory_xact_lock`` on a peer's id
succeeds exactly when the peer is dead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar, cast

import asyncpg

from chatgate.domain.errors import StoreError, StoreUnavailable
from chatgate.store.postgres.fleet import release_holders
from chatgate.store.postgres.local_sends import LocalSends
from chatgate.store.postgres.schema import migrate
from chatgate.store.postgres.sql import HOLDER_KEY, NOW

log = logging.getLogger(__name__)
T = TypeVar("T")
Fn = Callable[[asyncpg.Connection], Awaitable[T]]

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_RETRIES = 3
UNREACHABLE: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    OSError,
    TimeoutError,
)
"""What asyncpg and the socket raise when the server cannot serve us; becomes ``StoreUnavailable``."""
CHECK_SECONDS = 2.0
"""How long a held credential lock's check may take before it counts as lost."""


def unavailable(exc: BaseException, what: str) -> StoreUnavailable:
    wrapped = StoreUnavailable(f"postgresql {what} failed: {type(exc).__name__}: {exc}")
    wrapped.__cause__ = exc
    return wrapped


class PgDatabase:
    """A pool of connections to one schema, and the liveness connection of this instance."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "public",
        password: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 5.0,
        command_timeout: float = 30.0,
        reap_grace: float = 5.0,
    ) -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ValueError(f"schema {schema!r}: use lower-case letters, digits and _ (at most 63)")
        self.dsn = dsn
        self.schema = schema
        self.holder = uuid.uuid4().hex
        """This store instance's id: its leases and mid-send rows carry it."""
        self.sends = LocalSends()
        """The rows this instance is sending now (what its claims handed out and is not settled)."""
        self.reap_grace = reap_grace
        """How long a peer with a free liveness lock must also have been silent to be reaped."""
        self._password = password
        self._min_size, self._max_size = min_size, max_size
        self._connect_timeout, self._command_timeout = connect_timeout, command_timeout
        self._pool: asyncpg.Pool | None = None
        self._liveness: asyncpg.Connection | None = None
        self._liveness_lock = asyncio.Lock()
        self._listeners: list[Callable[[str], None]] = []
        self._credentials: set[str] = set()
        self._credential_listeners: list[Callable[[str], None]] = []
        self._inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._opened = False
        self._closed = False

    # ------------------------------------------------------------ lifetime

    def _settings(self) -> dict[str, str]:
        """Every connection's session settings: its schema, and a name saying whose it is."""
        return {"search_path": self.schema, "application_name": f"chatgate {self.holder}"}

    async def _connect(self) -> asyncpg.Connection:
        conn: asyncpg.Connection = await asyncpg.connect(
            self.dsn,
            password=self._password,
            timeout=self._connect_timeout,
            command_timeout=self._command_timeout,
            server_settings=self._settings(),
        )
        return conn

    async def open(self) -> None:
        if self._opened:
            return
        if self._closed:
            raise StoreUnavailable("this store was closed; create a new PostgresStore to reopen it")
        try:
            first = await self._connect()
            try:
                await migrate(first, self.schema)
            finally:
                await first.close()
            self._pool = await asyncpg.create_pool(
                self.dsn,
                password=self._password,
                min_size=self._min_size,
                max_size=self._max_size,
                timeout=self._connect_timeout,
                command_timeout=self._command_timeout,
                server_settings=self._settings(),
            )
            await self._hold_liveness()
        except StoreError:
            await self._teardown()
            raise
        except UNREACHABLE as exc:
            await self._teardown()
            raise unavailable(exc, f"open of {self._where()}") from exc
        self._opened = True

    def _where(self) -> str:
        host = self.dsn.split("@")[-1].split("?")[0]
        return f"{host} (schema {self.schema})"

    async def close(self) -> None:
        if not self._opened:
            return
        self._opened = False
        self._closed = True
        await self._idle.wait()  # the calls in flight finish; new ones are refused
        await self._leave_fleet()
        await self._teardown()

    async def _leave_fleet(self) -> None:
        """A clean stop hands what this instance still holds to its peers now, not at their next poll."""
        if self._pool is None:
            return
        try:
            async with self._pool.acquire(timeout=self._connect_timeout) as conn, conn.transaction():
                await release_holders(cast(asyncpg.Connection, conn), [self.holder])
                await conn.execute("DELETE FROM processes WHERE holder = $1", self.holder)
        except UNREACHABLE as exc:  # they are reaped when the liveness lock goes, at the latest
            log.info("could not hand this process's leases over at close: %s", exc)

    async def _teardown(self) -> None:
        if self._liveness is not None:
            with contextlib.suppress(*UNREACHABLE):
                await self._liveness.close(timeout=self._connect_timeout)
            self._liveness = None
        if self._pool is not None:
            try:
                await asyncio.wait_for(self._pool.close(), self._command_timeout)
            except Exception:  # whatever the close met, nothing of the pool may outlive it
                self._pool.terminate()
            self._pool = None

    async def _hold_liveness(self) -> None:
        """(Re)take this instance's liveness lock on its own connection, if it was lost."""
        async with self._liveness_lock:
            if self._liveness is not None and not self._liveness.is_closed():
                return
            if self._liveness is not None:
                self._liveness_ended(self._liveness)  # its locks went with it, listener or not
            conn = await self._connect()
            try:
                await conn.execute(f"SELECT pg_advisory_lock({HOLDER_KEY.format('$1::text')})", self.holder)
                await conn.execute(
                    "INSERT INTO processes (holder, host, pid, started_at, seen_at)"
                    f" VALUES ($1, $2, $3, {NOW}, {NOW}) ON CONFLICT (holder) DO UPDATE SET seen_at = {NOW}",
                    self.holder,
                    socket.gethostname(),
                    os.getpid(),
                )
                await conn.add_listener(self.channel, self._notified)
            except BaseException:
                await conn.close()
                raise
            if self._liveness is not None:
                log.warning("the postgresql liveness connection was lost and is held again")
            conn.add_termination_listener(self._liveness_ended)
            self._liveness = conn

    def _liveness_ended(self, conn: object) -> None:
        """The liveness connection closed: the server dropped every credential lock on it.

        Said at once, not at the next reconnect: a poller must stop before its next call, as
        another process may hold the lock a moment from now. The locks are taken again only
        through ``hold_credential``, by whoever wins them."""
        if conn is not self._liveness or not self._credentials:
            return
        lost, self._credentials = self._credentials, set()
        if not self._closed:
            log.error("the postgresql connection holding %d credential lock(s) was lost", len(lost))
        for key in lost:
            for fn in list(self._credential_listeners):
                try:
                    fn(key)
                except Exception:  # one listener's bug must not keep the others polling
                    log.exception("a credential-loss listener failed")

    def add_credential_listener(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(key)`` on the event loop when the lock of credential ``key`` is lost."""
        self._credential_listeners.append(fn)

    @staticmethod
    async def _try_credential(conn: asyncpg.Connection, key: str) -> bool:
        taken = await conn.fetchval(
            "SELECT pg_try_advisory_lock(hashtextextended('chatgate-credential/' || $1, 0))", key
        )
        return bool(taken)

    async def hold_credential(self, key: str) -> bool:
        """Take the fleet-wide lock of a credential (``key``: a digest of it, never the secret) for
        as long as this instance lives; False while another live process holds it.

        For a lock this instance holds, it is a check: a round trip on the connection that
        holds it (the lock lives as long as that session). A check that fails or does not
        answer within ``CHECK_SECONDS`` ends the connection and says False (fail closed)."""
        if key in self._credentials:
            return await self._confirm_credential(key)
        await self.hold_liveness()
        async with self._liveness_lock:
            assert self._liveness is not None
            try:
                taken = await self._try_credential(self._liveness, key)
            except UNREACHABLE as exc:
                raise unavailable(exc, "credential lock") from exc
            if taken:
                self._credentials.add(key)
        return taken

    async def credential_held(self, key: str) -> bool:
        """Whether this instance still holds credential ``key``'s lock; never takes it."""
        return key in self._credentials and await self._confirm_credential(key)

    async def _confirm_credential(self, key: str) -> bool:
        async with self._liveness_lock:
            conn = self._liveness
            if conn is None:
                return False
            if not conn.is_closed():
                try:
                    await conn.fetchval("SELECT 1", timeout=CHECK_SECONDS)
                    return key in self._credentials
                except UNREACHABLE as exc:
                    log.error("the postgresql connection holding credential locks failed a check: %s", exc)
                    conn.terminate()  # the server frees its locks when it notices
            self._liveness_ended(conn)  # now, whenever asyncpg calls the termination listener
            return False

    @property
    def channel(self) -> str:
        """The fleet's ``LISTEN``/``NOTIFY`` channel (the one ``NOTIFY`` names)."""
        return f"chatgate_{self.schema}"[:63]

    def add_listener(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(payload)`` on the event loop for every notice of the fleet (own ones too)."""
        self._listeners.append(fn)

    def _notified(self, conn: object, pid: int, channel: str, payload: object) -> None:
        for fn in list(self._listeners):
            try:
                fn(str(payload))
            except Exception:  # a listener's bug must not stop the others
                log.exception("a fleet notice listener failed on %r", payload)

    # ------------------------------------------------------------ access

    @contextlib.asynccontextmanager
    async def _call(self, what: str) -> AsyncIterator[asyncpg.Connection]:
        if not self._opened or self._pool is None:
            raise StoreUnavailable("store is not open")
        self._inflight += 1
        self._idle.clear()
        try:
            async with self._pool.acquire(timeout=self._command_timeout) as proxy:
                yield cast(asyncpg.Connection, proxy)
        except StoreError:
            raise
        except UNREACHABLE as exc:
            raise unavailable(exc, what) from exc
        finally:
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.set()

    async def read(self, fn: Fn[T]) -> T:
        """Run ``fn`` on a pooled connection (each statement sees what was committed before it)."""
        async with self._call("read") as conn:
            return await fn(conn)

    async def write(self, fn: Fn[T]) -> T:
        """Run ``fn`` in one transaction; returns once it committed. ``fn`` may run more than once.

        A failure after the commit (asyncpg resets the connection as the pool takes it back) is
        the connection's, not the write's: the pool drops that connection and the result stands.
        A commit whose answer was lost is ``StoreUnavailable``: the caller resolves that doubt."""
        for attempt in range(_RETRIES):
            committed: list[T] = []
            try:
                async with self._call("write") as conn:
                    async with conn.transaction():
                        result = await fn(conn)
                    committed.append(result)
                return result
            except StoreUnavailable as exc:
                if committed:  # the connection failed on release, after the commit: the write stands
                    log.warning(
                        "a postgresql write committed, then its connection failed (%s); it is discarded", exc
                    )
                    return committed[0]
                retry = isinstance(exc.__cause__, asyncpg.exceptions.TransactionRollbackError)
                if not retry or attempt == _RETRIES - 1:
                    raise
                log.debug("postgresql rolled a write back (%s); running it again", exc.__cause__)
        raise AssertionError("unreachable")  # pragma: no cover

    async def hold_liveness(self) -> None:
        """Before a claim: make sure peers still see this instance alive."""
        try:
            await self._hold_liveness()
        except UNREACHABLE as exc:
            raise unavailable(exc, "liveness lock") from exc

    def require_open(self) -> None:
        """Fail as any call on a closed store does (for a call that needs no connection)."""
        if not self._opened:
            raise StoreUnavailable("store is not open")

    async def ping(self, timeout: float = 1.0) -> None:
        """Prove a write commits now (a read-only standby or a full disk fails it)."""
        self.require_open()

        async def probe(conn: asyncpg.Connection) -> None:
            await conn.execute(
                f"INSERT INTO store_health (id, checked_at) VALUES (1, {NOW})"
                " ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at"
            )

        try:
            await asyncio.wait_for(self.write(probe), timeout)
            await asyncio.wait_for(self.hold_liveness(), timeout)
        except TimeoutError as exc:
            raise StoreUnavailable(f"postgresql did not commit a write within {timeout:g} s") from exc


class PgRole:
    """Base of the role classes: each reads and writes through the store's one ``PgDatabase``."""

    def __init__(self, db: PgDatabase) -> None:
        self._db = db
