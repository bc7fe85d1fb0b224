"""Checks over a platform fake's call log: the sliding-window limits and idle gaps (issue 33).

Every check reads arrival times the fake stamped, never a timer around the gateway. The fake
and the gateway share one event loop, so a stall of that loop delays the stamps; callers pass
``slack``, the worst stall the gateway's loop-lag monitor measured (at least 0.1 s).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence


def busiest(times: Sequence[float], width: float) -> int:
    """The most calls in any half-open window ``[t, t + width)`` (a sliding window over ``times``)."""
    ordered = sorted(times)
    return max((bisect.bisect_left(ordered, t + width) - i for i, t in enumerate(ordered)), default=0)


def idle_gaps(
    times: Sequence[float],
    replies: Mapping[str, Sequence[float]],
    start: float,
    chat_interval: float,
    longest: float,
) -> list[tuple[float, float]]:
    """Gaps longer than ``longest`` between consecutive calls while some reply was due: its chat's
    previous reply ``chat_interval`` or more before (or, for a chat's first, ``start``), and it not
    yet sent. Returns (at, length) of each, ``at`` from ``start``."""
    due = [
        (start if i == 0 else sends[i - 1] + chat_interval, at)
        for sends in replies.values()
        for i, at in enumerate(sorted(sends))
    ]
    return [
        (round(a - start, 3), round(b - a, 3))
        for a, b in itertools.pairwise(sorted(times))
        if b - a > longest and any(d <= a and b <= s for d, s in due)
    ]
