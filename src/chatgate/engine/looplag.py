"""Measures the event loop's own lag: how late a timer fires.

Sampled densely only while the gateway works or the loop runs late: on an idle loop each
sample is a wakeup of its own, and a wakeup costs far more than the sample (0.2 ms of CPU
on a small VM, 4 ms a second at 20 Hz), while an idle loop has no lag to find. The idle
interval is how long a burst can go before its dense sampling starts; a gateway that idles
most of its life (one message a minute) wakes for it once every two seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from chatgate.engine.metrics import GatewayMetrics

INTERVAL = 0.05
"""Seconds between samples while the process is busy or the loop is late."""
IDLE_INTERVAL = 2.0
"""Seconds between samples while the process is idle and the loop on time."""
BUSY_SHARE = 0.2
"""The share of one core the process used since the last sample that counts as busy."""
LATE = 0.005
"""A sample this late (seconds) keeps the sampling dense, whatever the process's own load."""


class LoopLagMonitor:
    def __init__(self, metrics: GatewayMetrics | None, window: int = 2000) -> None:
        self._metrics = metrics
        self.interval = INTERVAL
        self.idle_interval = IDLE_INTERVAL
        self.samples: deque[float] = deque(maxlen=window)
        """How late each sample's timer fired (seconds)."""
        self.spans: deque[float] = deque(maxlen=window)
        """The wall time each sample covered: its interval plus its lag."""
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
        interval = self.interval
        cpu = time.process_time()
        while True:
            expected = time.perf_counter() + interval
            await asyncio.sleep(interval)
            lag = max(0.0, time.perf_counter() - expected)
            used, cpu = time.process_time() - cpu, time.process_time()
            self.samples.append(lag)
            self.spans.append(interval + lag)
            worst = max(worst, lag)
            ticks += 1
            if self._metrics is not None:
                self._metrics.loop_lag.observe(lag)
                if ticks % 100 == 0:
                    self._metrics.loop_lag_max.set(worst)
                    worst = 0.0
            busy = used >= BUSY_SHARE * (interval + lag) or lag >= LATE
            interval = self.interval if busy else self.idle_interval

    def percentile(self, q: float) -> float:
        if not self.samples:
            return 0.0
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
