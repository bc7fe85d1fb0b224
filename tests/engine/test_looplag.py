"""The loop-lag monitor samples densely only while the process works or its loop runs late."""

from __future__ import annotations

import asyncio
import threading

import pytest

from chatgate.engine import looplag
from chatgate.engine.looplag import LoopLagMonitor


def _burn(stop: threading.Event) -> None:
    while not stop.is_set():
        pass


async def test_the_monitor_samples_sparsely_while_idle_and_densely_while_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(looplag, "LATE", 10.0)  # a loaded test machine's lag must not decide it here
    monkeypatch.setattr(looplag, "BUSY_SHARE", 0.05)
    monitor = LoopLagMonitor(None)
    monitor.start()
    try:
        await asyncio.sleep(1.7)
        idle = list(monitor.spans)
        stop = threading.Event()
        burner = threading.Thread(target=_burn, args=(stop,))
        burner.start()
        try:
            await asyncio.sleep(1.0)
        finally:
            stop.set()
            burner.join()
        busy = list(monitor.spans)[len(idle) :]
    finally:
        await monitor.stop()
    # Dense sampling would take ~34 samples in 1.7 s; sparse takes ~4 (another thread of a test
    # worker may make one window look busy on a loaded machine).
    assert 2 <= len(idle) <= 10, f"idle samples: {idle}"
    assert sum(1 for span in idle if span >= looplag.IDLE_INTERVAL) >= 2, f"idle samples: {idle}"
    assert sum(1 for span in busy if span < 0.2) >= 5, f"busy samples: {busy}"
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
