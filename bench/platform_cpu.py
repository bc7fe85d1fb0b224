#!/usr/bin/env python
"""CPU per message on Slack and Discord: a gateway process against a bare echo bot (issue 33).

Each subject is a subprocess against the project's fake of the platform (in this process, on
127.0.0.1; the unmodified ``slack_bolt``/``slack_sdk`` and ``discord.py`` talk to it):

- ``bare``: ``slack_echo_bot.py`` (a Bolt app in Socket Mode that ``say``s the echo) or
  ``discord_echo_bot.py`` (a ``discord.Client`` whose ``on_message`` sends it): no store, no
  session, no pacing.
- ``gateway``: ``chatgate run`` with only that platform, the echo agent answering at once,
  SQLite in a temp dir.

Once the subject is connected and has settled (``--settle``), ``--messages`` messages are
pushed at ``--rate`` a second over ``--channels`` channels (DMs on Slack, free-response
guild channels on Discord), and the subject's CPU (``psutil``: user + system of that process
alone, so other load does not count) is read from before the first push until every message
was answered. Subjects alternate (bare, gateway, bare, ...) for ``--runs`` rounds.
``--baseline-src DIR`` adds a third subject, ``baseline``: the same gateway importing chatgate
from another checkout's ``src/`` (before a change, say), in the same rotation, and
``gateway_to_baseline`` per platform. A start-only comparison: ``--messages 5 --channels 5
--settle 0.3 --runs 8``.

``main_thread_cpu_ms_per_message`` is the part of it on the subject's main thread (its event
loop); the rest is its other threads' (the gateway's SQLite writer above all). Each run also
reads ``start_to_connect_s``, from the exec to the fake seeing the subject's
IDENTIFY (Discord) or its Socket Mode connection said hello (Slack; polled every 10 ms), and
``peak_rss_mb`` (``VmHWM`` once every reply is in).

Prints one JSON object: per platform, each subject's medians over runs of those figures and
every run; ``ratio`` (CPU, gateway over bare; issue 33's goal is at most 2.5),
``start_ratio`` and ``rss_ratio`` (issue 33's goals are absolute: a start of at most 0.5 s on
a quiet machine, at most 60 MB). ``src/`` is byte-compiled first, as an installed wheel is
(``--no-compile`` skips it; see ``bench/telegram.py``). Exits 1 unless every message was
answered exactly once in every run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
# bench/discord.py would shadow the discord.py library: bench/ goes last, for e2e's helpers.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH]
sys.path.insert(0, str(ROOT / "tests" / "platforms"))  # the fakes live with the tests
sys.path.append(str(BENCH))

from discord_fake.harness import ANN, GUILD_ID, build_world, discord_config  # noqa: E402
from discord_fake.server import FakeDiscord  # noqa: E402
from discord_fake.state import TOKEN as DISCORD_TOKEN  # noqa: E402
from discord_fake.state import TOKEN_ENV as DISCORD_TOKEN_ENV  # noqa: E402
from slack_fake import FakeSlack, message_event  # noqa: E402
from slack_fake.gateway import ENV as SLACK_ENV  # noqa: E402
from slack_fake.gateway import slack_values  # noqa: E402
from slack_fake.payloads import APP_TOKEN, BOT_TOKEN  # noqa: E402

from e2e import (  # noqa: E402
    byte_compile,
    cpu_seconds,
    peak_rss_mb,
    stop_gateway,
    thread_cpu,
    thread_cpu_split,
)

INSTANT_ECHO = {"kind": "echo", "echo": {"chunk_delay_ms": 0}}
"""The gateway's agent answers at once, as the bare bots do."""


