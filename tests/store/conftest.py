"""Fixtures for the SQLite store tests: value builders, a store factory on a real file in
tmp_path, a fault-injecting connection factory (the store's ``connect`` seam) and a real
cross-process lock that blocks WAL readers."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from chatgate.domain.inbound import Inbound
from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.source import Source
from chatgate.domain.turns import Claim, TurnOutcome
from chatgate.store.sqlite import SqliteStore
from support.store_values import outcome, src


class Make:
    """Small builders for the values that cross the Store protocol."""

    def source(self, chat_id: str = "c1", **fields: Any) -> Source:
        return src(chat_id, **fields)

    def inbound(
        self, delivery_id: str, text: str = "hello", *, transport: str = "webchat", **source: Any
    ) -> Inbound:
        return Inbound(
            transport=transport,
            delivery_id=delivery_id,
            source=self.source(**source),
            text=text,
            message_ref=delivery_id,
            received_at=1700000000.0,
        )

    def request(
        self, delivery_id: str, key: str = "k1", text: str = "hello", *, transport: str = "webchat", **kw: Any
    ) -> AdmitRequest:
        extra = {
            name: kw.pop(name) for name in ("queued", "reply", "cancel_queued", "reset_session") if name in kw
        }
        return AdmitRequest(
            inbound=self.inbound(delivery_id, text, transport=transport, **kw), session_key=key, **extra
        )

    def draft(
        self,
        idem_key: str,
        chat_id: str = "c1",
        *,
        key: str = "k1",
        platform: str = "webchat",
        text: str = "reply",
        kind: str = "final",
    ) -> OutboxDraft:
        return OutboxDraft(
            idem_key=idem_key,
            platform=platform,
            chat_id=chat_id,
            session_key=key,
            kind=kind,  # type: ignore[arg-type]
            text=text,
            in_reply_to="m1",
            target={"chat_id": chat_id},
        )

    def outcome(self, claim: Claim, *outbox: OutboxDraft, reply: str = "ok") -> TurnOutcome:
        return outcome(claim, *outbox, reply=reply)


@pytest.fixture
def make() -> Make:
    return Make()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "chatgate.db"


OpenStore = Callable[..., Awaitable[SqliteStore]]


@pytest.fixture
async def open_store(db_path: Path) -> AsyncIterator[OpenStore]:
    """``await open_store(path=None, **SqliteStore kwargs)``: an opened store, closed at teardown."""
    stores: list[SqliteStore] = []

    async def factory(path: Path | None = None, **kwargs: Any) -> SqliteStore:
        store = SqliteStore(path or db_path, **kwargs)
        await store.open()
        stores.append(store)
        return store

    yield factory
    for store in reversed(stores):
        await store.close()


@pytest.fixture
def query(db_path: Path) -> Callable[..., list[tuple[Any, ...]]]:
    """Run one statement on a fresh, independent connection to the database file."""

    def run(sql: str, *args: Any, path: Path | None = None) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(path or db_path, timeout=30.0)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()

    return run


class ConnectSeam:
    """A real sqlite3 connection factory for ``SqliteStore(connect=...)``.

    The first connection it makes is the writer's (the store opens its writer in
    ``open()``; readers connect lazily later). On that connection an authorizer:

    - denies INSERT into every table named in ``deny_insert``, and UPDATE of every table
      named in ``deny_update`` (SQLite then fails the statement with "not authorized",
      exactly like any other sqlite3 error);
    - can pause the writer thread at the BEGIN of its next transaction, so that
      writes issued meanwhile queue up behind it deterministically.

    Statement caching is off so that every statement is authorized when it runs.
    Use one seam per store.
    """

    def __init__(self) -> None:
        self.connections: list[sqlite3.Connection] = []
        self.deny_insert: set[str] = set()
        self.deny_update: set[str] = set()
        self._pause_armed = threading.Event()
        self._paused = threading.Event()
        self._resume = threading.Event()

    def __call__(self, path: str) -> sqlite3.Connection:
        conn = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=30.0, cached_statements=0
        )
        if not self.connections:
            conn.set_authorizer(self._authorize)
        self.connections.append(conn)
        return conn

    @property
    def writer(self) -> sqlite3.Connection:
        return self.connections[0]

    def _authorize(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, trig: str | None
    ) -> int:
        if action == sqlite3.SQLITE_TRANSACTION and arg1 == "BEGIN" and self._pause_armed.is_set():
            self._pause_armed.clear()
            self._paused.set()
            self._resume.wait(30)
        if action == sqlite3.SQLITE_INSERT and arg1 in self.deny_insert:
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_UPDATE and arg1 in self.deny_update:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    @contextlib.asynccontextmanager
    async def writer_paused(self, store: SqliteStore) -> AsyncIterator[None]:
        """Hold the writer inside a transaction of its own; writes issued in the block
        queue up and are taken together by the writer's next batch."""
        self._resume.clear()
        self._paused.clear()
        self._pause_armed.set()
        plug = asyncio.ensure_future(store.renew_lease("plug", "plug", 1.0))
        assert await asyncio.to_thread(self._paused.wait, 30), "writer never reached BEGIN"
        try:
            yield
            for _ in range(3):  # let tasks created in the block enqueue their writes
                await asyncio.sleep(0)
        finally:
            self._resume.set()
            assert await plug is False


@pytest.fixture
def connect_seam() -> ConnectSeam:
    return ConnectSeam()


# A child process that takes exclusive POSIX locks on the five WAL read-mark slots of the
# database's -shm file (bytes 123..127: WALINDEX_LOCK_OFFSET 120 + WAL_READ_LOCK(0..4)),
# which is what a checkpointer or a writer restarting the WAL does for a moment. While it
# holds them no connection can start a read transaction: SQLite retries (for up to ~10 s)
# and then proceeds. POSIX locks are per process, hence the child.
_SHM_LOCKER = r"""
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX, 5, 123, os.SEEK_SET)
print("locked", flush=True)
hold = float(sys.stdin.readline())
time.sleep(hold)
"""


class ReadBlocker:
    def __init__(self, db: Path) -> None:
        self.shm = Path(f"{db}-shm")
        self._proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> ReadBlocker:
        assert self.shm.exists(), "open the store (WAL mode) before blocking its readers"
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _SHM_LOCKER,
            str(self.shm),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self._proc.stdout is not None
        line = await asyncio.wait_for(self._proc.stdout.readline(), 30)
        assert line == b"locked\n"
        return self

    def release_after(self, seconds: float) -> None:
        """The child releases the lock on its own clock, whatever the event loop does."""
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(f"{seconds}\n".encode())

    async def __aexit__(self, *exc: object) -> None:
        assert self._proc is not None
        if (
            self._proc.returncode is None
            and self._proc.stdin is not None
            and not self._proc.stdin.is_closing()
        ):
            with contextlib.suppress(Exception):
                self._proc.stdin.write(b"0\n")
        try:
            await asyncio.wait_for(self._proc.wait(), 30)
        finally:
            if self._proc.returncode is None:
                self._proc.kill()
                await self._proc.wait()


@pytest.fixture
def read_blocker(db_path: Path) -> Callable[[], ReadBlocker]:
    return lambda: ReadBlocker(db_path)


@pytest.fixture
def shm_locker_script() -> str:
    """Source of the child that blocks WAL readers: argv[1] = the -shm path; prints "locked",
    then reads a number of seconds from stdin, holds the lock that long and exits."""
    return _SHM_LOCKER
