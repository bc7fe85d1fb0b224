"""Log lines a stranger can cause, within a budget: a few of each kind, then one summary.

A wrong API key, a bad frame, a refused sign-in, a bad webhook signature or a hang-up
each deserve a line, but a stranger who repeats one 2,000 times a minute must not get
2,000 lines (8.5 MiB a minute was measured for wrong keys). Each kind of line gets
``burst`` lines per ``period``; the rest are counted and told in one summary line
(``…and 1,994 more like this (api: invalid_api_key) in the last 60 s``) when the period
ends, so the operator still sees how much happened.

A generic logging rule, not an engine stage: the HTTP server, the engine's webhooks and
the platforms all log what strangers send, so it lives where every layer may import it.
The kinds are the callers' own names (codes, route names from the config), never text a
client chose, so what this holds is bounded by the code.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import msgspec

PERIOD = 60.0
BURST = 5
OTHER = "other lines"
SUMMARY_FIELD = "left_out"
"""The field a summary line carries (its count): a filter that budgets lines lets these pass."""


class _Kind(msgspec.Struct):
    start: float
    logged: int = 0
    left_out: int = 0
    level: int = logging.DEBUG
    timer: asyncio.TimerHandle | None = None


class LogBudget:
    """``burst`` lines per kind per ``period`` on ``logger``; the rest summarised at the period's end."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        period: float = PERIOD,
        burst: int = BURST,
        clock: Callable[[], float] = time.monotonic,
        max_kinds: int = 256,
    ) -> None:
        self.logger = logger
        self.period = period
        self.burst = burst
        self.max_kinds = max_kinds
        self._clock = clock
        self._kinds: dict[str, _Kind] = {}

    def log(self, level: int, kind: str, msg: str, *args: Any, **kwargs: Any) -> bool:
        """Log ``msg`` if ``kind`` has budget left (True), else count it for the summary (False)."""
        if not self.logger.isEnabledFor(level) or not self.admit(level, kind):
            return False
        self.logger.log(level, msg, *args, **kwargs)
        return True

    def admit(self, level: int, kind: str) -> bool:
        """Whether a line of ``kind`` may be logged now; if not, it is counted for the summary.

        At most ``max_kinds`` kinds are kept apart; beyond them (a caller whose kinds are not
        a fixed set, such as a library's preformatted messages) lines share one kind."""
        now = self._clock()
        if kind not in self._kinds and len(self._kinds) >= self.max_kinds:
            kind = OTHER
        state = self._kinds.get(kind)
        if state is None:
            state = self._kinds[kind] = _Kind(now)
        elif now - state.start >= self.period:
            state = self._summarise(kind, state, now)
        if state.logged < self.burst:
            state.logged += 1
            return True
        state.left_out += 1
        state.level = max(state.level, level)
        if state.timer is None:
            state.timer = _call_later(state.start + self.period - now, self._on_timer, kind)
        return False

    def warning(self, kind: str, msg: str, *args: Any, **kwargs: Any) -> bool:
        return self.log(logging.WARNING, kind, msg, *args, **kwargs)

    def info(self, kind: str, msg: str, *args: Any, **kwargs: Any) -> bool:
        return self.log(logging.INFO, kind, msg, *args, **kwargs)

    def left_out(self, kind: str) -> int:
        """Lines of ``kind`` counted and not logged yet (the next summary's number)."""
        state = self._kinds.get(kind)
        return state.left_out if state is not None else 0

    def flush(self) -> None:
        """Log every pending summary now (at shutdown, or in a test)."""
        now = self._clock()
        for kind, state in list(self._kinds.items()):
            self._summarise(kind, state, now)

    def _on_timer(self, kind: str) -> None:
        state = self._kinds.get(kind)
        if state is not None:
            state.timer = None
            self._summarise(kind, state, self._clock())

    def _summarise(self, kind: str, state: _Kind, now: float) -> _Kind:
        """End ``kind``'s period: say how many lines were left out, and start a new one."""
        if state.timer is not None:
            state.timer.cancel()
            state.timer = None
        if state.left_out:
            self.logger.log(
                state.level,
                "…and %s more like this (%s) in the last %.0f s",
                f"{state.left_out:,}",
                kind,
                now - state.start,
                extra={SUMMARY_FIELD: state.left_out},
            )
        fresh = self._kinds[kind] = _Kind(now)
        return fresh


def _call_later(delay: float, callback: Callable[[str], None], kind: str) -> asyncio.TimerHandle | None:
    """A timer on the running loop (a summary even if the flood stops); none outside a loop."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop.call_later(max(0.0, delay), callback, kind)
