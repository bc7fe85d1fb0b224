#!/usr/bin/env python
"""End to end: a real gateway subprocess, real WebSocket clients, the echo agent.

Starts ``chatgate run --port 0`` with the echo agent at ``chunk_delay_ms: 0``, then
opens one WebSocket per chat. Each chat sends M messages, keeping at most K of them
waiting for their final (K=1: one at a time), and confirms every final with
``received``. While it measures, it checks that every message got exactly one
final ``echo: <text>`` with a fresh message id, in the chat's send order.

Figures per phase (``--phases``; a phase is K, or K@RATE for a paced load):

- ``messages_per_s``: finals received / wall time (first send to last final);
- ``latency_ms``: send of a message to receipt of its final (p50/p99/max);
- ``ack_ms``: send to ``ack`` (the message is durably admitted);
- ``loop_lag``: the gateway's own event-loop lag, from ``GET /metrics``: p99 from the
  ``chatgate_event_loop_lag_seconds`` histogram (only the samples of this phase, bucket
  counts diffed before/after), and the largest ``chatgate_event_loop_lag_max_seconds``
  scraped once a second during the phase;
- ``gateway_cpu``: CPU seconds the gateway used / wall time (1.0 = one core busy).

At the end the gateway gets SIGTERM and must exit; then its database is checked (every
message done, every final sent and confirmed). Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import multiprocessing as mp
import os
import platform
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from e2e_clients import ClientSpec, client_process, run_clients  # bench/ is sys.path[0] for a script

RUNNING = re.compile(r"is running: (?:open )?http://([^:/]+):(\d+)/")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    idx = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[idx]


# ---------------------------------------------------------------- gateway


def scrape(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    buckets: dict[float, float] = {}
    found: dict[str, Any] = {"buckets": buckets, "count": 0.0, "sum": 0.0, "max": None}
    for line in text.splitlines():
        if line.startswith("chatgate_event_loop_lag_seconds_bucket"):
            le = re.search(r'le="([^"]+)"', line)
            assert le is not None
            buckets[float(le.group(1))] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("chatgate_event_loop_lag_seconds_count"):
            found["count"] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("chatgate_event_loop_lag_seconds_sum"):
            found["sum"] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("chatgate_event_loop_lag_max_seconds"):
            found["max"] = float(line.rsplit(" ", 1)[1])
    return found


async def scrape_after_a_lag_sample(
    port: int, before: dict[str, Any], timeout: float = 5.0
) -> dict[str, Any]:
    """The metrics once the gateway has taken a loop-lag sample since ``before``.

    The gateway samples its loop every 50 ms, so a phase shorter than that (a --quick
    run) can end before the first sample: wait for it (bounded) rather than report none.
    """
    deadline = time.monotonic() + timeout
    while True:
        after = await asyncio.to_thread(scrape, port)
        if after["count"] > before["count"] or time.monotonic() > deadline:
            return after
        await asyncio.sleep(0.02)


def histogram_quantile(q: float, before: dict[float, float], after: dict[float, float]) -> dict[str, Any]:
    """Prometheus ``histogram_quantile`` over the samples added between two scrapes."""
    bounds = sorted(after)
    cum = [after[b] - before.get(b, 0.0) for b in bounds]
    total = cum[-1] if cum else 0.0
    if total <= 0:
        return {"samples": 0, "value_s": None, "bucket_le": None}
    rank = q * total
    prev_bound, prev_cum = 0.0, 0.0
    for bound, c in zip(bounds, cum, strict=True):
        if c >= rank:
            if bound == float("inf"):
                return {"samples": int(total), "value_s": prev_bound, "bucket_le": "+Inf"}
            frac = (rank - prev_cum) / (c - prev_cum) if c > prev_cum else 1.0
            value = prev_bound + (bound - prev_bound) * frac
            return {"samples": int(total), "value_s": round(value, 5), "bucket_le": bound}
        prev_bound, prev_cum = bound, c
    return {"samples": int(total), "value_s": None, "bucket_le": None}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process (psutil): other load on the machine does not count."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def thread_cpu(pid: int) -> dict[int, float]:
    """User + system CPU seconds of each thread of the process, by thread id: the main thread
    (its event loop) and which of the others (the gateway's SQLite writer and readers, the
    floor's journal thread) the rest of ``cpu_seconds`` is, so the split says which side a gap
    is on."""
    try:
        threads = psutil.Process(pid).threads()
    except psutil.Error:
        return {}
    return {t.id: t.user_time + t.system_time for t in threads}


def thread_cpu_split(
    before: dict[int, float], after: dict[int, float], pid: int, messages: int
) -> list[float]:
    """Each thread's CPU ms a message between two ``thread_cpu`` readings, the main thread
    first, then the others largest first (a thread that ended in between is not counted)."""
    spent = {tid: after[tid] - before.get(tid, 0.0) for tid in after}
    main = spent.pop(pid, 0.0)
    others = sorted((v for v in spent.values() if v > 0), reverse=True)
    return [round(v * 1000 / messages, 3) for v in (main, *others)]


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident set so far (``VmHWM``), in MiB; ``None`` once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def byte_compile(python: str, trees: list[str]) -> None:
    """Compile the trees a subject imports from, as pip does when it installs a wheel.

    These machines set ``PYTHONDONTWRITEBYTECODE``, so an editable checkout would otherwise
    compile every chatgate module from source at every start (about 0.15 s).
    """
    for tree in trees:
        subprocess.run([python, "-m", "compileall", "-q", tree], check=True, stdout=subprocess.DEVNULL)


def rss_mb(pid: int) -> float | None:
    try:
        return round(psutil.Process(pid).memory_info().rss / 2**20, 1)
    except psutil.Error:
        return None


def gateway_command(override: str | None) -> list[str]:
    if override:
        return shlex.split(override)
    script = Path(sys.executable).parent / "chatgate"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "chatgate.app.cli"]


def write_config(tmp: Path, args: argparse.Namespace) -> Path:
    config = tmp / "chatgate.yaml"
    config.write_text(
        "log_level: INFO\n"
        "http:\n  host: 127.0.0.1\n"
        "agent:\n  kind: echo\n  echo:\n    chunk_delay_ms: 0\n"
        f"scheduler:\n  max_concurrent_turns: {args.max_concurrent_turns}\n"
        f"store:\n  sqlite:\n    synchronous: {args.synchronous}\n",
        encoding="utf-8",
    )
    return config


async def start_gateway(tmp: Path, args: argparse.Namespace) -> tuple[asyncio.subprocess.Process, int, Path]:
    cmd = [*gateway_command(args.gateway_cmd), "run", "--config", str(write_config(tmp, args))]
    cmd += ["--state-dir", str(tmp / "state"), "--port", "0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    return await start_process(cmd, env, tmp / "gateway.log")


async def start_process(
    cmd: list[str], env: dict[str, str], gw_log: Path
) -> tuple[asyncio.subprocess.Process, int, Path]:
    """Start a server that prints ``... is running: open http://HOST:PORT/``; its port."""
    log(f"[e2e] starting: {' '.join(cmd)}")
    err = gw_log.open("wb")
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdout=asyncio.subprocess.PIPE, stderr=err, env=env, start_new_session=True
    )
    err.close()
    assert proc.stdout is not None
    port = None
    deadline = time.monotonic() + 60
    while port is None:
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), max(0.1, deadline - time.monotonic()))
        except TimeoutError:
            line = b""
        if not line:
            proc.kill()
            await proc.wait()
            raise RuntimeError(f"{cmd[0]} did not start; log:\n{gw_log.read_text()[-3000:]}")  # noqa: ASYNC240
        found = RUNNING.search(line.decode(errors="replace"))
        if found:
            port = int(found.group(2))
    return proc, port, gw_log


