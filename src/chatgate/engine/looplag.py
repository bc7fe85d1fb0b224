"""Measures the event loop's own lag: how late a timer fires."""

from __future__ import annotations

import asyncio
import time
from collections import deque

from chatgate.engine.metrics import GatewayMetrics


class LoopLagMonitor:
    def __init__(self, metrics: GatewayMetrics | None, interval: float = 0.05, window: int = 2000) -> None:
        self._metrics = metrics
        self.interval = interval
        """How often a sample is taken: each covers ``interval`` plus its own lag of wall time."""
        self.samples: deque[float] = deque(maxlen=window)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="chatgate-looplag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        worst = 0.0
        ticks = 0
        while True:
            expected = time.perf_counter() + self.interval
            await asyncio.sleep(self.interval)
            lag = max(0.0, time.perf_counter() - expected)
            self.samples.append(lag)
            worst = max(worst, lag)
            ticks += 1
            if self._metrics is not None:
                self._metrics.loop_lag.observe(lag)
                if ticks % 100 == 0:
                    self._metrics.loop_lag_max.set(worst)
                    worst = 0.0

    def percentile(self, q: float) -> float:
        if not self.samples:
            return 0.0
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
