#!/usr/bin/env python
"""The native Discord path on the fake Discord: live reply latency, and catch-up after downtime.

A real ``chatgate run`` subprocess (echo agent, only Discord enabled) against the project's
fake Discord (``tests/platforms/discord_fake/``, in this process on 127.0.0.1; discord.py
unmodified). Phase ``live``: ``--messages`` messages over ``--channels`` free-response
channels at ``--rate`` per second; the latency of each is the fake receiving it to the fake
receiving its reply. Then the gateway is SIGKILLed, ``--down`` messages are posted while it
is down, and it is started again. Phase ``catch_up``: start to IDENTIFY, and IDENTIFY to the
last of those messages answered (they come back only by reading channel history). Every
message is checked to be answered exactly once. Replies in one channel are paced at Discord's
documented limit (one message a second per channel), which bounds both figures from below:
the default load stays under it (0.8 messages a second per channel). Prints one JSON object;
progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "platforms"))  # the fake Discord lives with the tests

from discord_fake.server import FakeDiscord  # noqa: E402
from discord_fake.state import TOKEN, User  # noqa: E402

from e2e import percentile  # noqa: E402  # bench/ is sys.path[0]

TOKEN_ENV = "BENCH_DISCORD_TOKEN"
QUANTILES = (("p50", 0.5), ("p95", 0.95))
GUILD = "1100000000000000001"
USER = User("1200000000000000001", "ann", "Ann")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def config(fake: FakeDiscord, channels: list[str], tmp: Path) -> dict[str, Any]:
    return {
        "locks": {"credential_dir": str(tmp / "locks")},  # its own: runs beside other gateways
        "log_level": "WARNING",
        "http": {"host": "127.0.0.1", "port": 0},
        "agent": {"kind": "echo", "echo": {"chunk_delay_ms": 0}},
        "platforms": {
            "web": {"enabled": False},
            "discord": {
                "enabled": True, "token_env": TOKEN_ENV, "allow_users": [USER.id],
                "api_base": fake.base + "/api/v10", "free_response_channels": channels,
                "command_guilds": [GUILD],
            },
        },
    }  # fmt: skip


async def start(tmp: Path, cfg: Path, n: int) -> asyncio.subprocess.Process:
    out = (tmp / f"gateway-{n}.log").open("wb")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}, TOKEN_ENV: TOKEN}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "chatgate.app.cli", "run", "--config", str(cfg),
        "--state-dir", str(tmp / "state"), stdout=out, stderr=out, env=env,
    )  # fmt: skip
    out.close()
    return proc


async def until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def answered(fake: FakeDiscord, channels: list[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for channel in channels:
        for message in fake.view(channel.id):
            counts[message.content] = counts.get(message.content, 0) + 1
    return counts


async def run(args: argparse.Namespace) -> dict[str, Any]:
    import yaml

    fake = FakeDiscord()
    await fake.start()
    guild = fake.guild(GUILD, "Bench")
    channels = [fake.channel(guild, str(1400000000000000000 + i), name=f"c{i}") for i in range(args.channels)]
    tmp = Path(tempfile.mkdtemp(prefix="chatgate-bench-discord-"))
    cfg = tmp / "chatgate.yaml"
    cfg.write_text(yaml.safe_dump(config(fake, [c.id for c in channels], tmp)))
    proc = await start(tmp, cfg, 1)
    await until(lambda: fake.gateway.current is not None, 120, "the first IDENTIFY")
    sent_at: dict[str, float] = {}
    latencies: list[float] = []
    seen: set[str] = set()

    def collect() -> bool:
        for content in answered(fake, channels):
            if content in sent_at and content not in seen:
                seen.add(content)
                latencies.append(time.monotonic() - sent_at[content])
        return len(seen) == args.messages

    collector = asyncio.create_task(until(collect, 120 + args.messages / args.rate, "the live replies"))
    for i in range(args.messages):
        text = f"live {i}"
        sent_at[f"echo: {text}"] = time.monotonic()
        await fake.post(channels[i % len(channels)], USER, text)
        await asyncio.sleep(1 / args.rate)
    await collector
    log(f"live: {args.messages} answered")
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    for i in range(args.down):
        await fake.post(channels[i % len(channels)], USER, f"down {i}")
    started = time.monotonic()
    proc = await start(tmp, cfg, 2)
    await until(lambda: fake.gateway.identifies == 2, 120, "the second IDENTIFY")
    identified = time.monotonic()
    down = {f"echo: down {i}" for i in range(args.down)}
    await until(lambda: down <= set(answered(fake, channels)), 300, "the caught-up replies")
    done = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    await proc.wait()
    counts = answered(fake, channels)
    await fake.stop()
    latencies.sort()
    return {
        "messages": args.messages, "channels": args.channels, "rate_per_s": args.rate, "down": args.down,
        "live_latency_ms": {q: round(percentile(latencies, p) * 1000, 1) for q, p in QUANTILES},
        "restart_to_identify_s": round(identified - started, 2),
        "catch_up_s": round(done - identified, 2),
        "history_reads": len(fake.of("GET", "/messages?after=")),
        "answered_more_than_once": sorted(c for c, n in counts.items() if n > 1),
        "unanswered": args.messages + args.down - sum(1 for c in counts if c in sent_at or c in down),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--channels", type=int, default=10)
    parser.add_argument("--rate", type=float, default=8.0)
    parser.add_argument("--down", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="a small run for the smoke test")
    args = parser.parse_args()
    if args.quick:
        args.messages, args.channels, args.down, args.rate = 20, 3, 10, 2.4
    load_before = os.getloadavg()
    result = asyncio.run(run(args))
    result["load_avg"] = {
        "before": [round(x, 2) for x in load_before],
        "after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result))
    sys.exit(1 if result["unanswered"] or result["answered_more_than_once"] else 0)


if __name__ == "__main__":
    main()
