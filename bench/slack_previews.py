#!/usr/bin/env python
"""Slack previews under load: does every multi-second reply show a preview before its final?

The fake Slack (``tests/platforms/slack_fake``, in this process on 127.0.0.1) pushes one
message into each of C DM threads at once (``--replies``); a real gateway subprocess
(``<python> -m chatgate.app.cli run``, Socket Mode, the echo agent streaming its answer in
pieces over ``--seconds``) answers each as a native stream. Issue 33, item 3: on main,
37 of 100 three-second replies showed nothing until their final, because a preview was
skipped whenever another call held the next slot of the gateway's 20 calls/s.

From the fake's call log: ``without_preview`` (replies whose first call was not a stream
start, i.e. nothing showed before the final), ``previews_per_reply`` (stream calls before
the seal), ``min_channel_gap_s`` (the shortest time between two message calls to one channel, against
Slack's one a second; arrival times, so a late departure of the first may shorten it),
``busiest_second`` (most budgeted calls within any 1 s, against Slack's 20/s), ``errors_429``
and ``last_seal_s`` (from the push to the last seal). ``--gateway-src`` runs the gateway
from another checkout's ``src/`` (a baseline). Exits 1 unless every reply was sealed with
its exact text, once.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
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
from telegram_double import busiest  # noqa: E402

from support.procs import GatewayProcess  # noqa: E402

THREAD = "1700000000.000900"
STREAM = ("chat.startStream", "chat.appendStream")
MESSAGES = (*STREAM, "chat.stopStream", "chat.postMessage", "chat.update", "chat.delete")


def question(n: int, chars: int) -> str:
    head = f"question {n}: "
    return head + ("a reply that streams for a few seconds " * (chars // 30 + 1))[: chars - len(head)]


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    fake = FakeSlack()
    await fake.start()
    os.environ.update(ENV)
    chunk_ms = 100
    chars = max(20, int(args.seconds * 1000 / chunk_ms) * 3 - len(echo_of("")))
    values = slack_values(fake, workdir, agent={"echo": {"chunk_delay_ms": chunk_ms, "chunk_chars": 3}})
    values["platforms"]["slack"]["allow_users"] = ["U1"]
    values.pop("http")
    gateway = GatewayProcess(workdir, values)
    launcher = None
    if args.gateway_src:
        path = os.pathsep.join(p for p in (args.gateway_src, os.environ.get("PYTHONPATH")) if p)
        launcher = ["env", f"PYTHONPATH={path}", sys.executable, "-m", "chatgate.app.cli"]
    channels = [f"D{1000 + n}" for n in range(args.replies)]
    texts = {c: question(n, chars) for n, c in enumerate(channels)}
    want = {c: [(echo_of(texts[c]), False)] for c in channels}
    try:
        await gateway.start(launcher=launcher)
        await fake.wait_for(fake.socket.connected.is_set, timeout=60, what="the socket")
        print(f"{args.replies} replies of ~{args.seconds:g} s at once", file=sys.stderr)
        started = time.monotonic()
        for n, channel in enumerate(channels):
            if args.rate:
                await asyncio.sleep(max(0.0, started + n / args.rate - time.monotonic()))
            await fake.push_event(message_event(channel, "U1", texts[channel], thread_ts=THREAD))

        def sealed() -> bool:
            return all([(m.text, m.streaming) for m in fake.view(c)] == want[c] for c in channels)

        await fake.wait_for(sealed, timeout=args.timeout, what="every reply sealed")
        last_seal = max(c.at for c in fake.calls if c.method in MESSAGES) - started
        await gateway.terminate()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
        await fake.stop()
    without, previews, gaps = 0, [], []
    for channel in channels:
        calls = [c for c in fake.calls if c.method in MESSAGES and c.params.get("channel") == channel]
        methods = [c.method for c in calls if c.status == 200]
        shown = len([m for m in methods if m in STREAM])
        without += not methods or methods[0] not in STREAM
        previews.append(shown)
        gaps += [b.at - a.at for a, b in itertools.pairwise(calls)]
    budgeted = [c.at for c in fake.calls if c.method in MESSAGES or c.method.startswith("assistant.")]
    return {
        "replies": args.replies,
        "reply_seconds": args.seconds,
        "push_rate": args.rate or "all at once",
        "without_preview": without,
        "previews_per_reply": {"min": min(previews), "mean": round(sum(previews) / len(previews), 2)},
        "min_channel_gap_s": round(min(gaps), 3) if gaps else None,
        "busiest_second": busiest(budgeted, 1.0),
        "errors_429": sum(1 for c in fake.calls if c.status == 429),
        "last_seal_s": round(last_seal, 2),
        "correct": True,
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-slack-previews-", dir=args.dir) as tmp:
        result = await run(args, Path(tmp))
    return {**result, "load_before": load_before, "load_after": [round(x, 2) for x in os.getloadavg()]}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replies", type=int, default=100, help="conversations answered at once")
    p.add_argument("--seconds", type=float, default=3.0, help="how long each reply streams")
    p.add_argument("--rate", type=float, default=0.0, help="messages pushed per second (0: all at once)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the last seal")
    p.add_argument("--gateway-src", default=None, help="run the gateway from this checkout's src/")
    p.add_argument("--dir", default=None, help="where the gateway's state goes (default: system temp)")
    p.add_argument("--quick", action="store_true", help="a small smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.replies, args.seconds = 5, 2.0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        result = asyncio.run(main_async(args))
    except AssertionError as exc:  # a reply never sealed: the fake's story is in the message
        print(json.dumps({"correct": False, "error": str(exc)[:2000]}, indent=2))
        return 1
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
