#!/usr/bin/env python
"""A fleet on PostgreSQL beside one gateway on SQLite: throughput and latency, side by side.

For each agent (``instant``: the echo agent at ``chunk_delay_ms: 0``; ``slow``: one 100 ms
chunk per turn) it runs: one gateway on SQLite, then 1, 2 and 3 gateway processes on one
fresh PostgreSQL database. Web chat clients (one WebSocket per chat, spread over the
processes' ports) each send M messages keeping at most K waiting for their final, and
confirm every final. It checks that every message got exactly one final, in order.

Figures per run: ``messages_per_s`` (finals / wall time, first send to last final),
``latency_ms`` (send to final: p50, p99, max) and ``cpu_ms_per_message``: the gateways' CPU
and the CPU of the PostgreSQL server processes serving them (found by application name),
from the first send to the last final, per message; ``transactions_per_message``: the
transactions the run's own database (created for it, dropped after) committed or rolled back
in that time, per message: unlike CPU, it does not depend on the machine's load.
``db_limit`` names, per agent, the first process count whose throughput rose less than
20 % over one process fewer: from there on, adding processes does not help (the database,
or this machine, is the limit). Prints one JSON object on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import websockets
import yaml

from e2e import drain, log, percentile, start_process, stop_gateway  # bench/ is sys.path[0]

DSN = os.environ.get("CHATGATE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
AGENTS = {
    "instant": {"chunk_delay_ms": 0, "chunk_chars": 4096},
    "slow": {"chunk_delay_ms": 100, "chunk_chars": 4096},
}


async def chat(port: int, chat_id: str, messages: int, window: int, latencies: list[float]) -> list[str]:
    """One client: sends its messages, ``window`` at a time; the finals' texts, in arrival order."""
    finals: list[str] = []
    sent_at: dict[str, float] = {}
    async with websockets.connect(f"ws://127.0.0.1:{port}/ws", max_size=None, open_timeout=30) as ws:
        await ws.send(json.dumps({"type": "hello", "chat_id": chat_id, "user_id": "u-" + chat_id}))
        next_id = 0
        while len(finals) < messages:
            while next_id < messages and len(sent_at) - len(finals) < window:
                mid = f"{chat_id}-{next_id}"
                sent_at[mid] = time.perf_counter()
                await ws.send(json.dumps({"type": "message", "id": mid, "text": f"m{next_id}"}))
                next_id += 1
            frame = json.loads(await asyncio.wait_for(ws.recv(), 120))
            if frame["type"] == "final":
                latencies.append(time.perf_counter() - sent_at[frame["in_reply_to"]])
                finals.append(frame["text"])
                await ws.send(json.dumps({"type": "received", "message_id": frame["message_id"]}))
            elif frame["type"] == "notice":
                await ws.send(json.dumps({"type": "received", "message_id": frame["message_id"]}))
    return finals


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process, from /proc (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def database_dsn(name: str) -> str:
    """``DSN`` with its database replaced by ``name``."""
    return DSN.rsplit("/", 1)[0] + "/" + name


async def backend_pids(schema: str | None, dsn: str) -> list[int]:
    """The PostgreSQL server processes serving this run's gateways (by application name)."""
    if schema is None:
        return []
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            f'SELECT a.pid FROM pg_stat_activity a JOIN "{schema}".processes p'
            " ON a.application_name = 'chatgate ' || p.holder"
        )
    finally:
        await conn.close()
    return [int(r[0]) for r in rows]


