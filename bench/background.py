"""Webhook and schedule figures against a real ``chatgate run`` subprocess; prints one JSON object.

- ``webhook_*``: signed ``POST /hooks/bench`` deliveries, each answered 200 only after its
  commit: the time to that answer (sequential and with ``--concurrency`` senders), then the
  same deliveries again (duplicates, recognized without a new event).
- ``schedule_late_ms``: how late each firing of an ``every 1s`` schedule was admitted
  (``admitted_at`` minus its slot), over ``--seconds``.

    python bench/background.py [--quick] [--deliveries N] [--concurrency C] [--seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

SECRET = "bench-secret"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config() -> dict[str, Any]:
    return {
        "agent": {"echo": {"chunk_delay_ms": 0}},
        "hooks": {
            "enabled": True,
            "routes": {
                "bench": {
                    "secret_env": "BENCH_HOOK_SECRET",
                    "template": "event ${n}",
                    "target": {"platform": "web", "chat_id": "bench"},
                }
            },
        },
        "schedules": {
            "jobs": {
                "tick": {"every": "1s", "text": "tick", "target": {"platform": "web", "chat_id": "tick"}}
            }
        },
    }


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"p50": round(statistics.median(ordered) * 1000, 2), "p99": round(p99 * 1000, 2)}


async def _post(client: httpx.AsyncClient, n: int) -> float:
    body = json.dumps({"n": n}).encode()
    delivery, timestamp = f"bench-{n}", str(int(time.time()))
    message = f"{timestamp}.{delivery}.".encode() + body  # what the signature covers
    signature = "sha256=" + hmac.new(SECRET.encode(), message, hashlib.sha256).hexdigest()
    headers = {
        "X-Chatgate-Signature": signature,
        "X-Chatgate-Timestamp": timestamp,
        "X-Delivery-Id": delivery,
    }
    started = time.perf_counter()
    response = await client.post("/hooks/bench", content=body, headers=headers)
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise SystemExit(f"delivery {n}: {response.status_code} {response.text}")
    return elapsed


async def _webhooks(port: int, deliveries: int, concurrency: int) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        sequential = [await _post(client, n) for n in range(deliveries)]
        gate = asyncio.Semaphore(concurrency)

        async def one(n: int) -> float:
            async with gate:
                return await _post(client, n)

        started = time.perf_counter()
        parallel = await asyncio.gather(*(one(n) for n in range(deliveries, 2 * deliveries)))
        wall = time.perf_counter() - started
        duplicates = [await _post(client, n) for n in range(deliveries)]
    return {
        "webhook_sequential_ms": _ms(sequential),
        "webhook_concurrent_ms": _ms(list(parallel)),
        "webhook_concurrent_per_second": round(deliveries / wall, 1),
        "webhook_duplicate_ms": _ms(duplicates),
    }


def _lateness(db: Path) -> dict[str, Any]:
    conn = sqlite3.connect(db, timeout=30)
    try:
        rows = conn.execute(
            "SELECT delivery_id, admitted_at FROM inbox WHERE transport = 'schedule'"
        ).fetchall()
    finally:
        conn.close()
    late = []
    for delivery_id, admitted_at in rows:
        stamp = ":".join(delivery_id.rsplit(":", 3)[-3:])
        slot = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
        late.append(admitted_at - slot)
    return {"schedule_firings": len(late), "schedule_late_ms": _ms(late) if late else None}


def _wait_ready(log: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 90
    while " is running: " not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the gateway did not start: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.05)


def _start(root: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    env["BENCH_HOOK_SECRET"] = SECRET
    command = [sys.executable, "-m", "chatgate.app.cli", "run", "--config", str(root / "chatgate.yaml")]
    command += ["--state-dir", str(root / "state"), "--port", str(port), "--log-level", "warning"]
    log = root / "gateway.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=out, env=env)
    _wait_ready(log, proc)
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short run (for the smoke test)")
    parser.add_argument("--deliveries", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    deliveries, seconds = (30, 3.0) if args.quick else (args.deliveries, args.seconds)
    with tempfile.TemporaryDirectory(prefix="chatgate-bench-bg-") as tmp:
        root = Path(tmp)
        (root / "chatgate.yaml").write_text(yaml.safe_dump(_config()))
        port = _port()
        proc = _start(root, port)
        try:
            started = time.monotonic()
            result: dict[str, Any] = {"deliveries": deliveries, "concurrency": args.concurrency}
            result.update(asyncio.run(_webhooks(port, deliveries, args.concurrency)))
            time.sleep(max(0.0, seconds - (time.monotonic() - started)))  # let the schedule fire meanwhile
        finally:
            proc.terminate()
            proc.wait(60)
        result.update(_lateness(root / "state" / "chatgate.db"))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
