#!/usr/bin/env python
"""Latency and throughput of the OpenAI-compatible API through the durable pipeline.

A real ``chatgate run`` subprocess (SQLite, synchronous=FULL, the echo agent with no
delay, so the figures are the gateway's own cost: admission commit, turn, outbox commit,
delivery, HTTP) and the official ``openai`` client in this process:

- ``sequential``: one request at a time, each a chat completion of its own session;
- ``concurrent``: C clients at once, each in its own named conversation;
- ``stream``: streamed chat completions, time to the first content delta and to ``[DONE]``.

Prints one JSON object on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import openai
import yaml

READY = " is running: "


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(config: Path, state: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "chatgate.app.cli",
        *args,
        "--config",
        str(config),
        "--state-dir",
        str(state),
    ]


def start_gateway(tmp: Path) -> tuple[subprocess.Popen[bytes], int, str]:
    config, state = tmp / "chatgate.yaml", tmp / "state"
    config.write_text(
        yaml.safe_dump({"agent": {"echo": {"chunk_delay_ms": 0}}, "platforms": {"api": {"enabled": True}}})
    )
    made = subprocess.run(
        _cli(config, state, "api-key", "create"), capture_output=True, text=True, check=True
    )
    token = re.search(r"cg-[0-9a-f]{12}-\S+", made.stdout)
    assert token, made.stdout
    port = _free_port()
    logfile = tmp / "gateway.log"
    with logfile.open("wb") as out:
        proc = subprocess.Popen(_cli(config, state, "run", "--port", str(port)), stdout=out, stderr=out)
    deadline = time.monotonic() + 90
    while READY not in logfile.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the gateway did not start: {logfile.read_text(errors='replace')[-2000:]}")
        time.sleep(0.05)
    return proc, port, token.group(0)


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000, 2)

    return {
        "n": len(ordered),
        "p50_ms": pct(0.5),
        "p95_ms": pct(0.95),
        "p99_ms": pct(0.99),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
    }


async def ask(client: openai.AsyncOpenAI, text: str, user: str | None = None) -> float:
    started = time.perf_counter()
    extra = {"user": user} if user else {}
    done = await client.chat.completions.create(
        model="chatgate", messages=[{"role": "user", "content": text}], **extra
    )
    assert done.choices[0].message.content == f"echo: {text}", done
    return time.perf_counter() - started


async def stream_once(client: openai.AsyncOpenAI, text: str) -> tuple[float, float]:
    started = time.perf_counter()
    first = None
    stream = await client.chat.completions.create(
        model="chatgate", messages=[{"role": "user", "content": text}], stream=True
    )
    async for chunk in stream:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - started
    total = time.perf_counter() - started
    return (first if first is not None else total), total


async def run(args: argparse.Namespace, port: int, token: str) -> dict[str, Any]:
    async with openai.AsyncOpenAI(
        api_key=token, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout=120
    ) as client:
        for i in range(5):
            await ask(client, f"warm-up {i}")
        log(f"sequential: {args.requests} requests")
        sequential = [await ask(client, f"sequential {i}") for i in range(args.requests)]
        log(f"concurrent: {args.clients} clients x {args.per_client}")

        async def one_client(c: int) -> list[float]:
            return [
                await ask(client, f"client {c} request {i}", user=f"bench-{c}")
                for i in range(args.per_client)
            ]

        began = time.perf_counter()
        per_client = await asyncio.gather(*(one_client(c) for c in range(args.clients)))
        elapsed = time.perf_counter() - began
        concurrent = [s for samples in per_client for s in samples]
        log(f"stream: {args.streams} streams")
        streams = [await stream_once(client, f"a streamed answer number {i}") for i in range(args.streams)]
    return {
        "sequential": summary(sequential),
        "concurrent": {
            "clients": args.clients,
            **summary(concurrent),
            "requests_per_second": round(len(concurrent) / elapsed, 1),
        },
        "stream": {
            "first_delta": summary([f for f, _ in streams]),
            "done": summary([t for _, t in streams]),
        },
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=300, help="sequential requests")
    p.add_argument("--clients", type=int, default=32, help="concurrent clients")
    p.add_argument("--per-client", type=int, default=20, help="requests per concurrent client")
    p.add_argument("--streams", type=int, default=100, help="streamed requests")
    p.add_argument("--quick", action="store_true", help="a small smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.requests, args.clients, args.per_client, args.streams = 20, 4, 5, 10
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-api-") as tmp:
        proc, port, token = start_gateway(Path(tmp))
        try:
            result = asyncio.run(run(args, port, token))
        finally:
            proc.terminate()
            proc.wait(60)
    result["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "quick": args.quick}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
