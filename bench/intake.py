#!/usr/bin/env python
"""Intake throughput of a real gateway: a relay simulator flood and a Bot API double flood.

Starts a real gateway subprocess (``<python> -m chatgate.app.cli run --port 0``, the echo
agent at ``chunk_delay_ms: 0``, the web chat off) per run and floods one of its intakes:

- ``relay``: the relay connector simulator (``relaysim``) runs in this process on
  127.0.0.1. Once the gateway's connection is live, N text frames over C chats are
  committed to the simulator's buffer unsent, then released at once (``--relay-inject
  prebuffer``; ``live`` injects them one by one instead). admissions/s = N / (release to
  the last ``inbound_ack`` the simulator received). Every frame must be acked exactly once.
- ``telegram``: the Bot API double (``tests/platforms/telegram_double.py``) holds N
  messages over C private chats before the gateway starts; the gateway long-polls them
  in getUpdates batches (100 each). admissions/s = N / (the first getUpdates call to the
  call whose offset confirms the last update).

Turns run meanwhile (echo agent, ``scheduler.max_concurrent_turns``) and share the store
writer with the intake, as they would in production.

After each run the gateway gets SIGTERM and its SQLite inbox is read: exactly the N
deliveries, each once, and each chat's ``seq`` order is the order the chat's messages
were sent. ``--gateway-src`` (or ``--baseline-src``) points at another checkout's ``src``,
so the same script measures an older gateway (``--baseline-src`` runs both, interleaved,
and reports the ratio). Prints one JSON object on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import shlex
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e import (  # bench/ is sys.path[0]
    RUNNING,
    cpu_seconds,
    drain,
    log_problems,
    percentile,
    rss_mb,
    stop_gateway,
)
from intake_floor import FloorRun, wait_replies

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "platforms"))  # the Bot API double lives with the tests

try:  # the simulator is its own package (tools/relaysim) since d3dba45; before, chatgate.relaysim
    from relaysim import RelaySimulator
except ImportError:  # pragma: no cover - an old checkout
    from chatgate.relaysim import RelaySimulator  # type: ignore[no-redef]

from telegram_double import BOT_ID, TOKEN, BotApiDouble, User, private  # noqa: E402

GW = "bench-gw"
RELAY_SECRET = "bench-relay-secret"
RELAY_SECRET_ENV = "BENCH_RELAY_SECRET"
TOKEN_ENV = "BENCH_TELEGRAM_TOKEN"
LANES = ("relay", "telegram")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ms(values: list[float]) -> dict[str, float | None]:
    ordered = sorted(values)
    return {
        "p50": round(percentile(ordered, 0.50) * 1000, 2) if ordered else None,
        "p99": round(percentile(ordered, 0.99) * 1000, 2) if ordered else None,
        "max": round(ordered[-1] * 1000, 2) if ordered else None,
    }


# ---------------------------------------------------------------- which gateway


@dataclass(frozen=True)
class Version:
    """One gateway to measure: the interpreter and the source tree it imports chatgate from."""

    name: str  # "main", "baseline" or "floor"
    python: str
    src: str | None  # put first on the gateway's PYTHONPATH; None: whatever ``python`` imports
    floor: bool = False  # the bare relay client (bench/floor_relay.py), not a gateway

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
        if self.src:
            env["PYTHONPATH"] = os.pathsep.join(p for p in (self.src, env.get("PYTHONPATH")) if p)
        return env

    def describe(self) -> dict[str, Any]:
        """Where the gateway's chatgate comes from, and the commit of that tree."""
        if self.floor:
            return {"floor": str(ROOT / "bench" / "floor_relay.py"), "chatgate": None, "commit": "-"}
        code = "import chatgate, sys; print(chatgate.__file__); print(sys.version.split()[0])"
        found = subprocess.run(
            [self.python, "-c", code], env=self.env(), capture_output=True, text=True, timeout=60
        )
        if found.returncode != 0:
            raise RuntimeError(f"{self.python} cannot import chatgate: {found.stderr.strip()[-500:]}")
        package, version = found.stdout.split()
        tree = Path(package).resolve().parents[2]
        head = subprocess.run(
            ["git", "-C", str(tree), "log", "-1", "--format=%h %s"], capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "-C", str(tree), "status", "--porcelain", "--", "src"], capture_output=True, text=True
        )
        return {
            "python": self.python,
            "python_version": version,
            "src": self.src,
            "chatgate": package,
            "commit": head.stdout.strip()[:80] if head.returncode == 0 else None,
            "src_modified": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None,
        }


