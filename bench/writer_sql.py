"""Where the SQLite writer thread's CPU goes, statement by statement (issue 33).

The workload of ``commits.py`` (the real engine over a real ``SqliteStore`` file at
``synchronous=FULL``, the echo agent, one message at a time over ``--chats`` chats), with
every connection made by a ``sqlite3.Connection`` subclass that times each ``execute`` and
``executemany`` on the writer thread in that thread's CPU time (``time.thread_time``). The
writer commits at ``NORMAL`` and fsyncs the WAL itself after a durable commit, so the
``fdatasync`` is in the writer's CPU but in no statement's.

Prints one JSON object:

- ``writer_cpu_us_per_message``: the writer thread's whole CPU over the run, its start
  (``writer_start_cpu_ms``: the connect and the schema) and the rest
  (``writer_serving_cpu_us_per_message``);
- ``writer_serving_cpu_us_per_message_untimed``: the rest again, in a run just before with no
  statement timed. The timing's own Python (a subclass call, two clock reads and the
  bookkeeping a statement, ~26 statements a message) runs on the writer thread too: this is
  the figure to compare with the gateway's writer;
- ``statements_cpu_us_per_message`` (their sum) and ``statements``: per distinct statement
  (whitespace folded, first 100 characters), calls and CPU per message, largest first.

Exits 1 unless every message got exactly one reply.

``--replay`` also runs every statement the writer ran, with its parameters and in its order,
again on a new file from this one thread, back to back (each statement's CPU on this thread's
clock, ``--replays`` times, the median kept): the same SQLite work with warm caches and no
other thread. ``replayed_us_per_message`` against ``statements_cpu_us_per_message`` splits
the writer's statement time into SQLite's own work and what running among the gateway's
threads adds (cold caches, wake-ups, the GIL); each statement gets ``replayed_us_per_message``.

``writer_switches_per_message``: the writer thread's context switches (``/proc``): a voluntary
one is a wait, for its queue, an ``fdatasync``, or the GIL when the loop holds it; those
between ``BEGIN`` and ``COMMIT`` are waits for the GIL inside the statements (each releases it).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import re
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import msgspec

import commits
from chatgate.store.sqlite.writer import THREAD_NAME as WRITER_THREAD

_spent: collections.defaultdict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
_ran: list[tuple[str, str, Any]] | None = None
"""With ``--replay``: each statement the writer ran, as (method, sql, parameters)."""


def _key(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip()[:100]


def _count(sql: str, started: float) -> None:
    spent = time.thread_time() - started  # before the bookkeeping below, which is not the statement's
    if threading.current_thread().name.startswith(WRITER_THREAD):
        entry = _spent[_key(sql)]
        entry[0] += 1
        entry[1] += spent


class TimedConnection(sqlite3.Connection):
    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        _record("execute", sql, args)
        return _timed(super().execute, sql, args)

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if _ran is not None and args:
            args = (list(args[0]), *args[1:])  # an iterator is consumed once: keep its rows
        _record("executemany", sql, args)
        return _timed(super().executemany, sql, args)


def _record(method: str, sql: str, args: tuple[Any, ...]) -> None:
    if _ran is not None and threading.current_thread().name.startswith(WRITER_THREAD):
        _ran.append((method, sql, args[0] if args else ()))


def replay(ran: list[tuple[str, str, Any]], path: str) -> tuple[float, dict[str, float]]:
    """Run ``ran`` again on a new file ``path``, back to back: (CPU seconds in all, by statement)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")  # the writer's level; it fsyncs the WAL itself
    by_statement: collections.Counter[str] = collections.Counter()
    total = 0.0
    try:
        for method, sql, params in ran:
            started = time.thread_time()
            cursor = getattr(conn, method)(sql, params)
            if method == "execute":
                cursor.fetchall()  # the writer fetches what it selects
            spent = time.thread_time() - started
            by_statement[_key(sql)] += spent
            total += spent
    finally:
        conn.close()
    return total, dict(by_statement)


def _timed(run: Any, sql: str, args: tuple[Any, ...]) -> sqlite3.Cursor:
    started = time.thread_time()
    try:
        return run(sql, *args)  # type: ignore[no-any-return]
    finally:
        _count(sql, started)


def _switches() -> tuple[int, int]:
    """This thread's (voluntary, involuntary) context switches so far; (-1, -1) without /proc."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/status", encoding="ascii") as f:
            fields = dict(line.split(":", 1) for line in f if "ctxt_switches" in line)
        return int(fields["voluntary_ctxt_switches"]), int(fields["nonvoluntary_ctxt_switches"])
    except (OSError, KeyError, ValueError):
        return -1, -1


class WriterClock(msgspec.Struct):
    """The writer thread's CPU over its life, at the start of its loop, and its context switches."""

    whole: float = 0.0
    start: float = 0.0
    switches: tuple[int, int] = (-1, -1)


