"""The loop-lag monitor samples densely only while the process works or its loop runs late."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from chatgate.engine import looplag
from chatgate.engine.looplag import LoopLagMonitor


class CpuClock:
    """The process's CPU time as the monitor reads it: still while idle, a full core while busy
    (so a loaded test machine's scheduling cannot decide what the test asserts)."""

    def __init__(self) -> None:
        self.busy_since: float | None = None

    def __call__(self) -> float:
        since = self.busy_since
        return time.perf_counter() - since if since is not None else 0.0


def intervals(monitor: LoopLagMonitor) -> list[float]:
    return [round(span - lag, 6) for span, lag in zip(monitor.spans, monitor.samples, strict=True)]


async def test_the_monitor_samples_sparsely_while_idle_and_densely_while_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cpu = CpuClock()
    monkeypatch.setattr(looplag.time, "process_time", cpu)
    monkeypatch.setattr(looplag, "LATE", 10.0)  # a loaded test machine's lag must not decide it here
    monitor = LoopLagMonitor(None)
    monitor.idle_interval = 0.5  # the gateway's is longer (IDLE_INTERVAL); the switch is the same
    monitor.start()
    try:
        await asyncio.sleep(1.7)
        idle = intervals(monitor)
        cpu.busy_since = time.perf_counter()
        await asyncio.sleep(1.5)
        busy = intervals(monitor)[len(idle) :]
    finally:
        await monitor.stop()
    # The interval each sample slept (its span less its lag): after the first, idle ones are sparse.
    assert len(idle) >= 2 and set(idle[1:]) == {monitor.idle_interval}, f"idle intervals: {idle}"
    assert busy.count(looplag.INTERVAL) >= 3, f"busy intervals: {busy}"
    assert len(monitor.samples) == len(monitor.spans)


async def test_a_late_loop_keeps_the_sampling_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(looplag, "BUSY_SHARE", 10.0)  # only lateness can make it dense here
    monitor = LoopLagMonitor(None)
    monitor.start()
    try:
        for _ in range(20):  # block the loop itself: almost every timer fires late
            await asyncio.sleep(0.005)
            threading.Event().wait(0.06)
    finally:
        await monitor.stop()
    assert sum(1 for span in monitor.spans if span < 0.2) >= 3, list(monitor.spans)