# ---------------------------------------------------------------- the gateway subprocess


def gateway_config(args: argparse.Namespace, tmp: Path, platforms: dict[str, Any]) -> dict[str, Any]:
    return {
        "log_level": "INFO",
        "http": {"host": "127.0.0.1"},
        "agent": {"kind": "echo", "echo": {"chunk_delay_ms": 0}},
        "scheduler": {"max_concurrent_turns": args.max_concurrent_turns},
        "store": {"sqlite": {"synchronous": args.synchronous}},
        "platforms": {"web": {"enabled": False}, **platforms},
        "locks": {"credential_dir": str(tmp / "locks")},  # never the machine-wide default
        "shutdown": {
            "drain_seconds": 2,
            "outbox_flush_seconds": 1,
            "adapter_close_seconds": 3,
            "hard_deadline_seconds": 30,
        },
    }


class GatewayRun:
    """One ``chatgate run`` child: started, scraped, stopped, its database read."""

    def __init__(self, version: Version, tmp: Path, config: dict[str, Any], args: argparse.Namespace) -> None:
        self.version = version
        self.tmp = tmp
        self.args = args
        self.config_path = tmp / "chatgate.yaml"
        self.config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")  # JSON is YAML
        self.state = tmp / "state"
        self.log_path = tmp / "gateway.log"
        self.proc: asyncio.subprocess.Process | None = None
        self.port = 0
        self._drainer: asyncio.Task[None] | None = None
        self.rejected = 0
        self.other_rows = 0

    def command(self) -> list[str]:
        launcher = shlex.split(self.args.gateway_cmd) if self.args.gateway_cmd else []
        launcher = launcher or [self.version.python, "-m", "chatgate.app.cli"]
        return [
            *launcher,
            "run",
            "--config",
            str(self.config_path),
            "--state-dir",
            str(self.state),
            "--port",
            "0",
        ]

    async def start(self, extra_env: dict[str, str]) -> None:
        cmd = self.command()
        log(f"[intake] starting ({self.version.name}): {' '.join(cmd)}")
        err = self.log_path.open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            env={**self.version.env(), **extra_env},
            start_new_session=True,
        )
        err.close()
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 60
        while not self.port:
            try:
                line = await asyncio.wait_for(
                    self.proc.stdout.readline(), max(0.1, deadline - time.monotonic())
                )
            except TimeoutError:
                line = b""
            if not line:
                self.proc.kill()
                await self.proc.wait()
                raise RuntimeError(f"gateway did not start; log:\n{self.log_path.read_text()[-3000:]}")
            found = RUNNING.search(line.decode(errors="replace"))
            if found:
                self.port = int(found.group(2))
        self._drainer = asyncio.create_task(drain(self.proc.stdout))

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid) if self.proc is not None else 0.0

    def scrape(self) -> dict[str, float]:
        """The writer's commit figures and the admissions so far, from ``GET /metrics``."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        wanted = {
            "chatgate_store_commit_batch_count": "commits",
            "chatgate_store_commit_batch_sum": "writes",
            "chatgate_store_commit_seconds_sum": "commit_seconds",
        }
        found = dict.fromkeys(wanted.values(), 0.0) | {"admitted": 0.0}
        for line in text.splitlines():
            name = line.split(" ", 1)[0]
            if name in wanted:
                found[wanted[name]] = float(line.rsplit(" ", 1)[1])
            elif name.startswith("chatgate_admitted_total"):
                found["admitted"] += float(line.rsplit(" ", 1)[1])
        return found

    async def stop(self) -> dict[str, Any]:
        assert self.proc is not None
        shutdown = await stop_gateway(self.proc, self.args.shutdown_grace)
        if self._drainer is not None:
            await self._drainer
        return shutdown

    def inbox(self, transport: str) -> list[tuple[int, str, str]]:
        """(seq, delivery_id, status) of every inbox row of the transport, in seq order."""
        conn = sqlite3.connect(f"file:{self.state / 'chatgate.db'}?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "SELECT seq, delivery_id, status FROM inbox WHERE transport = ? ORDER BY seq", (transport,)
            ).fetchall()
            self.rejected = conn.execute("SELECT COUNT(*) FROM rejected_inbound").fetchone()[0]
            self.other_rows = conn.execute(
                "SELECT COUNT(*) FROM inbox WHERE transport != ?", (transport,)
            ).fetchone()[0]
        finally:
            conn.close()
        return [(int(s), str(d), str(st)) for s, d, st in rows]


def writer_figures(before: dict[str, float], after: dict[str, float], wall: float) -> dict[str, Any]:
    commits = after["commits"] - before["commits"]
    writes = after["writes"] - before["writes"]
    busy = after["commit_seconds"] - before["commit_seconds"]
    return {
        "commits": int(commits),
        "mean_batch": round(writes / commits, 2) if commits else None,
        "writer_busy": round(busy / wall, 3) if wall else None,
    }


def order_check(rows: list[tuple[int, str, str]], sent: dict[str, list[str]], chat_of: Any) -> dict[str, Any]:
    """Each delivery once, and each chat's rows in seq order are the chat's send order."""
    ids = [d for _, d, _ in rows]
    expected = {d for chat in sent.values() for d in chat}
    by_chat: dict[str, list[str]] = {}
    for delivery in ids:
        by_chat.setdefault(chat_of(delivery), []).append(delivery)
    out_of_order = sorted(c for c, order in sent.items() if by_chat.get(c, []) != order)
    statuses: dict[str, int] = {}
    for _, _, status in rows:
        statuses[status] = statuses.get(status, 0) + 1
    return {
        "inbox_rows": len(rows),
        "distinct_deliveries": len(set(ids)),
        "unexpected_rows": len(set(ids) - expected),
        "missing_rows": len(expected - set(ids)),
        "chats_out_of_order": len(out_of_order),
        "first_out_of_order": out_of_order[:5],
        "statuses": statuses,
    }


# ---------------------------------------------------------------- relay lane


def relay_event(chat: int, k: int) -> dict[str, Any]:
    return {
        "text": f"bench message {k} in chat {chat}, about as long as a chat message",
        "message_id": f"m{k:05d}",
        "source": {
            "platform": "discord",
            "chat_id": f"c{chat:04d}",
            "chat_type": "dm",
            "user_id": f"u{chat:04d}",
            "user_name": f"User {chat}",
        },
    }


class AckClock:
    """Wraps the simulator buffer's ``ack``: when each ``inbound_ack`` arrived, and how long the
    simulator took over it (it handles acks one at a time, each a commit on its buffer thread)."""

    def __init__(self, buffer: Any, expected: int) -> None:
        self.arrived: dict[int, list[float]] = {}  # buffer id -> perf_counter of each ack for it
        self.busy = 0.0
        self.all_in = asyncio.Event()
        self.settled = asyncio.Event()
        """Set once every expected id's ack has been handled by the simulator (its commit done)."""
        self._handled: set[int] = set()
        self._expected = expected
        self._ack = buffer.ack
        buffer.ack = self.ack

    async def ack(self, gateway_id: str, buffer_id: int) -> Any:
        now = time.perf_counter()
        self.arrived.setdefault(buffer_id, []).append(now)
        if len(self.arrived) >= self._expected:  # a fresh simulator: every id it acks is this run's
            self.all_in.set()
        try:
            return await self._ack(gateway_id, buffer_id)
        finally:
            self.busy += time.perf_counter() - now
            self._handled.add(buffer_id)
            if len(self._handled) >= self._expected:
                self.settled.set()


