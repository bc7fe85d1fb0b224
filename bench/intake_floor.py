"""bench/intake.py's relay floor: ``floor_relay.py`` run like a gateway, and reply timing for both.

``FloorRun`` has the parts of ``GatewayRun`` the relay flood uses (start, CPU, stop, an
empty scrape and inbox), so the same flood measures chatgate and the bare client alike.
``replies`` reads, from the simulator's record of outbound ops, when each message's
``echo: <text>`` reached the connector (a ``send``, or the ``edit`` that finished a preview).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

from e2e import RUNNING, cpu_seconds, drain, rss_mb, stop_gateway

BENCH = Path(__file__).resolve().parent


class FloorRun:
    def __init__(self, tmp: Path, args: Any, url: str, gateway_id: str, secret_env: str) -> None:
        self.args = args
        self.log_path = tmp / "floor.log"
        self.cmd = [sys.executable, str(BENCH / "floor_relay.py"), "--url", url]
        self.cmd += ["--gateway-id", gateway_id, "--secret-env", secret_env]
        self.proc: asyncio.subprocess.Process | None = None
        self._drainer: asyncio.Task[None] | None = None
        self.rejected = 0
        self.port = 0

    async def start(self, extra_env: dict[str, str]) -> None:
        err = self.log_path.open("wb")
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}, **extra_env}
        self.proc = await asyncio.create_subprocess_exec(
            *self.cmd, stdout=asyncio.subprocess.PIPE, stderr=err, env=env, start_new_session=True
        )
        err.close()
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
        if not RUNNING.search(line.decode(errors="replace")):
            self.proc.kill()
            await self.proc.wait()
            raise RuntimeError(f"the relay floor did not start: {line!r}")
        self._drainer = asyncio.create_task(drain(self.proc.stdout))

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid) if self.proc is not None else 0.0

    def rss(self) -> float | None:
        return rss_mb(self.proc.pid) if self.proc is not None else None

    def scrape(self) -> dict[str, float]:
        return {"commits": 0.0, "writes": 0.0, "commit_seconds": 0.0, "admitted": 0.0}

    async def stop(self) -> dict[str, Any]:
        assert self.proc is not None
        shutdown = await stop_gateway(self.proc, self.args.shutdown_grace)
        if self._drainer is not None:
            await self._drainer
        return shutdown

    def inbox(self, transport: str) -> list[tuple[int, str, str]]:
        return []


def replies(sim: Any, gateway_id: str, expected: dict[str, int]) -> dict[int, float]:
    """buffer id -> ``time.time()`` when the connector first received its final text."""
    found: dict[int, float] = {}
    for op in sim.ops(gateway_id):
        content = op.action.get("content") if op.op in ("send", "edit") else None
        buffer_id = expected.get(content) if isinstance(content, str) else None
        if buffer_id is not None and buffer_id not in found:
            found[buffer_id] = op.received_at
    return found


async def wait_replies(
    sim: Any, gateway_id: str, expected: dict[str, int], timeout: float
) -> dict[int, float]:
    deadline = time.monotonic() + timeout
    while True:
        found = replies(sim, gateway_id, expected)
        if len(found) >= len(expected) or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.05)
