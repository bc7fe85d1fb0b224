"""What one trip through the SQLite writer thread costs, against the same transaction inline.

Every write of the gateway goes from the event loop to the writer thread and back
(``store/sqlite/writer.py``): a queue put that wakes the writer, a future the writer resolves
through ``call_soon_threadsafe``, which wakes the loop. A Telegram message makes four such
trips (its admission, the lane's sync call, the turn's commit, the ``sent`` settlement), the
durable floor of ``telegram.py`` one. This measures one trip with a transaction that does
almost nothing (one row's counter, ``--writes`` times, one at a time), so what is left is the
hand-off:

- ``through_writer.relaxed``: ``Database.write(fn, redoable=True)``, committed without an fsync;
- ``through_writer.durable``: ``Database.write(fn)``, the writer fsyncs the WAL after it;
- ``inline``: the same ``BEGIN IMMEDIATE``/``UPDATE``/``COMMIT`` on a plain ``sqlite3``
  connection in the calling thread, at ``synchronous=NORMAL`` (the relaxed level) and ``FULL``.

Each thread's CPU (its own CPU clock) is reported per write: ``loop_thread_us`` (the
caller's, the event loop's thread) and ``writer_thread_us`` (the store's writer thread).
``handoff_cpu_us`` is the relaxed trip's CPU in both threads minus the inline ``NORMAL``
transaction's. ``correct``: the counter ended at the number of writes made.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from chatgate.store.sqlite.database import Database
from chatgate.store.sqlite.writer import THREAD_NAME

BUMP = "UPDATE cursors SET updated_at = updated_at + 1 WHERE name = 'bench'"


def _bump(conn: sqlite3.Connection) -> None:
    conn.execute(BUMP)


def _writer_clock() -> int:
    """The CPU clock of the store's writer thread (found by its name)."""
    (writer,) = [t for t in threading.enumerate() if t.name == THREAD_NAME]
    assert writer.ident is not None
    return time.pthread_getcpuclockid(writer.ident)


def _thread_cpu(writer_clock: int) -> tuple[float, float]:
    """CPU seconds of this thread (the event loop's) and of the writer thread, to the
    nanosecond (``psutil``'s per-thread times move in 10-ms clock ticks)."""
    return time.thread_time(), time.clock_gettime(writer_clock)


async def _through_writer(db: Database, writes: int, redoable: bool) -> dict[str, float]:
    clock = _writer_clock()
    main0, others0 = _thread_cpu(clock)
    started = time.perf_counter()
    for _ in range(writes):
        await db.write(_bump, redoable=redoable)
    wall = time.perf_counter() - started
    main1, others1 = _thread_cpu(clock)
    return {
        "loop_thread_us": round((main1 - main0) / writes * 1e6, 1),
        "writer_thread_us": round((others1 - others0) / writes * 1e6, 1),
        "wall_us": round(wall / writes * 1e6, 1),
    }


def _inline(path: Path, writes: int, level: str) -> dict[str, float]:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(f"PRAGMA synchronous = {level}")
        cpu0, started = time.thread_time(), time.perf_counter()
        for _ in range(writes):
            conn.execute("BEGIN IMMEDIATE")
            _bump(conn)
            conn.execute("COMMIT")
        return {
            "cpu_us": round((time.thread_time() - cpu0) / writes * 1e6, 1),
            "wall_us": round((time.perf_counter() - started) / writes * 1e6, 1),
        }
    finally:
        conn.close()


async def measure(writes: int, directory: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        path = Path(tmp) / "handoff.db"
        db = Database(path, synchronous="FULL")
        await db.open()
        try:
            await db.write(
                lambda c: c.execute("INSERT INTO cursors (name, value, updated_at) VALUES ('bench', '', 0)")
            )
            relaxed = await _through_writer(db, writes, redoable=True)
            durable = await _through_writer(db, writes, redoable=False)
        finally:
            await db.close()
        inline = {level.lower(): _inline(path, writes, level) for level in ("NORMAL", "FULL")}
        conn = sqlite3.connect(path)
        try:
            (count,) = conn.execute("SELECT updated_at FROM cursors WHERE name = 'bench'").fetchone()
        finally:
            conn.close()
    return {
        "writes": writes,
        "through_writer": {"relaxed": relaxed, "durable": durable},
        "inline": inline,
        "handoff_cpu_us": round(
            relaxed["loop_thread_us"] + relaxed["writer_thread_us"] - inline["normal"]["cpu_us"], 1
        ),
        "correct": count == 4 * writes,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--writes", type=int, default=3000, help="writes of each kind (default 3000)")
    p.add_argument("--dir", default=None, help="where the database goes (a real disk, not tmpfs)")
    p.add_argument("--quick", action="store_true", help="200 writes of each kind")
    args = p.parse_args()
    if args.quick:
        args.writes = 200
    out = asyncio.run(measure(args.writes, args.dir))
    print(json.dumps(out, indent=2))
    return 0 if out["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
