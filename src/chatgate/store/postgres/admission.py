"""Group commit for PostgreSQL admissions: what queues up while one commits goes in the next.

An admission alone is a transaction of its own, started at once. While it commits, the
admissions that arrive wait; the next transaction takes all of them (up to
``MAX_BATCH``), in one round of statements and one commit (one WAL flush instead of one
each), and answers each with its own result. Under load that is most of the cost of an
admission; with no load nothing waits, so nothing is added.

Order and idempotency are the single admission's: a batch admits in arrival order within
each session (the session row is locked before each event's insert, so its ``seq`` follows
commit order), and two deliveries of one event in one batch are one admission and a
duplicate. Across sessions a batch goes in session-key order, so two processes' batches
lock session rows in one order and cannot deadlock each other. A batch that fails before
its commit is rolled back whole and its admissions are run again one by one: each caller
gets its own answer (a ``ScopeConflict`` for one event does not refuse its neighbours). A
batch whose connection is lost at the commit is in doubt: it may have committed, so running
it again would answer "duplicate" for events this very batch admitted. Each caller gets the
``StoreUnavailable`` a lone admission would (nothing acknowledged; the platform's
redelivery finds out which it was).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable

import asyncpg

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.inbox import AdmitRequest, AdmitResult
from chatgate.store.postgres.database import PgDatabase
from chatgate.store.postgres.sql import NOTIFY

log = logging.getLogger(__name__)
MAX_BATCH = 64
"""Admissions per transaction at most (a bound on the transaction's length and locks)."""

AdmitFn = Callable[[asyncpg.Connection, AdmitRequest, float, str, set[str] | None], Awaitable[AdmitResult]]
Waiting = tuple[AdmitRequest, float, "asyncio.Future[AdmitResult]"]


def unreachable(exc: BaseException) -> bool:
    """A failure of the server or the connection, not of one statement: the next admission
    would meet it too."""
    if not isinstance(exc, StoreUnavailable):
        return False
    cause = exc.__cause__
    return cause is None or not isinstance(cause, asyncpg.PostgresError) or isinstance(cause, _SERVER_GONE)


def lost_connection(exc: BaseException) -> bool:
    """The connection failed, so no answer came: a commit it carried may or may not have run.
    (An error the server sent is an answer: the transaction was rolled back.)"""
    if not isinstance(exc, StoreUnavailable):
        return False
    cause = exc.__cause__
    return not isinstance(cause, asyncpg.PostgresError) or isinstance(cause, asyncpg.PostgresConnectionError)


_SERVER_GONE = (
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.ConnectionFailureError,
    asyncpg.exceptions.TooManyConnectionsError,
)


class AdmissionQueue:
    """One committer per store instance; owns the task that commits what waits."""

    def __init__(self, db: PgDatabase, admit: AdmitFn, max_batch: int = MAX_BATCH) -> None:
        self._db = db
        self._admit = admit
        self._max = max_batch
        self._waiting: list[Waiting] = []
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.batches = 0
        """Transactions of more than one admission so far (a figure for tests and benches)."""

    async def admit(self, request: AdmitRequest) -> AdmitResult:
        if self._closed:
            raise StoreUnavailable("store is closing")
        future: asyncio.Future[AdmitResult] = asyncio.get_running_loop().create_future()
        self._waiting.append((request, time.time(), future))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._commit_waiting(), name="chatgate-admit")
        return await future

    async def _commit_waiting(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting[: self._max], self._waiting[self._max :]
            batch = [w for w in batch if not w[2].cancelled()]  # its caller gave up: it was never acked
            if len(batch) == 1:
                await self._one(batch[0])
                continue
            committing: list[bool] = []
            try:
                results = await self._db.write(
                    functools.partial(self._batch, batch=batch, committing=committing)
                )
            except Exception as exc:
                if committing and lost_connection(exc):  # in doubt: answered as a lone admission is
                    log.info(
                        "a batch of %d admissions lost its connection at the commit: %s", len(batch), exc
                    )
                    for _, _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                # one event's fault must not refuse the others: each alone
                log.info("a batch of %d admissions failed (%s); admitting them one by one", len(batch), exc)
                await self._each(batch)
                continue
            self.batches += 1
            for (_, _, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)

    async def _batch(
        self, conn: asyncpg.Connection, *, batch: list[Waiting], committing: list[bool]
    ) -> list[AdmitResult]:
        """``committing`` is marked once every statement ran: a failure after that is the commit's."""
        committing.clear()  # a write run again (a rolled-back transaction) starts over
        holder = self._db.holder
        notices: set[str] = set()
        order = sorted(range(len(batch)), key=lambda i: batch[i][0].session_key)  # stable: FIFO per session
        results: dict[int, AdmitResult] = {}
        for i in order:
            request, now, _ = batch[i]
            results[i] = await self._admit(conn, request, now, holder, notices)
        for notice in sorted(notices):  # delivered at commit, once per payload anyway
            await conn.execute(NOTIFY, notice)
        committing.append(True)
        return [results[i] for i in range(len(batch))]

    async def _each(self, batch: list[Waiting]) -> None:
        """Each admission in a transaction of its own; once the server proves unreachable, the
        rest get that same answer at once instead of waiting for it one by one."""
        for i, waiting in enumerate(batch):
            failure = await self._one(waiting)
            if failure is not None and unreachable(failure):
                for _, _, future in batch[i + 1 :]:
                    if not future.done():
                        future.set_exception(failure)
                return

    async def _one(self, waiting: Waiting) -> Exception | None:
        request, now, future = waiting
        holder = self._db.holder
        try:
            result = await self._db.write(lambda c: self._admit(c, request, now, holder, None))
        except Exception as exc:  # the caller's to handle, as an unbatched admission's would be
            if not future.done():
                future.set_exception(exc)
            return exc
        if not future.done():
            future.set_result(result)
        return None

    async def aclose(self) -> None:
        """Refuse new admissions; let what waits commit (each write is bounded by its timeouts)."""
        self._closed = True
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
