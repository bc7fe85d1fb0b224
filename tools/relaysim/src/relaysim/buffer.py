"""The durable per-gateway buffer of inbound deliveries (one SQLite file).

An entry is written before it is ever sent and deleted only when the gateway
acknowledges it, so a delivery survives disconnects and simulator restarts until
the gateway says it has it. All SQLite work runs on one thread owned by the
buffer; the event loop keeps an in-memory mirror of the pending entries for
ordering decisions and for the synchronous test API, and updates it only after
a write has committed.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS relay_buffer (
    buffer_id  INTEGER PRIMARY KEY AUTOINCREMENT,
    gateway_id TEXT NOT NULL,
    frame      TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS relay_buffer_gateway ON relay_buffer (gateway_id, buffer_id);
"""


class BufferUnavailable(Exception):
    """The buffer file could not be read or written; nothing was changed."""


class AckOutcome(Enum):
    ACKED = "acked"
    UNKNOWN = "unknown"  # never existed, or already acknowledged
    FOREIGN = "foreign"  # belongs to another gateway; refused


@dataclass(frozen=True)
class Entry:
    """One buffered delivery: the frame to send, without its ``bufferId``."""

    buffer_id: int
    gateway_id: str
    frame: dict[str, Any]
    created_at: float

    def wire(self) -> dict[str, Any]:
        return {**self.frame, "bufferId": str(self.buffer_id)}


class DurableBuffer:
    """Append, acknowledge and list pending entries; AUTOINCREMENT keeps ids monotonic forever."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._pending: dict[int, Entry] = {}
        self._order: dict[str, list[int]] = {}  # per gateway, its pending ids in ascending order
        self._gone: dict[int, asyncio.Event] = {}

    async def open(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="relaysim-buffer")
        rows = await self._run(self._open_sync)
        self._pending = {row[0]: Entry(row[0], row[1], json.loads(row[2]), row[3]) for row in sorted(rows)}
        self._order = {}
        for buffer_id, entry in self._pending.items():  # ascending: appending keeps each list sorted
            self._order.setdefault(entry.gateway_id, []).append(buffer_id)
        if self._pending:
            log.info("relay buffer %s holds %d unacknowledged entries", self.path, len(self._pending))

    async def close(self) -> None:
        if self._executor is None:
            return
        try:
            await self._run(self._close_sync)
        finally:
            self._executor.shutdown(wait=False)
            self._executor = None

    async def append(self, gateway_id: str, frame: dict[str, Any]) -> Entry:
        """Commit the frame; only then does it exist for delivery."""
        text = json.dumps(frame, ensure_ascii=False, separators=(",", ":"))
        created = time.time()
        buffer_id = await self._run(lambda conn: _insert(conn, gateway_id, text, created))
        entry = Entry(buffer_id, gateway_id, json.loads(text), created)
        self._pending[buffer_id] = entry
        bisect.insort(self._order.setdefault(gateway_id, []), buffer_id)  # ids rise: almost always the end
        return entry

    async def ack(self, gateway_id: str, buffer_id: int) -> AckOutcome:
        entry = self._pending.get(buffer_id)
        if entry is None:
            return AckOutcome.UNKNOWN
        if entry.gateway_id != gateway_id:
            return AckOutcome.FOREIGN
        await self._run(lambda conn: _delete(conn, gateway_id, buffer_id))
        if self._pending.pop(buffer_id, None) is not None:  # not already taken by a concurrent ack
            order = self._order[gateway_id]
            del order[bisect.bisect_left(order, buffer_id)]
        event = self._gone.pop(buffer_id, None)
        if event is not None:
            event.set()
        return AckOutcome.ACKED

    def pending(self, gateway_id: str) -> list[Entry]:
        return [self._pending[i] for i in self._order.get(gateway_id, ())]

    def next_after(self, gateway_id: str, after: int) -> Entry | None:
        """The oldest pending entry of the gateway with an id above ``after`` (a bisection, not a scan:
        a flood of thousands of pending entries is sent one ``next_after`` at a time)."""
        order = self._order.get(gateway_id, [])
        index = bisect.bisect_right(order, after)
        return self._pending[order[index]] if index < len(order) else None

    def is_pending(self, buffer_id: int) -> bool:
        return buffer_id in self._pending

    async def wait_gone(self, buffer_id: int, timeout: float) -> bool:
        """Wait until the entry is acknowledged; False on timeout."""
        if buffer_id not in self._pending:
            return True
        event = self._gone.setdefault(buffer_id, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._executor is None:
            raise BufferUnavailable(f"the relay buffer {self.path} is not open")

        def call() -> T:
            try:
                if self._conn is None:
                    self._conn = _connect(self.path)
                return fn(self._conn)
            except (sqlite3.Error, OSError) as exc:
                raise BufferUnavailable(f"relay buffer {self.path}: {exc}") from exc

        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def _open_sync(self, conn: sqlite3.Connection) -> list[tuple[int, str, str, float]]:
        conn.executescript(_SCHEMA)
        rows = conn.execute("SELECT buffer_id, gateway_id, frame, created_at FROM relay_buffer").fetchall()
        return [(int(r[0]), str(r[1]), str(r[2]), float(r[3])) for r in rows]

    def _close_sync(self, conn: sqlite3.Connection) -> None:
        conn.close()
        self._conn = None


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def _insert(conn: sqlite3.Connection, gateway_id: str, frame: str, created: float) -> int:
    cur = conn.execute(
        "INSERT INTO relay_buffer (gateway_id, frame, created_at) VALUES (?, ?, ?)",
        (gateway_id, frame, created),
    )
    assert cur.lastrowid is not None
    return int(cur.lastrowid)


def _delete(conn: sqlite3.Connection, gateway_id: str, buffer_id: int) -> None:
    conn.execute("DELETE FROM relay_buffer WHERE buffer_id = ? AND gateway_id = ?", (buffer_id, gateway_id))