async def drain(stream: asyncio.StreamReader | None) -> None:
    if stream is None:
        return
    while await stream.readline():
        pass


async def stop_gateway(proc: asyncio.subprocess.Process, grace: float) -> dict[str, Any]:
    started = time.monotonic()
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
    try:
        code = await asyncio.wait_for(proc.wait(), grace)
        exited = True
    except TimeoutError:
        exited = False
        proc.kill()
        code = await proc.wait()
    return {"exited_on_sigterm": exited, "exit_code": code, "seconds": round(time.monotonic() - started, 3)}


def check_database(db: Path, expected_messages: int) -> dict[str, Any]:
    conn = sqlite3.connect(db)
    try:
        inbox = dict(conn.execute("SELECT status, COUNT(*) FROM inbox GROUP BY status").fetchall())
        outbox = dict(conn.execute("SELECT status, COUNT(*) FROM outbox GROUP BY status").fetchall())
        unconfirmed = conn.execute("SELECT COUNT(*) FROM outbox WHERE confirmed_at IS NULL").fetchone()[0]
        finals = conn.execute("SELECT COUNT(*) FROM outbox WHERE kind = 'final'").fetchone()[0]
    finally:
        conn.close()
    ok = (
        inbox.get("done", 0) == expected_messages
        and sum(inbox.values()) == expected_messages
        and finals == expected_messages
        and sum(outbox.values()) == expected_messages
        and unconfirmed == 0
    )
    return {"inbox": inbox, "outbox": outbox, "finals": finals, "unconfirmed": unconfirmed, "ok": ok}