@contextlib.contextmanager
def watching_writer() -> Iterator[WriterClock]:
    """Time the writer threads started meanwhile: the whole thread, and its start (the connect and
    the schema, before its loop), on the thread's own CPU clock."""
    from chatgate.store.sqlite import writer

    clock = WriterClock()
    run, loop_forever = writer.GroupCommitWriter._run, writer.GroupCommitWriter._loop_forever

    def timed_run(self: Any) -> None:
        waits = _switches()
        try:
            run(self)
        finally:
            clock.whole += time.thread_time()  # a new thread's clock starts at zero
            ended = _switches()
            if waits[0] >= 0:
                clock.switches = (ended[0] - waits[0], ended[1] - waits[1])

    def serving(self: Any, conn: sqlite3.Connection) -> None:
        clock.start += time.thread_time()
        loop_forever(self, conn)

    writer.GroupCommitWriter._run = timed_run  # type: ignore[method-assign]
    writer.GroupCommitWriter._loop_forever = serving  # type: ignore[method-assign]
    try:
        yield clock
    finally:
        writer.GroupCommitWriter._run = run  # type: ignore[method-assign]
        writer.GroupCommitWriter._loop_forever = loop_forever  # type: ignore[method-assign]


def measure(messages: int, chats: int, replays: int = 0) -> dict[str, object]:
    from chatgate.store.sqlite import writer

    # First a run with no statement timed: the timing's own Python (a subclass call, two clock
    # reads and the bookkeeping a statement, ~26 statements a message) lands on the writer too.
    with watching_writer() as untimed:
        asyncio.run(commits.measure(messages, chats))
    global _ran
    _ran = [] if replays else None

    connect = sqlite3.connect
    sqlite3.connect = lambda *a, **k: connect(*a, **{**k, "factory": TimedConnection})  # type: ignore[assignment]
    transaction = writer._transaction
    in_transactions = [0]

    def counted_transaction(conn: sqlite3.Connection, fns: list[Any]) -> list[Any]:
        waits = _switches()[0]
        try:
            return transaction(conn, fns)
        finally:
            in_transactions[0] += _switches()[0] - waits

    writer._transaction = counted_transaction
    try:
        with watching_writer() as clock:
            result = asyncio.run(commits.measure(messages, chats))
    finally:
        sqlite3.connect = connect
        writer._transaction = transaction
    # The start's statements (the schema) and the stop's are in both totals; over a few
    # hundred messages they are a few microseconds a message.
    statements = sorted(_spent.items(), key=lambda kv: -kv[1][1])
    replayed = _replayed(_ran or [], replays)
    return {
        "messages": messages,
        "chats": chats,
        "writer_cpu_us_per_message": round(clock.whole / messages * 1e6, 1),
        "writer_start_cpu_ms": round(clock.start * 1e3, 1),
        "writer_serving_cpu_us_per_message": round((clock.whole - clock.start) / messages * 1e6, 1),
        "writer_serving_cpu_us_per_message_untimed": round(
            (untimed.whole - untimed.start) / messages * 1e6, 1
        ),
        "statements_cpu_us_per_message": round(sum(v[1] for _, v in statements) / messages * 1e6, 1),
        "statements": [
            {
                "sql": sql,
                "per_message": round(calls / messages, 2),
                "cpu_us_per_message": round(cpu / messages * 1e6, 1),
                **(
                    {"replayed_us_per_message": round(replayed[1].get(sql, 0.0) / messages * 1e6, 1)}
                    if replayed
                    else {}
                ),
            }
            for sql, (calls, cpu) in statements
            if cpu / messages * 1e6 >= 0.5
        ],
        **({"replayed_us_per_message": round(replayed[0] / messages * 1e6, 1)} if replayed else {}),
        "writer_switches_per_message": {
            "voluntary": round(clock.switches[0] / messages, 2),
            "involuntary": round(clock.switches[1] / messages, 2),
            "voluntary_between_begin_and_commit": round(in_transactions[0] / messages, 2),
        }
        if clock.switches[0] >= 0
        else None,
        "writes_per_message": result["writes_per_message"],
        "commits_per_message": result["commits_per_message"],
        "correct": result["correct"],
    }


def _replayed(ran: list[tuple[str, str, Any]], replays: int) -> tuple[float, dict[str, float]] | None:
    """The median of ``replays`` replays of ``ran`` (by their total), each on a new file."""
    if not ran or not replays:
        return None
    results = []
    for _ in range(replays):
        with tempfile.TemporaryDirectory() as tmp:
            results.append(replay(ran, os.path.join(tmp, "replay.db")))
    results.sort(key=lambda r: r[0])
    return results[len(results) // 2]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=300)
    p.add_argument("--chats", type=int, default=10)
    p.add_argument("--quick", action="store_true", help="20 messages")
    p.add_argument("--replay", action="store_true", help="also replay the statements back to back")
    p.add_argument("--replays", type=int, default=5, help="replays with --replay (the median is kept)")
    args = p.parse_args()
    if args.quick:
        args.messages = 20
    out = measure(args.messages, args.chats, args.replays if args.replay else 0)
    print(json.dumps(out, indent=2))
    return 0 if out["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
