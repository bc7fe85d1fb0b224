"""Where the SQLite writer thread's CPU goes, statement by statement (issue 33).

The workload of ``commits.py`` (the real engine over a real ``SqliteStore`` file at
``synchronous=FULL``, the echo agent, one message at a time over ``--chats`` chats), with
every connection made by a ``sqlite3.Connection`` subclass that times each ``execute`` and
``executemany`` on the writer thread in that thread's CPU time (``time.thread_time``: an
``fdatasync`` inside ``COMMIT`` counts for the CPU the kernel spends on it, not for the wait).

Prints one JSON object: ``writer_cpu_us_per_message`` (the writer thread's whole CPU over the
run, statements and Python), ``statements_cpu_us_per_message`` (their sum), and
``statements``: per distinct statement (whitespace folded, first 100 characters), calls and
CPU per message, largest first. Exits 1 unless every message got exactly one reply.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import re
import sqlite3
import sys
import threading
import time
from typing import Any

import commits
from chatgate.store.sqlite.writer import THREAD_NAME as WRITER_THREAD

_spent: collections.defaultdict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])


def _count(sql: str, started: float) -> None:
    if threading.current_thread().name.startswith(WRITER_THREAD):
        entry = _spent[re.sub(r"\s+", " ", sql).strip()[:100]]
        entry[0] += 1
        entry[1] += time.thread_time() - started


class TimedConnection(sqlite3.Connection):
    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        return _timed(super().execute, sql, args)

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
        return _timed(super().executemany, sql, args)


def _timed(run: Any, sql: str, args: tuple[Any, ...]) -> sqlite3.Cursor:
    started = time.thread_time()
    try:
        return run(sql, *args)  # type: ignore[no-any-return]
    finally:
        _count(sql, started)


def measure(messages: int, chats: int) -> dict[str, object]:
    from chatgate.store.sqlite import writer

    connect = sqlite3.connect
    sqlite3.connect = lambda *a, **k: connect(*a, **{**k, "factory": TimedConnection})  # type: ignore[assignment]
    run = writer.GroupCommitWriter._run
    writer_cpu: list[float] = []

    def timed_run(self: Any) -> None:  # the thread's whole life: its connect and its loop
        started = time.thread_time()
        try:
            run(self)
        finally:
            writer_cpu.append(time.thread_time() - started)

    writer.GroupCommitWriter._run = timed_run  # type: ignore[method-assign]
    try:
        result = asyncio.run(commits.measure(messages, chats))
    finally:
        sqlite3.connect = connect
        writer.GroupCommitWriter._run = run  # type: ignore[method-assign]
    # The start's statements (the schema) and the stop's are in both totals; over a few
    # hundred messages they are a few microseconds a message.
    statements = sorted(_spent.items(), key=lambda kv: -kv[1][1])
    return {
        "messages": messages,
        "chats": chats,
        "writer_cpu_us_per_message": round(sum(writer_cpu) / messages * 1e6, 1),
        "statements_cpu_us_per_message": round(sum(v[1] for _, v in statements) / messages * 1e6, 1),
        "statements": [
            {
                "sql": sql,
                "per_message": round(calls / messages, 2),
                "cpu_us_per_message": round(cpu / messages * 1e6, 1),
            }
            for sql, (calls, cpu) in statements
            if cpu / messages * 1e6 >= 0.5
        ],
        "writes_per_message": result["writes_per_message"],
        "commits_per_message": result["commits_per_message"],
        "correct": result["correct"],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=300)
    p.add_argument("--chats", type=int, default=10)
    p.add_argument("--quick", action="store_true", help="20 messages")
    args = p.parse_args()
    if args.quick:
        args.messages = 20
    out = measure(args.messages, args.chats)
    print(json.dumps(out, indent=2))
    return 0 if out["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