# ---------------------------------------------------------------- phases


NO_METRICS: dict[str, Any] = {"buckets": {}, "count": 0.0, "sum": 0.0, "max": None}


class LagWatch:
    """Scrapes /metrics once a second: the max-lag gauge only covers its last 5 s window."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.max_seen: list[float] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), 1.0)
            with contextlib.suppress(OSError):
                self.note(await asyncio.to_thread(scrape, self.port))

    def note(self, metrics: dict[str, Any]) -> None:
        if metrics["max"] is not None:
            self.max_seen.append(metrics["max"])

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task


async def drive_clients(
    chat_ids: list[str], spec: ClientSpec, procs: int, on_go: Any
) -> list[dict[str, Any]]:
    """Run the chats in this process (procs == 1) or split over worker processes."""
    if procs == 1:

        async def no_wait() -> None:
            return None

        return [await run_clients(chat_ids, spec, on_go, no_wait)]
    ctx = mp.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    workers = [
        ctx.Process(target=client_process, args=(chat_ids[i::procs], spec, ready, go, results))
        for i in range(procs)
    ]
    for w in workers:
        w.start()
    states = [await asyncio.to_thread(ready.get, True, 120) for _ in workers]
    await on_go()
    go.set()
    parts = [await asyncio.to_thread(results.get, True, spec.timeout + 120) for _ in workers]
    for w in workers:
        await asyncio.to_thread(w.join, 30)
    fatal = [p["fatal"] for p in parts if "fatal" in p]
    if fatal or any(s != "ready" for s in states):
        raise RuntimeError(f"client worker failed: {fatal or states}")
    return parts


def ms(values: list[float], *qs: float) -> dict[str, float | None]:
    out: dict[str, float | None] = {f"p{round(q * 100)}": round(percentile(values, q) * 1000, 2) for q in qs}
    out["max"] = round(values[-1] * 1000, 2) if values else None
    return out


@dataclass(frozen=True)
class Phase:
    window: int
    rate: float  # target messages/s over all chats; 0 = as fast as the window allows

    def __str__(self) -> str:
        return f"K={self.window}" + (f"@{self.rate:g}/s" if self.rate else "")


def parse_phase(text: str) -> Phase:
    window, _, rate = text.strip().partition("@")
    phase = Phase(int(window), float(rate) if rate else 0.0)
    if phase.window < 1 or phase.rate < 0:
        raise ValueError(text)
    return phase


async def run_phase(
    port: int, gw_pid: int, number: int, phase: Phase, args: argparse.Namespace, *, metrics: bool = True
) -> dict[str, Any]:
    """One phase against the server on ``port``; ``metrics=False`` for a server without
    ``/metrics`` (the floor): no loop-lag figures then."""
    window = phase.window
    chat_ids = [f"p{number}-chat{i:04d}" for i in range(args.chats)]
    spec = ClientSpec(
        port=port,
        messages=args.messages,
        window=window,
        interval=args.chats / phase.rate if phase.rate else 0.0,
        text_chars=args.text_chars,
        timeout=args.timeout,
        compression=None if args.compression == "none" else "deflate",
    )
    before = await asyncio.to_thread(scrape, port) if metrics else NO_METRICS
    watch = LagWatch(port)
    mark: dict[str, float] = {}

    async def on_go() -> None:  # every client is connected and ready: the load starts now
        mark["cpu"], mark["t"] = cpu_seconds(gw_pid), time.monotonic()
        if metrics:
            watch.start()

    try:
        parts = await drive_clients(chat_ids, spec, max(1, min(args.client_procs, len(chat_ids))), on_go)
    finally:
        await watch.stop()
    span = time.monotonic() - mark["t"]
    gw_cpu = cpu_seconds(gw_pid) - mark["cpu"]
    after = await scrape_after_a_lag_sample(port, before) if metrics else NO_METRICS
    watch.note(after)

    finals = sum(p["finals"] for p in parts)
    firsts = [p["first_send"] for p in parts if p["first_send"] is not None]
    lasts = [p["last_final"] for p in parts if p["last_final"] is not None]
    wall = (max(lasts) - min(firsts)) if firsts and lasts else 0.0
    latencies = sorted(x for p in parts for x in p["latencies"])
    acks = sorted(x for p in parts for x in p["ack_latencies"])
    problems = [x for p in parts for x in p["problems"]]
    expected = args.chats * args.messages
    lag_count = after["count"] - before["count"]
    p99 = histogram_quantile(0.99, before["buckets"], after["buckets"])
    bounds = sorted(after["buckets"])
    return {
        "window": window,
        "rate": phase.rate or None,
        "messages": expected,
        "finals": finals,
        "messages_per_s": round(finals / wall, 1) if wall else 0.0,
        "wall_s": round(wall, 3),
        "latency_ms": ms(latencies, 0.5, 0.99),
        "ack_ms": ms(acks, 0.5, 0.99),
        "loop_lag": {
            "p99_s": p99["value_s"],
            "p99_bucket_le": p99["bucket_le"],
            "p50_s": histogram_quantile(0.50, before["buckets"], after["buckets"])["value_s"],
            "mean_s": round((after["sum"] - before["sum"]) / lag_count, 5) if lag_count else None,
            "samples": int(lag_count),
            "max_gauge_s": round(max(watch.max_seen), 5) if watch.max_seen else None,
            "buckets_delta": {str(b): int(after["buckets"][b] - before["buckets"].get(b, 0)) for b in bounds},
        },
        "gateway_cpu": round(gw_cpu / span, 3) if span else None,
        "gateway_cpu_s": round(gw_cpu, 3),
        "cpu_per_message_ms": round(gw_cpu / finals * 1000, 3) if finals else None,
        "gateway_rss_mb": rss_mb(gw_pid),
        "client_cpu": round(sum(p["client_cpu_s"] for p in parts) / span, 3) if span else None,
        "drafts": sum(p["drafts"] for p in parts),
        "acks": sum(p["acks"] for p in parts),
        "errors": sum(p["errors"] for p in parts),
        "notices": sum(p["notices"] for p in parts),
        "hung_chats": sum(p["hung_chats"] for p in parts),
        "problems": problems[:20],
        "problem_count": len(problems),
        "correct": finals == expected
        and len(latencies) == expected
        and not problems
        and all(p["hung_chats"] == 0 and p["crashed_chats"] == 0 for p in parts),
    }


def log_problems(gw_log: Path) -> dict[str, Any]:
    lines = gw_log.read_text(errors="replace").splitlines()
    bad = [ln for ln in lines if re.search(r" (WARNING|ERROR|CRITICAL) ", ln) or "Traceback" in ln]
    return {"lines": len(lines), "warnings_or_errors": len(bad), "first": bad[:10]}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    base = Path(args.dir) if args.dir else None
    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-e2e-", dir=base) as tmp_name:
        tmp = Path(tmp_name)
        proc, port, gw_log = await start_gateway(tmp, args)
        drainer = asyncio.create_task(drain(proc.stdout))
        phases: list[dict[str, Any]] = []
        failure: str | None = None
        try:
            for number, spec in enumerate(args.phases):
                log(f"[e2e] phase {spec}: {args.chats} chats x {args.messages} messages")
                phase = await run_phase(port, proc.pid, number, spec, args)
                log(
                    f"[e2e] {spec}: {phase['messages_per_s']} msg/s, p99 {phase['latency_ms']['p99']} ms,"
                    f" loop lag p99 {phase['loop_lag']['p99_s']} s, correct={phase['correct']}"
                )
                phases.append(phase)
                if proc.returncode is not None:
                    failure = f"gateway exited during the run with code {proc.returncode}"
                    break
        except Exception as exc:
            failure = f"{type(exc).__name__}: {exc}"
            log(f"[e2e] run failed: {failure}")
        shutdown = await stop_gateway(proc, args.shutdown_grace)
        await drainer
        log(f"[e2e] gateway stopped: {shutdown}")
        expected = args.chats * args.messages * len(phases)
        db_path = tmp / "state" / "chatgate.db"
        database = check_database(db_path, expected) if db_path.exists() and not failure else None
        problems = log_problems(gw_log)
        correct = (
            failure is None
            and len(phases) == len(args.phases)
            and all(p["correct"] for p in phases)
            and shutdown["exited_on_sigterm"]
            and shutdown["exit_code"] == 0
            and database is not None
            and database["ok"]
        )
        main_phase = phases[0] if phases else {}
        return {
            "benchmark": "e2e",
            "messages_per_s": main_phase.get("messages_per_s"),
            "latency_ms": main_phase.get("latency_ms"),
            "loop_lag_p99_s": main_phase.get("loop_lag", {}).get("p99_s"),
            "loop_lag_max_s": main_phase.get("loop_lag", {}).get("max_gauge_s"),
            "correct": correct,
            "phases": phases,
            "shutdown": shutdown,
            "database": database,
            "gateway_log": problems,
            "failure": failure,
            "chats": args.chats,
            "messages_per_chat": args.messages,
            "phase_specs": [str(p) for p in args.phases],
            "client_procs": args.client_procs,
            "compression": args.compression,
            "echo_chunk_delay_ms": 0,
            "max_concurrent_turns": args.max_concurrent_turns,
            "synchronous": args.synchronous,
            "goals": {"messages_per_s": 500, "loop_lag_p99_s": 0.02},
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "websockets": importlib.metadata.version("websockets"),
            "cpus": os.cpu_count(),
            "loadavg_before": load_before,
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--chats", type=int, default=100, help="chats = concurrent WebSocket clients")
    p.add_argument("--messages", type=int, default=200, help="messages each chat sends per phase")
    p.add_argument(
        "--phases",
        default="4,1,4@500",
        help="comma-separated phases, K or K@RATE: at most K messages per chat waiting for their final"
        " (1 = one at a time); @RATE paces the sends to RATE messages/s over all chats. The first phase"
        " gives the headline figures (default: %(default)s)",
    )
    p.add_argument("--client-procs", type=int, default=1, help="client worker processes (1 = in this one)")
    p.add_argument(
        "--compression",
        default="deflate",
        choices=["deflate", "none"],
        help="permessage-deflate offered by the clients (browsers offer it; default deflate)",
    )
    p.add_argument("--text-chars", type=int, default=40, help="length of each message text")
    p.add_argument("--max-concurrent-turns", type=int, default=64, help="scheduler.max_concurrent_turns")
    p.add_argument("--synchronous", default="FULL", choices=["OFF", "NORMAL", "FULL", "EXTRA"])
    p.add_argument("--timeout", type=float, default=300.0, help="give up on a phase after this many seconds")
    p.add_argument("--shutdown-grace", type=float, default=30.0, help="seconds to wait after SIGTERM")
    p.add_argument(
        "--gateway-cmd",
        help="command that runs the gateway CLI (default: the venv's chatgate), e.g. to wrap it in a"
        " profiler: --gateway-cmd 'py-spy record -o gw.svg -- .venv/bin/chatgate'",
    )
    p.add_argument(
        "--floor",
        action="store_true",
        help="comparison mode: also run the bare Starlette WebSocket echo (bench/floor_webchat.py)"
        " through the same phases, interleaved round by round, and report CPU per message and"
        " latency as ratios to it",
    )
    p.add_argument(
        "--baseline-src",
        help="comparison mode: also run a gateway importing chatgate from this source tree (an older"
        " checkout's src/), interleaved; the ratios then include chatgate_to_baseline",
    )
    p.add_argument("--rounds", type=int, default=3, help="comparison mode: rounds of every target")
    p.add_argument("--dir", help="where the temp state dir goes (default: the system temp dir)")
    p.add_argument("--quick", action="store_true", help="a small smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.chats, args.messages, args.phases, args.timeout = 5, 4, "2,1@100", 60.0
        args.rounds = 1
    try:
        args.phases = [parse_phase(x) for x in str(args.phases).split(",") if x.strip()]
    except ValueError as exc:
        p.error(f"--phases: {exc} is not K or K@RATE with K >= 1")
    if not args.phases:
        p.error("--phases needs at least one phase")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.floor or args.baseline_src:
        from e2e_compare import compare_async  # imports this module: not at the top

        result = asyncio.run(compare_async(args))
    else:
        result = asyncio.run(main_async(args))
    print(json.dumps(result))
    return 0 if result["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
