"""Stopping a real gateway that serves the web chat returns, whatever was just delivered."""

from __future__ import annotations

import asyncio
from pathlib import Path

from msgspec.structs import replace

from chatgate.app.gateway import Gateway
from support.web_harness import STOP_TIMEOUT, web_config


async def test_delivery_worker_stops_when_woken_just_before_stop(tmp_path: Path) -> None:
    """Regression: the worker looped `while True` around wait_for(wake.wait()), and on Python 3.11
    wait_for swallows a cancel that lands just after the event was set, so stop() waited forever."""
    gateway = Gateway(web_config(), tmp_path / "state")
    # No periodic poll: after start the worker sits in its wait until something wakes it.
    gateway.delivery.settings = replace(gateway.delivery.settings, poll_interval=3600.0)
    await gateway.start()
    try:
        # A reply committed (or the worker re-arming itself after a send) in the same loop step as stop.
        gateway.delivery.wake()
        await asyncio.wait_for(gateway.delivery.stop(), 5.0)
    finally:
        await asyncio.wait_for(gateway.stop(), STOP_TIMEOUT)