async def run(store: dict[str, Any], processes: int, agent: str, args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="chatgate-fleet-", dir=args.dir))
    config = {"store": store, "agent": {"echo": AGENTS[agent]}, "shutdown": {"drain_seconds": 1}}
    gateways = []
    for i in range(processes):
        home = root / f"p{i}"
        home.mkdir()
        (home / "chatgate.yaml").write_text(yaml.safe_dump(config))
        cmd = [sys.executable, "-m", "chatgate.app.cli", "run", "--config", str(home / "chatgate.yaml")]
        cmd += ["--state-dir", str(home / "state"), "--port", "0"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
        gateways.append(await start_process(cmd, env, home / "gateway.log"))
    drains = [asyncio.create_task(drain(proc.stdout)) for proc, _, _ in gateways]
    latencies: list[float] = []
    schema, dsn = store.get("postgres", {}).get("schema"), store.get("url", DSN)
    gateway_cpu = sum(cpu_seconds(proc.pid) for proc, _, _ in gateways)
    backends = {pid: cpu_seconds(pid) for pid in await backend_pids(schema, dsn)}
    transactions = await database_transactions(dsn) if schema else 0
    started = time.perf_counter()
    results = await asyncio.gather(
        *(
            chat(gateways[c % processes][1], f"chat{c}", args.messages, args.window, latencies)
            for c in range(args.chats)
        )
    )
    wall = time.perf_counter() - started
    gateway_cpu = sum(cpu_seconds(proc.pid) for proc, _, _ in gateways) - gateway_cpu
    database_cpu = sum(cpu_seconds(pid) - backends.get(pid, 0.0) for pid in await backend_pids(schema, dsn))
    if schema:  # counted before the stop: the shutdown's own transactions are not the messages'
        await asyncio.sleep(1.5)  # a backend reports its counts to the server's statistics within 1 s
        transactions = await database_transactions(dsn) - transactions
    for proc, _, _ in gateways:
        await stop_gateway(proc, 30)
    await asyncio.gather(*drains)
    shutil.rmtree(root, ignore_errors=True)
    correct = all(finals == [f"echo: m{i}" for i in range(args.messages)] for finals in results)
    latencies.sort()
    return {
        "processes": processes,
        "messages": args.chats * args.messages,
        "messages_per_s": round(args.chats * args.messages / wall, 1),
        "latency_ms": {q: round(1000 * percentile(latencies, v), 1) for q, v in (("p50", 0.5), ("p99", 0.99))}
        | {"max": round(1000 * latencies[-1], 1) if latencies else None},
        "correct": correct,
        "cpu_ms_per_message": {
            "gateways": round(1000 * gateway_cpu / (args.chats * args.messages), 2),
            "postgres": round(1000 * database_cpu / (args.chats * args.messages), 2) if schema else None,
        },
        "transactions_per_message": round(transactions / (args.chats * args.messages), 2) if schema else None,
    }


async def database_transactions(dsn: str) -> int:
    """Transactions committed and rolled back in the run's own database, by every client of it."""
    conn = await asyncpg.connect(dsn)
    try:
        return int(
            await conn.fetchval(
                "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
            )
        )
    finally:
        await conn.close()


async def fresh_database() -> str:
    """A database of the run's own, so its transaction count is the run's alone."""
    name = f"bench_fleet_{uuid.uuid4().hex[:10]}"
    await _ddl(f'CREATE DATABASE "{name}"')
    return name


async def drop_database(name: str) -> None:
    await _ddl(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _ddl(statement: str) -> None:
    """One statement on the server, logged with how long it took: on a busy server a database's
    creation or drop can wait long, and a slow run should say where its time went."""
    started = time.perf_counter()
    conn = await asyncpg.connect(DSN)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()
    verb = " ".join(statement.split()[:2])  # CREATE DATABASE, DROP DATABASE
    log(f"[fleet] {verb}: {time.perf_counter() - started:.2f} s")


def db_limit(runs: list[dict[str, Any]]) -> int | None:
    """The first process count that added less than 20 % throughput over one process fewer."""
    for before, after in itertools.pairwise(runs):
        if after["messages_per_s"] < 1.2 * before["messages_per_s"]:
            return int(after["processes"])
    return None


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()
    out: dict[str, Any] = {"chats": args.chats, "messages_per_chat": args.messages, "window": args.window}
    for agent in args.agents.split(","):
        log(f"[fleet] {agent}: sqlite, 1 process")
        figures: dict[str, Any] = {"sqlite": await run({}, 1, agent, args), "postgres": []}
        for processes in range(1, args.max_processes + 1):
            database = await fresh_database()
            log(f"[fleet] {agent}: postgres, {processes} process(es), database {database}")
            try:
                store = {
                    "url": database_dsn(database),
                    "postgres": {"schema": "fleet", "pool_size": args.pool_size},
                }
                figures["postgres"].append(await run(store, processes, agent, args))
            finally:
                await drop_database(database)
        figures["db_limit"] = db_limit(figures["postgres"])
        out[agent] = figures
    out["correct"] = all(
        r["correct"]
        for agent in args.agents.split(",")
        for r in [out[agent]["sqlite"], *out[agent]["postgres"]]
    )
    out["load_avg"] = {"before": load_before, "after": os.getloadavg()}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chats", type=int, default=60)
    parser.add_argument("--messages", type=int, default=20, help="per chat")
    parser.add_argument("--window", type=int, default=2, help="messages a chat keeps waiting for their final")
    parser.add_argument("--max-processes", type=int, default=3)
    parser.add_argument("--pool-size", type=int, default=10, help="store.postgres.pool_size of each process")
    parser.add_argument("--agents", default="instant,slow")
    parser.add_argument("--dir", help="where the SQLite run's state goes (default: the system temp dir)")
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    args = parser.parse_args()
    if args.quick:
        args.chats, args.messages, args.max_processes = 4, 3, 2
    result = asyncio.run(main_async(args))
    print(json.dumps(result, indent=2))
    return 0 if result["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