class Lane:
    """One platform's fake, its channels, and how to push a message and count the replies."""

    def __init__(self, platform: str, channels: int) -> None:
        self.platform = platform
        self.slack: FakeSlack | None = None
        self.discord: FakeDiscord | None = None
        self.ids = [f"D{700 + n}" for n in range(channels)]
        if platform == "discord":
            self.ids = [f"17200000000000{n:05d}" for n in range(channels)]

    async def start(self) -> None:
        if self.platform == "slack":
            self.slack = FakeSlack()
            await self.slack.start()
            return
        self.discord = fake = FakeDiscord()
        await fake.start()
        self.world = build_world(fake)
        guild = fake.guilds[GUILD_ID]
        self.channels = {
            cid: fake.channel(guild, cid, name=f"c{n}", topic=None) for n, cid in enumerate(self.ids)
        }

    async def stop(self) -> None:
        if self.slack is not None:
            await self.slack.stop()
        if self.discord is not None:
            await self.discord.stop()

    def command(self, subject: str, tmp: Path, python: str) -> list[str]:
        if self.slack is not None:
            if subject == "bare":
                return [python, str(BENCH / "slack_echo_bot.py"), self.slack.api_base]
            values = slack_values(self.slack, tmp, agent=INSTANT_ECHO, log_level="WARNING")
        else:
            assert self.discord is not None
            if subject == "bare":
                return [python, str(BENCH / "discord_echo_bot.py"), self.discord.base + "/api/v10"]
            values = discord_config(
                self.discord, self.world, tmp, discord={"free_response_channels": self.ids},
                agent=INSTANT_ECHO, log_level="WARNING",
            )  # fmt: skip
        config = tmp / "chatgate.json"
        config.write_text(json.dumps(values), encoding="utf-8")  # JSON is YAML
        return [
            python,
            "-m",
            "chatgate.app.cli",
            "run",
            "--config",
            str(config),
            "--state-dir",
            str(tmp / "state"),
        ]

    def connected(self) -> bool:
        if self.slack is not None:
            return self.slack.socket.connected.is_set()
        assert self.discord is not None
        current = self.discord.gateway.current
        return current is not None and current.socket is not None

    async def push(self, channel: str, text: str) -> None:
        if self.slack is not None:
            await self.slack.push_event(message_event(channel, "U1", text))
        else:
            assert self.discord is not None
            await self.discord.post(self.channels[channel], ANN, text)

    def replies(self) -> int:
        if self.slack is not None:
            return sum(1 for c in self.ids for m in self.slack.view(c) if m.text.startswith("echo: "))
        assert self.discord is not None
        return sum(
            1
            for c in self.discord.calls
            if c.method == "POST" and c.path.endswith("/messages") and c.status < 400
        )


async def _until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def one_run(platform: str, subject: str, args: argparse.Namespace) -> dict[str, Any]:
    lane = Lane(platform, args.channels)
    await lane.start()
    with tempfile.TemporaryDirectory(prefix=f"chatgate-cpu-{platform}-{subject}-") as name:
        tmp = Path(name)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
        env |= {**SLACK_ENV, DISCORD_TOKEN_ENV: DISCORD_TOKEN}
        env |= {"BENCH_SLACK_BOT_TOKEN": BOT_TOKEN, "BENCH_SLACK_APP_TOKEN": APP_TOKEN}
        env |= {"BENCH_DISCORD_TOKEN": DISCORD_TOKEN}
        if subject == "baseline":  # the gateway from another checkout's src/ (``--baseline-src``)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (args.baseline_src, env.get("PYTHONPATH")) if p)
        err = (tmp / "subject.log").open("wb")
        execed = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *lane.command(subject, tmp, args.python),
            stdout=asyncio.subprocess.DEVNULL, stderr=err, env=env, start_new_session=True,
        )  # fmt: skip
        err.close()
        try:
            await _until(lane.connected, 60, f"{platform} {subject} to connect")
            connected = time.monotonic() - execed
            await asyncio.sleep(args.settle)  # discord.py's guild_ready_timeout; the gateway's late imports
            cpu0, threads0 = cpu_seconds(proc.pid), thread_cpu(proc.pid)
            started = time.monotonic()
            for i in range(args.messages):
                await asyncio.sleep(max(0.0, started + i / args.rate - time.monotonic()))
                await lane.push(lane.ids[i % args.channels], f"m{i}")
            await _until(lambda: lane.replies() >= args.messages, args.timeout, "every reply")
            await asyncio.sleep(0.5)  # a late extra reply would show here
            cpu = cpu_seconds(proc.pid) - cpu0
            threads = thread_cpu_split(threads0, thread_cpu(proc.pid), proc.pid, args.messages)
            answered = lane.replies()
            peak = peak_rss_mb(proc.pid)
        except TimeoutError as exc:
            log_tail = (tmp / "subject.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{platform} {subject}: {exc}; its log ends: {log_tail}") from exc
        finally:
            shutdown = await stop_gateway(proc, 30)
            await lane.stop()
    return {
        "answered": answered,
        "cpu_ms_per_message": round(cpu * 1000 / args.messages, 3),
        "main_thread_cpu_ms_per_message": threads[0],
        "thread_cpu_ms_per_message": threads,
        "start_to_connect_s": round(connected, 3),
        "peak_rss_mb": peak,
        "exited_on_sigterm": shutdown["exited_on_sigterm"],
    }


