#!/usr/bin/env python
"""Slack Socket Mode ack latency under a burst: a real gateway subprocess against the fake Slack.

The fake Slack (``tests/platforms/slack_fake``, in this process on 127.0.0.1) pushes N
``message`` events over C DM channels as one burst (``--events``, ``--channels``; chat
``i % C`` for event ``i``). The gateway (``<python> -m chatgate.app.cli run``, Socket Mode,
the echo agent) acknowledges each envelope only after its commit. Reported: the ack latency
of every envelope (from the fake's first send to the ack it received) as p50/p99/max, how
many took 3 s or more (Slack's window), redeliveries, and the time until every message was
answered. Prints one JSON object; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "platforms")]

from slack_fake import FakeSlack, message_event  # noqa: E402
from slack_fake.gateway import ENV, echo_of, slack_values  # noqa: E402

from support.procs import GatewayProcess  # noqa: E402


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))]


async def run(events: int, channels: int, workdir: Path) -> dict[str, Any]:
    fake = FakeSlack()
    await fake.start()
    os.environ.update(ENV)
    values = slack_values(fake, workdir, agent={"echo": {"chunk_delay_ms": 0}})
    values["platforms"]["slack"]["allow_users"] = ["U1"]
    values.pop("http")
    gateway = GatewayProcess(workdir, values)
    try:
        await gateway.start()
        await fake.wait_for(fake.socket.connected.is_set, timeout=60, what="the socket")
        print(f"pushing {events} events over {channels} channels", file=sys.stderr)
        bodies = [message_event(f"D{i % channels}", "U1", f"ack bench {i}") for i in range(events)]
        started = time.monotonic()
        envelopes = [await fake.push_event(body) for body in bodies]
        pushed = time.monotonic() - started
        await fake.wait_for(lambda: not fake.socket.unacked(), timeout=120, what="every ack")
        acked = time.monotonic() - started

        def answered() -> bool:
            return sum(len(fake.view(f"D{c}")) for c in range(channels)) >= events

        await fake.wait_for(answered, timeout=300, what="every reply")
        replied = time.monotonic() - started
        await gateway.terminate()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
        await fake.stop()
    latencies = sorted((e.acked_at or 0.0) - e.first_sent for e in envelopes)
    texts = {m.text for c in range(channels) for m in fake.view(f"D{c}")}
    return {
        "events": events,
        "channels": channels,
        "push_seconds": round(pushed, 3),
        "ack_p50_ms": round(percentile(latencies, 0.50) * 1000, 1),
        "ack_p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
        "ack_max_ms": round(latencies[-1] * 1000, 1),
        "acks_at_or_over_3s": sum(1 for v in latencies if v >= 3.0),
        "redeliveries": sum(e.attempts for e in envelopes),
        "all_acked_seconds": round(acked, 3),
        "all_answered_seconds": round(replied, 3),
        "answered_once": all(echo_of(f"ack bench {i}") in texts for i in range(events))
        and len(texts) == events,
        "python": sys.version.split()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--channels", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="100 events over 10 channels")
    parser.add_argument("--dir", type=Path, default=None, help="where the gateway's state goes (a temp dir)")
    args = parser.parse_args()
    events, channels = (100, 10) if args.quick else (args.events, args.channels)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        result = asyncio.run(run(events, channels, Path(tmp)))
    result["loadavg_before"], result["loadavg_after"] = list(load_before), list(os.getloadavg())
    print(json.dumps(result))
    sys.exit(0 if result["answered_once"] else 1)


if __name__ == "__main__":
    main()
