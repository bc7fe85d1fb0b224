"""bench/e2e.py's comparison mode: chatgate, the bare floor, and an older chatgate, interleaved.

``--floor`` adds the bare Starlette WebSocket echo (``floor_webchat.py``) and
``--baseline-src DIR`` a gateway importing chatgate from another checkout's ``src``.
Each round runs every target once, in turn (baseline, chatgate, floor, baseline, ...),
each a fresh process on a fresh state directory, through the same phases and the same
clients, so drift on a shared machine hits all of them alike. The figure that matters is
CPU per message: the server process's own CPU time (psutil: user + system, so other load
on the machine does not count) over the phase, divided by the finals it sent. No target's
``/metrics`` is scraped during a phase (the floor has none), so no loop-lag figures here.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e import (
    check_database,
    drain,
    log,
    log_problems,
    run_phase,
    start_process,
    stop_gateway,
    write_config,
)

BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Target:
    name: str  # "baseline", "chatgate" or "floor"
    src: str | None = None  # put first on PYTHONPATH (an older checkout's src)

    @property
    def is_gateway(self) -> bool:
        return self.name != "floor"

    def command(self, tmp: Path, args: argparse.Namespace) -> list[str]:
        if not self.is_gateway:
            return [sys.executable, str(BENCH / "floor_webchat.py"), "--port", "0"]
        config = write_config(tmp, args)
        cli = [sys.executable, "-m", "chatgate.app.cli", "run", "--config", str(config)]
        return [*cli, "--state-dir", str(tmp / "state"), "--port", "0"]

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
        if self.src:
            env["PYTHONPATH"] = os.pathsep.join(p for p in (self.src, env.get("PYTHONPATH")) if p)
        return env


def targets(args: argparse.Namespace) -> list[Target]:
    found = [Target("baseline", args.baseline_src)] if args.baseline_src else []
    found.append(Target("chatgate"))
    if args.floor:
        found.append(Target("floor"))
    return found


async def run_target(target: Target, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    proc, port, server_log = await start_process(target.command(tmp, args), target.env(), tmp / "server.log")
    drainer = asyncio.create_task(drain(proc.stdout))
    phases: list[dict[str, Any]] = []
    failure: str | None = None
    try:
        for number, spec in enumerate(args.phases):
            # No /metrics scrapes (the loop-lag watch scrapes once a second, ~15 ms of the gateway's
            # CPU each): the floor has none, and CPU per message must count the same work.
            phase = await run_phase(port, proc.pid, number, spec, args, metrics=False)
            log(
                f"[e2e] {target.name} {spec}: {phase['cpu_per_message_ms']} ms CPU/message,"
                f" p50 {phase['latency_ms']['p50']} ms, p99 {phase['latency_ms']['p99']} ms,"
                f" correct={phase['correct']}"
            )
            phases.append(phase)
    except Exception as exc:
        failure = f"{type(exc).__name__}: {exc}"
        log(f"[e2e] {target.name} failed: {failure}")
    shutdown = await stop_gateway(proc, args.shutdown_grace)
    await drainer
    database = None
    if target.is_gateway and failure is None:
        database = check_database(tmp / "state" / "chatgate.db", args.chats * args.messages * len(phases))
    correct = (
        failure is None
        and len(phases) == len(args.phases)
        and all(p["correct"] for p in phases)
        and shutdown["exit_code"] == 0
        and (database is None or database["ok"])
    )
    return {
        "phases": phases,
        "shutdown": shutdown,
        "database": database,
        "server_log": log_problems(server_log),
        "failure": failure,
        "correct": correct,
    }


def summarize(runs: list[dict[str, Any]], phase_count: int) -> list[dict[str, Any]]:
    """Per phase, the medians over the rounds of the figures compared."""

    def med(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return round(statistics.median(present), 3) if present else None

    summary = []
    for i in range(phase_count):
        phases = [r["phases"][i] for r in runs if len(r["phases"]) > i]
        summary.append(
            {
                "cpu_per_message_ms": med([p["cpu_per_message_ms"] for p in phases]),
                "latency_p50_ms": med([p["latency_ms"]["p50"] for p in phases]),
                "latency_p99_ms": med([p["latency_ms"]["p99"] for p in phases]),
                "messages_per_s": med([p["messages_per_s"] for p in phases]),
                "server_cpu": med([p["gateway_cpu"] for p in phases]),
                "rss_mb": med([p["gateway_rss_mb"] for p in phases]),
                "rounds": len(phases),
            }
        )
    return summary


RATIO_KEYS = ("cpu_per_message_ms", "latency_p50_ms", "latency_p99_ms")


def ratios(top: list[dict[str, Any]], bottom: list[dict[str, Any]]) -> list[dict[str, float | None]]:
    out = []
    for a, b in zip(top, bottom, strict=True):
        out.append({k: round(a[k] / b[k], 2) if a[k] and b[k] else None for k in RATIO_KEYS})
    return out


async def compare_async(args: argparse.Namespace) -> dict[str, Any]:
    base = Path(args.dir) if args.dir else None
    load_before = [round(x, 2) for x in os.getloadavg()]
    started = time.monotonic()
    chosen = targets(args)
    runs: dict[str, list[dict[str, Any]]] = {t.name: [] for t in chosen}
    for rnd in range(args.rounds):
        for target in chosen:  # interleaved: A B A B, so drift on a shared machine hits all alike
            log(f"[e2e] round {rnd + 1}/{args.rounds}: {target.name}")
            with tempfile.TemporaryDirectory(prefix=f"chatgate-bench-e2e-{target.name}-", dir=base) as tmp:
                runs[target.name].append(await run_target(target, Path(tmp), args))
    summaries = {name: summarize(r, len(args.phases)) for name, r in runs.items()}
    ratio: dict[str, Any] = {}
    for top, bottom in (("chatgate", "floor"), ("baseline", "floor"), ("chatgate", "baseline")):
        if top in summaries and bottom in summaries:
            ratio[f"{top}_to_{bottom}"] = ratios(summaries[top], summaries[bottom])
    return {
        "benchmark": "e2e",
        "mode": "compare",
        "phase_specs": [str(p) for p in args.phases],
        "targets": {name: {"phases": summaries[name], "runs": runs[name]} for name in runs},
        "ratio": ratio,
        "baseline_src": args.baseline_src,
        "correct": all(r["correct"] for rs in runs.values() for r in rs),
        "rounds": args.rounds,
        "chats": args.chats,
        "messages_per_chat": args.messages,
        "compression": args.compression,
        "synchronous": args.synchronous,
        "seconds": round(time.monotonic() - started, 1),
        "cpus": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