FIGURES = ("cpu_ms_per_message", "main_thread_cpu_ms_per_message", "start_to_connect_s", "peak_rss_mb")


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r[key] is not None]
    return round(statistics.median(values), 3) if values else None


def _ratio(summary: dict[str, Any], key: str, against: str = "bare") -> float | None:
    gateway, other = summary["gateway"][key], summary[against][key]
    return round(gateway / other, 2) if gateway is not None and other else None


async def main_async(args: argparse.Namespace) -> tuple[dict[str, Any], bool]:
    out: dict[str, Any] = {
        "workload": {k: getattr(args, k) for k in ("messages", "channels", "rate", "runs", "settle")},
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "byte_compiled": not args.no_compile,
    }
    if not args.no_compile:
        byte_compile(args.python, [str(ROOT / "src"), *([args.baseline_src] if args.baseline_src else [])])
    subjects = ["bare", "gateway", *(["baseline"] if args.baseline_src else [])]
    ok = True
    for platform in args.platforms.split(","):
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in subjects}
        for rep in range(args.runs):
            for subject in subjects:
                print(f"[platform_cpu] {platform} run {rep + 1}/{args.runs}: {subject}", file=sys.stderr)
                result = await one_run(platform, subject, args)
                ok = ok and result["answered"] == args.messages
                runs[subject].append(result)
        summary: dict[str, Any] = {
            s: {**{k: _median(rs, k) for k in FIGURES}, "runs": rs} for s, rs in runs.items()
        }
        summary["ratio"] = _ratio(summary, "cpu_ms_per_message")
        summary["start_ratio"] = _ratio(summary, "start_to_connect_s")
        summary["rss_ratio"] = _ratio(summary, "peak_rss_mb")
        if args.baseline_src:
            summary["gateway_to_baseline"] = {k: _ratio(summary, k, "baseline") for k in FIGURES}
        out[platform] = summary
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return out, ok


def main() -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--platforms", default="slack,discord")
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--channels", type=int, default=30)
    parser.add_argument("--rate", type=float, default=10.0, help="messages a second over all channels")
    parser.add_argument("--runs", type=int, default=2, help="rounds of bare then gateway")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds from connected to the first push")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the last reply")
    parser.add_argument("--python", default=sys.executable, help="the subjects' interpreter")
    parser.add_argument("--no-compile", action="store_true", help="do not byte-compile src/ first")
    parser.add_argument("--baseline-src", default=None, help="also run a gateway from this checkout's src/")
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    args = parser.parse_args()
    if args.quick:
        args.messages, args.channels, args.rate, args.runs, args.settle = 10, 5, 20.0, 1, 2.5
    out, ok = asyncio.run(main_async(args))
    print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
