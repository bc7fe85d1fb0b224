#!/usr/bin/env python
"""First replies to many new conversations at once on Slack and Discord, and saturation.

Issue 33's goals for the two platforms, against the project's fakes of their APIs (the
unmodified ``slack_sdk``/``slack_bolt`` and ``discord.py`` talk to them; both fakes stamp
each call with ``time.monotonic()`` when its handler runs):

- ``first_contact``: ``--conversations`` new channels write one message each at once; the
  time from each push to its reply's arrival (p50, p95), for a real in-process gateway (echo
  agent, SQLite) and for a bare bot on the same library (a Bolt ``AsyncApp`` in Socket Mode
  that ``say``s the echo; a ``discord.Client`` whose ``on_message`` sends it), each against a
  fresh fake. Discord's fake enforces its documented 5 messages per 5 s per channel.
- On Slack the gateway's own budget (20 posts a second, its guess at Slack's unpublished
  workspace limit) binds a burst of 50, where the bare app sends all at once; so it also runs
  with the budget set to ``--conversations`` a second (``gateway_budget_lifted``), which
  leaves the pipeline's own cost.
- ``saturation``: the gateway's rate set to ``--rate`` calls a second, ``--channels``
  channels writing twice at once; replies a second from the first reply to the last, and that
  over the rate (``budget_share``), and the most calls in any 1-s window at the fake
  (``busiest_second``). The fake stamps a call when this process's loop reads it: a stall of
  that loop stamps calls that arrived apart at once, so a crowded window on a busy machine may
  be the stamps' doing. ``stamp_lag_max_ms`` is this loop's worst lateness over the run (a
  5-ms timer), and ``busiest_second_beyond_stamp_lag`` the most calls in any window of one
  second less that lateness, the reading a stall cannot make up (as the in-process pacing
  tests read the gateway's own loop lag).

Prints one JSON object; progress goes to stderr. Exits 1 unless every message was answered
exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# bench/discord.py would shadow the discord.py library: bench/ goes last on the path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT / "tests" / "platforms"))  # the fakes live with the tests
sys.path.append(str(ROOT / "bench"))  # last: the bare Discord bot, after the discord.py library

from discord_fake.harness import ANN, GUILD_ID, World, build_world, discord_config  # noqa: E402
from discord_fake.server import FakeDiscord  # noqa: E402
from discord_fake.state import TOKEN as DISCORD_TOKEN  # noqa: E402
from discord_fake.state import TOKEN_ENV as DISCORD_TOKEN_ENV  # noqa: E402
from pacing_log import busiest  # noqa: E402
from slack_fake import FakeSlack, message_event  # noqa: E402
from slack_fake.gateway import ENV as SLACK_ENV  # noqa: E402
from slack_fake.gateway import slack_config  # noqa: E402
from slack_fake.payloads import APP_TOKEN, BOT_TOKEN  # noqa: E402

from chatgate.engine.looplag import LoopLagMonitor  # noqa: E402

Stop = Callable[[], Awaitable[None]]
INSTANT_ECHO = {"kind": "echo", "echo": {"chunk_delay_ms": 0}}
"""The gateway's agent answers at once, as the bare bots do (the tests' echo sleeps per chunk)."""


def _figures(pushed: dict[str, float], replies: dict[str, float]) -> dict[str, Any]:
    latencies = sorted((replies[c] - pushed[c]) * 1000 for c in pushed if c in replies)
    return {
        "answered": len(latencies),
        "p50_ms": round(statistics.median(latencies), 1),
        "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 1),
    }


# ---------------------------------------------------------------- Slack


async def _slack_gateway(fake: FakeSlack, tmp: Path, rate: float | None) -> Stop:
    from chatgate.app.gateway import Gateway

    overrides: dict[str, Any] = {"delivery": {"rate_limits": {"slack": {"per_second": rate}}}} if rate else {}
    gateway: Any = Gateway(slack_config(fake, tmp, agent=INSTANT_ECHO, **overrides), tmp / "state")
    await gateway.start()
    return gateway.stop  # type: ignore[no-any-return]


async def _slack_bare(fake: FakeSlack, tmp: Path, rate: float | None) -> Stop:
    from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
    from slack_bolt.async_app import AsyncApp
    from slack_sdk.web.async_client import AsyncWebClient

    app = AsyncApp(client=AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_base))

    @app.event("message")
    async def echo(event: dict[str, Any], say: Any) -> None:
        await say(f"echo: {event['text']}")

    handler = AsyncSocketModeHandler(app, APP_TOKEN, web_client=AsyncWebClient(base_url=fake.api_base))
    await handler.connect_async()
    return handler.close_async  # type: ignore[no-any-return]


async def slack_run(subject: str, channels: int, rounds: int, rate: float | None) -> dict[str, Any]:
    fake = FakeSlack()
    await fake.start()
    ids = [f"D{500 + n}" for n in range(channels)]
    start = _slack_gateway if subject == "gateway" else _slack_bare
    with tempfile.TemporaryDirectory(prefix="chatgate-contact-") as tmp:
        stop = await start(fake, Path(tmp), rate)
        lag = stamp_lag()
        try:
            await fake.socket.connected.wait()
            await asyncio.sleep(0.5)  # settled: both are connected and idle
            pushed: dict[str, float] = {}
            for round_ in range(rounds):
                for channel in ids:
                    await fake.push_event(message_event(channel, "U1", f"r{round_} {channel}"))
                    pushed.setdefault(channel, time.monotonic())

            def posts() -> list[Any]:
                return [c for c in fake.calls if c.method == "chat.postMessage" and c.status == 200]

            await fake.wait_for(lambda: len(posts()) >= channels * rounds, timeout=120, what="every reply")
            await asyncio.sleep(0.3)
        finally:
            await lag.stop()
            await stop()
            await fake.stop()
    sent = posts()
    first: dict[str, float] = {}
    for call in sent:
        first.setdefault(str(call.params.get("channel")), call.at)
    calls = [c.at for c in fake.calls if c.method.startswith(("chat.", "assistant."))]
    return {**_figures(pushed, first), **_saturation(sorted(c.at for c in sent), calls, rate, lag)}


# ---------------------------------------------------------------- Discord


async def _discord_gateway(
    fake: FakeDiscord, world: World, tmp: Path, channels: list[str], rate: float | None
) -> Stop:
    from chatgate.app.config import GatewayConfig
    from chatgate.app.gateway import Gateway
    from chatgate.platforms.kit.conform import conform

    extra: dict[str, Any] = {"delivery": {"rate_limits": {"discord": {"per_second": rate}}}} if rate else {}
    config = discord_config(
        fake, world, tmp, discord={"free_response_channels": channels}, agent=INSTANT_ECHO, **extra
    )
    gateway = Gateway(conform(GatewayConfig, config), tmp / "state")
    await gateway.start()
    return gateway.stop


async def _discord_bare(
    fake: FakeDiscord, world: World, tmp: Path, channels: list[str], rate: float | None
) -> Stop:
    from discord_echo_bot import start_echo_client  # bench/ is on the path last (above)

    client, task = await start_echo_client(fake.base + "/api/v10", DISCORD_TOKEN)

    async def stop() -> None:
        await client.close()
        await asyncio.gather(task, return_exceptions=True)

    return stop


async def discord_run(subject: str, channels: int, rounds: int, rate: float | None) -> dict[str, Any]:
    fake = FakeDiscord()
    await fake.start()
    ids = [f"17100000000000{n:05d}" for n in range(channels)]
    start = _discord_gateway if subject == "gateway" else _discord_bare
    world = build_world(fake)
    # The channels exist before the bot connects, as a server's do: both subjects learn them
    # from GUILD_CREATE. (Made after, the gateway read each one with GET /channels/{id}
    # on its first message, a call a real first contact does not make.)
    made = [fake.channel(fake.guilds[GUILD_ID], cid, name=f"c{n}", topic=None) for n, cid in enumerate(ids)]
    with tempfile.TemporaryDirectory(prefix="chatgate-contact-") as tmp:
        stop = await start(fake, world, Path(tmp), ids, rate)
        lag = stamp_lag()
        try:
            await _until(lambda: fake.gateway.current is not None and fake.gateway.current.socket is not None)
            fake.channel_budget = (5, 5.0)  # Discord's documented 5 messages per 5 s per channel
            await asyncio.sleep(2.5)  # discord.py's guild_ready_timeout for the bare client
            pushed: dict[str, float] = {}
            for round_ in range(rounds):
                for channel in made:
                    await fake.post(channel, ANN, f"r{round_} {channel.id}")
                    pushed.setdefault(channel.id, time.monotonic())

            def sends() -> list[Any]:
                return [
                    c
                    for c in fake.calls
                    if c.method == "POST" and c.path.endswith("/messages") and c.status < 400
                ]

            def answered() -> int:
                return len([c for c in sends() if _channel(c.path) in pushed])

            await _until(lambda: answered() >= channels * rounds, 120)
            await asyncio.sleep(0.3)
        finally:
            await lag.stop()
            await stop()
            await fake.stop()
    sent = [c for c in sends() if _channel(c.path) in pushed]
    first: dict[str, float] = {}
    for call in sent:
        first.setdefault(_channel(call.path), call.at)
    calls = [c.at for c in fake.calls if "/channels/" in c.path and c.method in ("POST", "PATCH", "DELETE")]
    figures = {**_figures(pushed, first), **_saturation(sorted(c.at for c in sent), calls, rate, lag)}
    return {**figures, "violations": len(fake.violations)}


def _channel(path: str) -> str:
    return path.split("/channels/")[1].split("/")[0]


async def _until(predicate: Callable[[], object], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the fake never saw what the bench waits for")
        await asyncio.sleep(0.02)


def _saturation(
    replies: list[float], calls: list[float], rate: float | None, lag: LoopLagMonitor
) -> dict[str, Any]:
    worst = max(lag.samples, default=0.0)
    span = replies[-1] - replies[0] if len(replies) > 1 else 0.0
    per_s = (len(replies) - 1) / span if span else None
    return {
        "replies_per_s": round(per_s, 2) if per_s else None,
        "budget_share": round(per_s / rate, 3) if per_s and rate else None,
        "busiest_second": busiest(calls, 1.0),
        "stamp_lag_max_ms": round(worst * 1e3, 1),
        "busiest_second_beyond_stamp_lag": busiest(calls, max(0.0, 1.0 - worst)),
    }


def stamp_lag() -> LoopLagMonitor:
    """The gateway's own loop-lag monitor on this (the fake's) loop, sampling every 5 ms
    throughout: its worst sample is how late the fake's stamps can be."""
    monitor = LoopLagMonitor(None, window=1_000_000)
    monitor.interval = monitor.idle_interval = 0.005
    monitor.start()
    return monitor