async def relay_run(version: Version, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    n = args.messages
    sim_root = Path(args.sim_dir) if args.sim_dir else tmp
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-relaysim-", dir=sim_root) as sim_tmp:
        sim = RelaySimulator(
            Path(sim_tmp) / "relay.db", {GW: [RELAY_SECRET]}, [{"platform": "discord"}], ack_timeout=30.0
        )
        clock = AckClock(sim.buffer, n)
        await sim.start()
        relay = {
            "enabled": True,
            "url": sim.base_url,
            "gateway_id": GW,
            "secret_env": RELAY_SECRET_ENV,
            "platforms": [{"platform": "discord", "bot_id": "bench-bot", "allow_all": True}],
            "reconnect_initial_seconds": 0.1,
            "reconnect_max_seconds": 1,
        }
        gateway: Any = (
            FloorRun(tmp, args, sim.base_url, GW, RELAY_SECRET_ENV)
            if version.floor
            else GatewayRun(version, tmp, gateway_config(args, tmp, {"relay": relay}), args)
        )
        shutdown = None
        try:
            await gateway.start({RELAY_SECRET_ENV: RELAY_SECRET})
            await sim.wait_live(GW, 60)
            figures = await relay_flood(sim, gateway, clock, args)
            # An ack is timed when it arrives, before the simulator's buffer commit removes the
            # entry: read what it still holds once the last one is committed (bounded).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(clock.settled.wait(), 10.0)
            figures["unacked_at_end"] = len(sim.unacked(GW))
        finally:
            if gateway.proc is not None:
                shutdown = await gateway.stop()
            await sim.stop()
    rows = gateway.inbox("relay")
    sent: dict[str, list[str]] = figures.pop("sent_order")
    db = order_check(rows, sent, lambda d: d.split(":")[1])
    figures.update(
        database=db,
        rejected_rows=gateway.rejected,
        shutdown=shutdown,
        gateway_log=log_problems(gateway.log_path),
    )
    stored = version.floor or (  # the floor stores nothing
        db["inbox_rows"] == n
        and db["distinct_deliveries"] == n
        and db["missing_rows"] == db["unexpected_rows"] == db["chats_out_of_order"] == 0
    )
    figures["correct"] = (
        figures["all_acked"]
        and figures["acked_once"]
        and figures["injected_in_order"]
        and figures["unacked_at_end"] == 0
        and figures["all_replied"]
        and stored
        and gateway.rejected == 0
        and shutdown is not None
        and shutdown["exited_on_sigterm"]
        and shutdown["exit_code"] == 0
    )
    return figures


async def relay_flood(
    sim: Any, gateway: GatewayRun, clock: AckClock, args: argparse.Namespace
) -> dict[str, Any]:
    n, chats = args.messages, args.chats
    events = [(i % chats, i // chats) for i in range(n)]  # interleaved: every chat's k-th, then k+1
    frames = [relay_event(c, k) for c, k in events]
    all_frames = list(frames)
    held: list[int] = []
    if args.relay_inject == "prebuffer":
        # Commit all but the last frame to the simulator's buffer without sending them; injecting
        # the last one then sends every pending frame in buffer order, back to back: the gateway
        # sees the whole flood at once, and the simulator's own commits are not in the timing.
        # (A buffer replayed at connect would not do: replay waits for each ack before the next.)
        entries = await asyncio.gather(
            *(sim.buffer.append(GW, {"type": "inbound", "event": f}) for f in frames[:-1])
        )
        held = [e.buffer_id for e in entries]
        frames = frames[-1:]
    before = await asyncio.to_thread(gateway.scrape)
    cpu0, bench_cpu0 = gateway.cpu(), time.process_time()
    clock.busy = 0.0
    t0 = time.perf_counter()
    wall0 = time.time()
    # live: one task per frame; the simulator commits them in this order (one buffer thread) and
    # writes each to the socket, in buffer order, once it is committed.
    buffer_ids = held + [int(b) for b in await asyncio.gather(*(sim.inject_inbound(GW, f) for f in frames))]
    injected = time.perf_counter() - t0
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(clock.all_in.wait(), args.timeout)
    acks = clock.arrived
    wanted = set(buffer_ids)
    t_end = max((acks[b][0] for b in wanted if b in acks), default=time.perf_counter())
    wall = t_end - t0
    gw_cpu, bench_cpu, sim_busy = gateway.cpu() - cpu0, time.process_time() - bench_cpu0, clock.busy
    after = await asyncio.to_thread(gateway.scrape)
    scraped = time.perf_counter() - t0
    # Then every message's reply (its final text at the connector): CPU per message covers both.
    echo = {f"echo: {f['text']}": b for f, b in zip(all_frames, buffer_ids, strict=True)}
    replied = await wait_replies(sim, GW, echo, args.timeout)
    reply_cpu = gateway.cpu() - cpu0
    to_reply = [replied[b] - wall0 for b in buffer_ids if b in replied]

    sent_at = {int(d.buffer_id): d.at - wall0 for d in sim.deliveries(GW)}  # when written, from t0
    last_sent = max((sent_at[b] for b in wanted if b in sent_at), default=0.0)
    inject_to_ack = [acks[b][0] - t0 for b in buffer_ids if b in acks]
    sent_to_ack = [acks[b][0] - t0 - sent_at[b] for b in buffer_ids if b in acks and b in sent_at]
    sent_order: dict[str, list[str]] = {}
    for c, k in events:  # buffer ids rise with the list, so this is also the wire order
        sent_order.setdefault(f"c{c:04d}", []).append(f"discord:c{c:04d}:m{k:05d}")
    acked = wanted & acks.keys()
    return {
        "messages": n,
        "chats": chats,
        "inject": args.relay_inject,
        "admissions_per_s": round(len(acked) / wall, 1) if wall > 0 else 0.0,
        "wall_s": round(wall, 3),
        "inject_s": round(injected, 3),
        "last_sent_s": round(last_sent, 3),
        "inject_to_ack_ms": ms(inject_to_ack),
        "sent_to_ack_ms": ms(sent_to_ack),
        "acked": len(acked),
        "all_acked": acked == wanted,
        "acked_once": all(len(acks[b]) == 1 for b in acked),
        "injected_in_order": buffer_ids == sorted(buffer_ids) and len(wanted) == n,
        "writer": writer_figures(before, after, scraped),
        "gateway_cpu": round(gw_cpu / wall, 3) if wall > 0 else None,
        "bench_cpu": round(bench_cpu / wall, 3) if wall > 0 else None,
        "sim_ack_busy": round(sim_busy / wall, 3) if wall > 0 else None,
        "all_replied": len(replied) == n,
        "ops_per_message": ops_per_message(sim, n),
        "inject_to_reply_ms": ms(to_reply),
        "cpu_per_message_ms": round(reply_cpu / n * 1000, 3) if len(replied) == n else None,
        "rss_mb": rss_mb(gateway.proc.pid) if gateway.proc is not None else None,
        "sent_order": sent_order,
    }


def ops_per_message(sim: Any, n: int) -> dict[str, float]:
    """Requests the connector received per flooded message, by op (typing, send, edit ...)."""
    counts: dict[str, int] = {}
    for op in sim.ops(GW):
        counts[str(op.op)] = counts.get(str(op.op), 0) + 1
    return {name: round(count / n, 2) for name, count in sorted(counts.items())}


# ---------------------------------------------------------------- telegram lane


async def telegram_run(version: Version, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    n, chats = args.messages, args.chats
    double = BotApiDouble()
    polls: list[tuple[float, int | None]] = []  # (when, offset) of every getUpdates call
    marks: dict[str, float] = {}
    confirmed = asyncio.Event()
    serve = double._m_getUpdates

    async def timed_get_updates(params: dict[str, Any]) -> Any:
        now = time.perf_counter()
        offset = int(params["offset"]) if "offset" in params else None
        polls.append((now, offset))
        if offset is not None and offset > last_update and "confirmed" not in marks:
            marks["confirmed"] = now
            confirmed.set()
        return await serve(params)

    double._m_getUpdates = timed_get_updates  # type: ignore[method-assign]
    await double.start()
    users = [User(100_000 + c, f"User{c}", username=f"user{c}") for c in range(chats)]
    sent_order: dict[str, list[str]] = {}
    for i in range(n):  # interleaved like the relay lane; all of them wait before the gateway starts
        user = users[i % chats]
        update_id, _ = await double.push_message(private(user), user, f"bench message {i // chats}")
        sent_order.setdefault(str(user.id), []).append(f"{BOT_ID}:{update_id}")
    last_update = double.next_update_id - 1
    telegram = {
        "enabled": True,
        "token_env": TOKEN_ENV,
        "allow_users": [str(u.id) for u in users],
        "api_base": double.base,
        "poll_timeout_seconds": 1,
    }
    gateway = GatewayRun(version, tmp, gateway_config(args, tmp, {"telegram": telegram}), args)
    figures: dict[str, Any] = {}
    try:
        started = time.perf_counter()
        await gateway.start({TOKEN_ENV: TOKEN})
        # The updates wait before the gateway starts, and its first poll may admit them all before
        # the start is reported: the figures count from the process's start (its counters are 0).
        before = dict.fromkeys(("commits", "writes", "commit_seconds", "admitted"), 0.0)
        cpu0, bench_cpu0 = 0.0, time.process_time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(confirmed.wait(), args.timeout)
        first = next((t for t, _ in polls), started)
        end = marks.get("confirmed", time.perf_counter())
        span = time.perf_counter() - started
        gw_cpu, bench_cpu = gateway.cpu() - cpu0, time.process_time() - bench_cpu0
        after = await asyncio.to_thread(gateway.scrape)
        wall = end - first
        offsets = [o for _, o in polls if o is not None]
        # One batch: its admissions, the offset's commit, and the next getUpdates that confirms it.
        batch_gaps = [b - a for a, b in itertools.pairwise(t for t, _ in polls if t <= end)]
        figures = {
            "messages": n,
            "chats": chats,
            "admissions_per_s": round(n / wall, 1) if wall > 0 and "confirmed" in marks else 0.0,
            "wall_s": round(wall, 3),
            "get_updates_calls": len(polls),
            "batch_ms": ms(batch_gaps),
            "confirmed": "confirmed" in marks and double.confirmed_below == last_update + 1,
            "offsets_rising": offsets == sorted(set(offsets)),
            "writer": writer_figures(before, after, time.perf_counter() - started),
            "gateway_cpu": round(gw_cpu / span, 3) if span > 0 else None,
            "bench_cpu": round(bench_cpu / span, 3) if span > 0 else None,
        }
    finally:
        shutdown = await gateway.stop() if gateway.proc is not None else None
        await double.stop()
    rows = gateway.inbox("telegram")
    chat_of = {d: chat for chat, ids in sent_order.items() for d in ids}
    db = order_check(rows, sent_order, lambda d: chat_of.get(d, "?"))
    figures.update(
        database=db,
        rejected_rows=gateway.rejected,
        shutdown=shutdown,
        gateway_log=log_problems(gateway.log_path),
    )
    figures["correct"] = (
        figures.get("confirmed") is True
        and figures["offsets_rising"]
        and db["inbox_rows"] == n
        and db["distinct_deliveries"] == n
        and db["missing_rows"] == db["unexpected_rows"] == db["chats_out_of_order"] == 0
        and gateway.rejected == 0
        and shutdown is not None
        and shutdown["exited_on_sigterm"]
        and shutdown["exit_code"] == 0
    )
    return figures


# ---------------------------------------------------------------- runs


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def med(get: Callable[[dict[str, Any]], Any]) -> float | None:
        values = [v for v in (get(r) for r in runs) if v is not None]
        return round(statistics.median(values), 2) if values else None

    summary: dict[str, Any] = {
        "admissions_per_s": med(lambda r: r["admissions_per_s"]),
        "wall_s": med(lambda r: r["wall_s"]),
        "mean_batch": med(lambda r: r["writer"]["mean_batch"]),
        "writer_busy": med(lambda r: r["writer"]["writer_busy"]),
        "gateway_cpu": med(lambda r: r["gateway_cpu"]),
        "bench_cpu": med(lambda r: r["bench_cpu"]),
        "correct": all(r["correct"] for r in runs),
    }
    if runs and "inject_to_ack_ms" in runs[0]:
        summary["inject_to_ack_p50_ms"] = med(lambda r: r["inject_to_ack_ms"]["p50"])
        summary["inject_to_ack_p99_ms"] = med(lambda r: r["inject_to_ack_ms"]["p99"])
        summary["sent_to_ack_p50_ms"] = med(lambda r: r["sent_to_ack_ms"]["p50"])
        summary["sent_to_ack_p99_ms"] = med(lambda r: r["sent_to_ack_ms"]["p99"])
        summary["last_sent_s"] = med(lambda r: r["last_sent_s"])
        summary["sim_ack_busy"] = med(lambda r: r["sim_ack_busy"])
        summary["inject_to_reply_p50_ms"] = med(lambda r: r["inject_to_reply_ms"]["p50"])
        summary["inject_to_reply_p99_ms"] = med(lambda r: r["inject_to_reply_ms"]["p99"])
        summary["cpu_per_message_ms"] = med(lambda r: r["cpu_per_message_ms"])
        summary["rss_mb"] = med(lambda r: r["rss_mb"])
    if runs and "batch_ms" in runs[0]:
        summary["batch_p50_ms"] = med(lambda r: r["batch_ms"]["p50"])
    summary["runs"] = runs
    return summary


LANE_RUN: dict[str, Callable[[Version, Path, argparse.Namespace], Awaitable[dict[str, Any]]]] = {
    "relay": relay_run,
    "telegram": telegram_run,
}


async def one_run(lane: str, version: Version, rep: int, base: Path | None, args: argparse.Namespace) -> Any:
    with tempfile.TemporaryDirectory(prefix=f"chatgate-bench-intake-{lane}-", dir=base) as tmp:
        try:
            run = await LANE_RUN[lane](version, Path(tmp), args)
        except Exception as exc:
            log(f"[intake] {lane} ({version.name}) run {rep + 1} failed: {type(exc).__name__}: {exc}")
            return {"correct": False, "failure": f"{type(exc).__name__}: {exc}"[:2000]}
    run["load_1min"] = round(os.getloadavg()[0], 2)
    log(
        f"[intake] {lane} ({version.name}) run {rep + 1}/{args.runs}: {run['admissions_per_s']:.0f}/s"
        f" in {run['wall_s']} s, mean batch {run['writer']['mean_batch']},"
        f" gateway cpu {run['gateway_cpu']}, correct={run['correct']}"
    )
    return run


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    base = Path(args.dir) if args.dir else None
    load_before = [round(x, 2) for x in os.getloadavg()]
    versions = [Version("main", args.gateway_python, args.gateway_src)]
    if args.baseline_src:
        versions.insert(
            0, Version("baseline", args.baseline_python or args.gateway_python, args.baseline_src)
        )
    if args.floor:
        versions.append(Version("floor", sys.executable, None, floor=True))
    described = {v.name: v.describe() for v in versions}
    for name, info in described.items():
        log(f"[intake] {name} gateway: {info['chatgate']} ({info['commit']})")
    results: dict[str, dict[str, list[dict[str, Any]]]] = {
        v.name: {lane: [] for lane in args.lanes if lane == "relay" or not v.floor} for v in versions
    }
    started = time.monotonic()
    for rep in range(args.runs):
        # Interleaved (baseline, main, baseline, main ...) so drift on a shared machine hits both.
        for lane in args.lanes:
            for version in versions:
                if lane not in results[version.name]:
                    continue  # the floor is the relay lane's (bench/telegram.py has Telegram's)
                results[version.name][lane].append(await one_run(lane, version, rep, base, args))
    summaries = {
        name: {lane: _summary(runs) for lane, runs in lanes.items()} for name, lanes in results.items()
    }
    main = summaries["main"]
    out: dict[str, Any] = {"benchmark": "intake", "lanes": list(args.lanes), **main}
    out["gateway"] = described["main"]
    if "baseline" in summaries:
        out["baseline"] = {"gateway": described["baseline"], **summaries["baseline"]}
        ratio = {}
        for lane in args.lanes:
            new, old = main[lane]["admissions_per_s"], summaries["baseline"][lane]["admissions_per_s"]
            ratio[lane] = round(new / old, 2) if new and old else None
        out["ratio"] = ratio
    else:
        out["baseline"] = out["ratio"] = None
    out["floor"], out["ratio_to_floor"] = floor_figures(summaries) if "floor" in summaries else (None, None)
    out.update(
        correct=all(s[lane]["correct"] for s in summaries.values() for lane in s),
        messages=args.messages,
        chats=args.chats,
        runs=args.runs,
        max_concurrent_turns=args.max_concurrent_turns,
        echo_chunk_delay_ms=0,
        synchronous=args.synchronous,
        seconds=round(time.monotonic() - started, 1),
        python=platform.python_version(),
        sqlite=sqlite3.sqlite_version,
        cpus=os.cpu_count(),
        loadavg_before=load_before,
        loadavg_after=[round(x, 2) for x in os.getloadavg()],
        dir=str(base or tempfile.gettempdir()),
        sim_dir=args.sim_dir or str(base or tempfile.gettempdir()),
        simulator=sys.modules[RelaySimulator.__module__].__file__,  # relaysim, or an old chatgate.relaysim
    )
    return out


FLOOR_KEYS = ("cpu_per_message_ms", "inject_to_reply_p50_ms", "inject_to_reply_p99_ms")


def floor_figures(summaries: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The relay floor's summary, and each gateway's relay figures over the floor's."""
    floor = summaries["floor"]["relay"]
    ratio: dict[str, Any] = {}
    for name in ("main", "baseline"):
        if name in summaries and "relay" in summaries[name]:
            mine = summaries[name]["relay"]
            ratio[name] = {
                k: round(mine[k] / floor[k], 2) if mine.get(k) and floor.get(k) else None for k in FLOOR_KEYS
            }
    return floor, ratio


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    good = [r for r in runs if "failure" not in r]
    summary = summarize(good) if good else {"admissions_per_s": None, "runs": []}
    summary["runs"] = runs
    summary["correct"] = bool(runs) and len(good) == len(runs) and all(r["correct"] for r in runs)
    return summary


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lane", default="both", choices=[*LANES, "both"], help="which intake to flood")
    p.add_argument("--messages", type=int, default=2000, help="messages per run (N)")
    p.add_argument("--chats", type=int, default=100, help="chats the messages spread over (C)")
    p.add_argument("--runs", type=int, default=3, help="runs per lane (and per gateway); figures are medians")
    p.add_argument(
        "--relay-inject",
        default="prebuffer",
        choices=["prebuffer", "live"],
        help="prebuffer: commit N-1 frames to the simulator's buffer unsent, then inject the last, which"
        " sends them all back to back; live: inject all N at once, each sent when the simulator has"
        " committed it (its commits are then in the timing) (default: %(default)s)",
    )
    p.add_argument("--max-concurrent-turns", type=int, default=64, help="scheduler.max_concurrent_turns")
    p.add_argument("--synchronous", default="FULL", choices=["OFF", "NORMAL", "FULL", "EXTRA"])
    p.add_argument("--timeout", type=float, default=300.0, help="give up on a run's flood after this long")
    p.add_argument("--shutdown-grace", type=float, default=40.0, help="seconds to wait after SIGTERM")
    p.add_argument(
        "--gateway-python",
        default=sys.executable,
        help="interpreter that runs the gateway (default: this one)",
    )
    p.add_argument(
        "--gateway-src",
        help="a source tree (a checkout's src/) put first on the gateway's PYTHONPATH, e.g. an old worktree",
    )
    p.add_argument(
        "--baseline-src",
        help="also measure the gateway of this source tree, interleaved run by run with the main one;"
        " the JSON then has `baseline` and `ratio` (main / baseline admissions/s)",
    )
    p.add_argument(
        "--baseline-python", help="interpreter for the baseline gateway (default: --gateway-python)"
    )
    p.add_argument(
        "--gateway-cmd",
        help="command that runs the gateway CLI instead of `<python> -m chatgate.app.cli` (both versions),"
        " e.g. to profile it: --gateway-cmd '.venv/bin/py-spy record -o gw.svg -- .venv/bin/python -m"
        " chatgate.app.cli'",
    )
    p.add_argument("--dir", help="where the gateway state dirs go (default: the system temp dir)")
    default_sim = "/dev/shm" if Path("/dev/shm").is_dir() else None
    p.add_argument(
        "--sim-dir",
        default=default_sim,
        help="where the relay simulator keeps its buffer (default: %(default)s). It fsyncs every append"
        " and every ack on one thread; on a real disk the simulator, not the gateway, is the bottleneck",
    )
    p.add_argument(
        "--floor",
        action="store_true",
        help="relay lane: also run the bare websockets relay client (bench/floor_relay.py) through the"
        " same flood, interleaved, and report CPU per message and reply latency as ratios to it",
    )
    p.add_argument("--quick", action="store_true", help="a small smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.messages, args.chats, args.runs, args.timeout = 60, 6, 1, 60.0
    args.lanes = list(LANES) if args.lane == "both" else [args.lane]
    if args.messages < 1 or args.chats < 1 or args.runs < 1:
        p.error("--messages, --chats and --runs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = asyncio.run(main_async(args))
    print(json.dumps(result))
    return 0 if result["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
