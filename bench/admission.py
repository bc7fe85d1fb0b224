#!/usr/bin/env python
"""Durable admissions per second through the real SqliteStore (synchronous=FULL).

C concurrent admitters (asyncio tasks) each take distinct web-chat DM events from a
shared pool and admit them one at a time, exactly as ``engine/admission.py`` does:
canonicalize the source, derive the session key once, then
``await store.admit(AdmitRequest(inbound=..., session_key=...))``. An admission counts
when ``admit`` returned, i.e. when its transaction was committed with fsync.

Two configurations run in the same process, each on fresh temp files, several times:

- ``group_commit``: the default store (one writer thread commits whatever queued up
  together, up to 512 writes per transaction);
- ``one_commit_per_event``: ``SqliteStore(group_commit=False)``, one transaction and
  one fsync per event (the naive baseline).

Prints one JSON object on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from chatgate.domain.inbound import Inbound
from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.session_key import IsolationPolicy, session_key
from chatgate.domain.source import Source, canonical_source
from chatgate.store.sqlite import SqliteStore


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def make_events(n: int, chats: int, run_tag: str) -> list[Inbound]:
    """Distinct inbound events as the web chat adapter builds them (DMs across ``chats`` chats)."""
    now = time.time()
    events = []
    for i in range(n):
        chat = f"chat-{i % chats:05d}"
        msg_id = f"{run_tag}-m{i}"
        events.append(
            Inbound(
                transport="web",
                delivery_id=f"{chat}/{msg_id}",
                source=Source(
                    platform="web",
                    chat_id=chat,
                    chat_type="dm",
                    user_id=f"user-{i % chats:05d}",
                    user_name=f"User {i % chats}",
                ),
                text=f"hello number {i} from {chat}, a message of realistic length for a chat",
                message_ref=msg_id,
                received_at=now,
            )
        )
    return events


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    idx = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[idx]


async def one_run(
    directory: Path, *, group_commit: bool, events: int, concurrency: int, chats: int, tag: str
) -> dict[str, Any]:
    batches: list[int] = []
    txn_seconds: list[float] = []

    def on_commit(writes: int, seconds: float) -> None:
        batches.append(writes)
        txn_seconds.append(seconds)

    store = SqliteStore(
        directory / f"{tag}.db",
        synchronous="FULL",
        group_commit=group_commit,
        on_commit=on_commit,
    )
    await store.open()
    pending = make_events(events, chats, tag)
    pending.reverse()  # pop() from the end hands them out in order
    policy = IsolationPolicy()
    latencies: list[float] = []
    seqs: list[int] = []
    new_count = 0

    async def admitter() -> None:
        nonlocal new_count
        while pending:
            inbound = pending.pop()
            started = time.perf_counter()
            # What Admission.admit does on the store path (authorization is a dict lookup).
            source = canonical_source(inbound.source)
            key = session_key(source, policy, None)
            result = await store.admit(AdmitRequest(inbound=inbound, session_key=key))
            latencies.append(time.perf_counter() - started)
            seqs.append(result.seq)
            new_count += result.new

    gc.collect()
    batches.clear()  # nothing before the timed part counts
    txn_seconds.clear()
    started = time.perf_counter()
    await asyncio.gather(*(admitter() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    await store.close()

    # Every admission must be durable and distinct: count the rows on disk.
    conn = sqlite3.connect(directory / f"{tag}.db")
    try:
        on_disk = conn.execute("SELECT COUNT(*) FROM inbox WHERE status = 'queued'").fetchone()[0]
        sessions = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    finally:
        conn.close()
    latencies.sort()
    return {
        "admissions_per_s": round(events / elapsed, 1),
        "seconds": round(elapsed, 4),
        "commits": len(batches),
        "mean_batch": round(statistics.fmean(batches), 2) if batches else 0,
        "median_batch": statistics.median(batches) if batches else 0,
        "max_batch": max(batches) if batches else 0,
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
        "writer_busy": round(sum(txn_seconds) / elapsed, 3),
        "correct": new_count == events and len(set(seqs)) == events and on_disk == events,
        "rows_on_disk": on_disk,
        "sessions_on_disk": sessions,
    }


def summarize(runs: list[dict[str, Any]], events: int) -> dict[str, Any]:
    return {
        "events": events,
        "admissions_per_s": statistics.median(r["admissions_per_s"] for r in runs),
        "median_batch": statistics.median(r["median_batch"] for r in runs),
        "mean_batch": statistics.median(r["mean_batch"] for r in runs),
        "p50_ms": statistics.median(r["p50_ms"] for r in runs),
        "p99_ms": statistics.median(r["p99_ms"] for r in runs),
        "writer_busy": statistics.median(r["writer_busy"] for r in runs),
        "correct": all(r["correct"] for r in runs),
        "runs": runs,
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    base = Path(args.dir) if args.dir else None
    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-adm-", dir=base) as tmp:
        directory = Path(tmp)
        results: dict[str, list[dict[str, Any]]] = {"group_commit": [], "one_commit_per_event": []}
        plan = [
            ("group_commit", True, args.events),
            ("one_commit_per_event", False, args.baseline_events),
        ]
        for rep in range(args.reps):
            # Interleave the two configurations so drift on a noisy machine hits both alike.
            for name, grouped, n in plan:
                run = await one_run(
                    directory,
                    group_commit=grouped,
                    events=n,
                    concurrency=args.concurrency,
                    chats=args.chats,
                    tag=f"{name}-{rep}",
                )
                log(
                    f"[admission] {name} rep {rep + 1}/{args.reps}: {run['admissions_per_s']:.0f}/s"
                    f" median batch {run['median_batch']} p99 {run['p99_ms']} ms"
                )
                results[name].append(run)
                os.unlink(directory / f"{name}-{rep}.db")
        group = summarize(results["group_commit"], args.events)
        naive = summarize(results["one_commit_per_event"], args.baseline_events)
        ratio = group["admissions_per_s"] / naive["admissions_per_s"] if naive["admissions_per_s"] else None
        return {
            "benchmark": "admission",
            "group_commit": group,
            "one_commit_per_event": naive,
            "ratio": round(ratio, 2) if ratio is not None else None,
            "synchronous": "FULL",
            "journal_mode": "WAL",
            "events": args.events,
            "baseline_events": args.baseline_events,
            "concurrency": args.concurrency,
            "chats": args.chats,
            "reps": args.reps,
            "goal_admissions_per_s": 20_000,
            "correct": group["correct"] and naive["correct"],
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "cpus": os.cpu_count(),
            "loadavg_before": load_before,
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "dir": str(base or tempfile.gettempdir()),
        }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=30_000, help="events per group-commit run")
    p.add_argument(
        "--baseline-events",
        type=int,
        default=None,
        help="events per one-commit-per-event run (default: --events / 3, it is slow)",
    )
    p.add_argument("--concurrency", type=int, default=256, help="concurrent admitter tasks")
    p.add_argument("--chats", type=int, default=1000, help="distinct DM chats the events spread over")
    p.add_argument("--reps", type=int, default=3, help="repetitions of each configuration")
    p.add_argument("--dir", help="where the temp databases go (default: the system temp dir)")
    p.add_argument("--quick", action="store_true", help="a small smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.events, args.reps, args.concurrency, args.chats = 500, 1, 32, 50
    if args.baseline_events is None:
        args.baseline_events = max(1, args.events // 3)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = asyncio.run(main_async(args))
    print(json.dumps(result))
    return 0 if result["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
