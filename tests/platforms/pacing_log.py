"""Checks over a platform fake's call log: the sliding-window limits and idle gaps (issue 33).

Every check reads arrival times the fake stamped, never a timer around the gateway. The fake
and the gateway share one event loop, so a stall of that loop delays the stamps; callers pass
``slack`` (``stamp_slack``): how far the loop fell behind within any one second.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import Any

from chatgate.engine.ratelimit import platform_window

JITTER = 0.1
"""The least slack: a quiet loop still takes a few turns between a call's departure and its stamp."""


def stamp_slack(gateway: Any, span: float = 1.0) -> float:
    """How much later than its departure the fake may have stamped a call, relative to another
    within ``span``: the most the gateway's loop fell behind in any ``span`` of its run (the sum
    of its loop-lag monitor's consecutive lateness samples), at least ``JITTER``.

    A call is stamped several loop turns after it departs (the client writes, the fake accepts,
    reads and handles it), and under load each turn can be late, so a burst that departed
    together can arrive bunched with the calls of the next second. The worst *single* lateness
    undercounts that: with six test workers on two cores one sample read 0.18 s while a burst's
    stamps lagged the next second's by more than 0.23 s. A quiet run stays at ``JITTER``."""
    lags, spans = list(gateway.lag.samples), list(gateway.lag.spans)  # a span: interval + lag
    worst = total = wall = 0.0
    first = 0
    for last, lag in enumerate(lags):
        total += lag
        wall += spans[last]
        while wall > span and first < last:
            total -= lags[first]
            wall -= spans[first]
            first += 1
        worst = max(worst, total)
    return max(JITTER, worst)


def busiest(times: Sequence[float], width: float) -> int:
    """The most calls in any half-open window ``[t, t + width)`` (a sliding window over ``times``)."""
    ordered = sorted(times)
    return max((bisect.bisect_left(ordered, t + width) - i for i, t in enumerate(ordered)), default=0)


def fullest(times: Sequence[float], width: float, start: float) -> list[float]:
    """The stamps (from ``start``) of the fullest window ``busiest`` counts, for a failure message:
    whether a crowded window is one late-stamped burst or two bursts that departed too close."""
    ordered = sorted(times)
    counts = [bisect.bisect_left(ordered, t + width) - i for i, t in enumerate(ordered)]
    if not counts:
        return []
    i = counts.index(max(counts))
    return [round(t - start, 3) for t in ordered[i : i + counts[i]]]


def idle_gaps(
    times: Sequence[float],
    replies: Mapping[str, Sequence[float]],
    start: float,
    chat_interval: float,
    longest: float,
    rate: int,
) -> list[tuple[float, float]]:
    """Gaps longer than ``longest`` between consecutive calls while some reply was due and the
    platform had room: its chat's previous reply ``chat_interval`` or more before (or, for a
    chat's first, ``start``), it not yet sent, and fewer than ``rate`` calls in the trailing
    window (``ratelimit.platform_window``: a full window is the platform's limit, not idleness).
    Returns (at, length) of each, ``at`` from ``start``, counted from when the window had room."""
    due = [
        (start if i == 0 else sends[i - 1] + chat_interval, at)
        for sends in replies.values()
        for i, at in enumerate(sorted(sends))
    ]
    ordered = sorted(times)
    window = platform_window(float(rate))[1]
    gaps = []
    for k, (a, b) in enumerate(itertools.pairwise(ordered)):
        room = max(a, ordered[k - rate + 1] + window) if k >= rate - 1 else a
        if b - room > longest and any(d <= room and b <= s for d, s in due):
            gaps.append((round(room - start, 3), round(b - room, 3)))
    return gaps


class WriterCommits:
    """Each SQLite commit of the gateways built while the ``writer_commits`` fixture is on: when
    it ended on the loop's clock (``time.monotonic``, as asyncio's) and how long it took. A slow
    commit (an fsync under the suite's disk load) holds up delivery without making the loop
    late, so ``stamp_slack`` cannot allow for it; an idle gap's report shows whether one did."""

    def __init__(self) -> None:
        self.commits: list[tuple[float, float]] = []

    def observe(self, seconds: float) -> None:
        self.commits.append((time.monotonic(), seconds))  # from the writer thread: one append

    def during(self, gaps: Sequence[tuple[float, float]], start: float) -> str:
        lines = []
        for at, length in gaps:
            begin, end = start + at, start + at + length
            overlapping = sorted(
                ((round(done - took - start, 3), round(took, 3)) for done, took in list(self.commits)
                 if done - took < end and done > begin),
                key=lambda c: -c[1],
            )  # fmt: skip
            lines.append(
                f"gap at {at}: {len(overlapping)} writer commits overlapped it; the longest (began, seconds)"
                f" {overlapping[:5]}"
            )
        return "\n".join(lines)


def _wall_minus_loop() -> float:
    """The store stamps rows on the wall clock; the call log is on the loop's clock."""
    return time.time() - asyncio.get_running_loop().time()


def recorded_at(db_path: str) -> list[float]:
    """When each final reply was recorded (``outbox.created_at``), on the loop's clock: a reply
    cannot leave before it exists, and under load the turns of a burst finish over a while."""
    offset = _wall_minus_loop()
    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT created_at FROM outbox WHERE kind = 'final'").fetchall()
    return sorted(float(created) - offset for (created,) in rows)


def stalled_at(db_path: str, gaps: Sequence[tuple[float, float]], start: float) -> str:
    """Where the pipeline stood during each idle gap, from the store's own timestamps: the turns
    still unfinished (admitted, not finished) and the replies recorded but not yet sent. A gap
    with replies ready is the outbox's; one with only turns pending is the scheduler's or the
    disk's. ``start`` is on the loop's clock, the store's times on the wall clock."""
    offset = _wall_minus_loop()
    with sqlite3.connect(db_path) as db:
        turns = db.execute("SELECT session_key, admitted_at, finished_at FROM inbox").fetchall()
        rows = db.execute("SELECT chat_id, created_at, sent_at FROM outbox WHERE kind = 'final'").fetchall()

    def since(wall: float | None) -> float:
        return round(wall - offset - start, 3) if wall is not None else float("inf")

    lines = []
    for at, length in gaps:
        end = at + length
        running = sorted((since(a), since(f)) for _, a, f in turns if since(a) < end and since(f) > at)
        ready = sorted((since(c), since(s)) for _, c, s in rows if since(c) < end and since(s) > at)
        lines.append(
            f"gap at {at} for {length}: {len(running)} turns unfinished (admitted, finished) {running[:6]}; "
            f"{len(ready)} replies recorded, unsent (created, sent) {ready[:6]}"
        )
    return "\n".join(lines)