async def main() -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--channels", type=int, default=40, help="saturation's channels (two messages each)")
    parser.add_argument("--rate", type=float, default=10.0, help="saturation's gateway rate (calls/s)")
    parser.add_argument("--platforms", default="slack,discord")
    parser.add_argument("--quick", action="store_true", help="a small smoke run (5 of each)")
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.channels = 5, 5
    for name, value in {**SLACK_ENV, DISCORD_TOKEN_ENV: DISCORD_TOKEN}.items():
        os.environ[name] = value
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    runs = {"slack": slack_run, "discord": discord_run}
    out: dict[str, Any] = {"load_before": os.getloadavg()}
    ok = True
    for platform in args.platforms.split(","):
        run = runs[platform]
        result: dict[str, Any] = {}
        for subject in ("bare", "gateway"):
            print(f"{platform}: first contact ({subject})", file=sys.stderr)
            result[subject] = await run(subject, args.conversations, 1, None)
            ok = ok and result[subject]["answered"] == args.conversations
        result["p50_ratio"] = round(result["gateway"]["p50_ms"] / max(0.1, result["bare"]["p50_ms"]), 2)
        if platform == "slack":  # its own 20/s budget binds: the pipeline alone, all at once allowed
            print(f"{platform}: first contact (gateway, budget of {args.conversations}/s)", file=sys.stderr)
            result["gateway_budget_lifted"] = await run("gateway", args.conversations, 1, args.conversations)
            lifted = result["gateway_budget_lifted"]
            ok = ok and lifted["answered"] == args.conversations
            bare_p50 = max(0.1, result["bare"]["p50_ms"])
            result["p50_ratio_budget_lifted"] = round(lifted["p50_ms"] / bare_p50, 2)
        print(f"{platform}: saturation", file=sys.stderr)
        result["saturation"] = await run("gateway", args.channels, 2, args.rate)
        result["saturation"]["rate"] = args.rate
        out[platform] = result
    out["load_after"] = os.getloadavg()
    print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
