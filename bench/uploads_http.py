"""Web chat uploads through a real gateway process (issue 29): ``--users`` people each upload a
``--mb`` MB file at once over HTTP, and the gateway's peak RSS growth is read off the process.

A ``chatgate run`` subprocess on loopback with the built-in web chat (SQLite, echo agent, media
on by default). Each user says ``hello`` on a WebSocket (which makes the conversation theirs),
then all POST ``/api/conversations/<chat>/uploads`` together; each body is made piece by piece as
it is sent (64 kB, incompressible, nothing held by the client). The gateway's RSS is sampled
every 5 ms with psutil from this process; ``peak_rss_growth_mb`` is its peak above the level
before the uploads, ``seconds`` the time until every upload was answered. Every upload must be
answered 200 with the right size, or the run fails. Prints one JSON object:

    .venv/bin/python bench/uploads_http.py --users 20 --mb 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import websockets
import yaml

PIECE = 64 * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def body(size: int) -> AsyncIterator[bytes]:
    block = os.urandom(PIECE)
    sent = 0
    while sent < size:
        piece = block[: min(PIECE, size - sent)]
        sent += len(piece)
        yield piece


ECHO = {"agent": {"echo": {"chunk_delay_ms": 0}}}


async def start(
    tmp: Path, port: int, values: dict[str, Any] = ECHO, extra_env: dict[str, str] | None = None
) -> asyncio.subprocess.Process:
    """``chatgate run`` with ``values`` as its config, once its ``/readyz`` answers 200."""
    config = tmp / "chatgate.yaml"
    config.write_text(yaml.safe_dump(values))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")} | (extra_env or {})
    log = (tmp / "gateway.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "chatgate.app.cli", "run", "--config", str(config),
        "--state-dir", str(tmp / "state"), "--port", str(port), stdout=log, stderr=log, env=env,
    )  # fmt: skip
    log.close()
    async with httpx.AsyncClient() as http:
        for _ in range(600):
            try:
                if (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200:
                    return proc
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"the gateway did not start: {(tmp / 'gateway.log').read_text()[-2000:]}")


async def own(port: int, chat: str, user: str) -> websockets.ClientConnection:
    ws = await websockets.connect(f"ws://127.0.0.1:{port}/ws")
    await ws.send(json.dumps({"type": "hello", "chat_id": chat, "user_id": user}))
    ready = json.loads(await ws.recv())
    assert ready == {"type": "ready"}, ready
    return ws


async def upload(http: httpx.AsyncClient, port: int, chat: str, user: str, size: int) -> None:
    headers = {
        "X-Chatgate-User": user,
        "Origin": f"http://127.0.0.1:{port}",
        "Content-Type": "application/octet-stream",
        "Content-Length": str(size),
    }
    answer = await http.post(
        f"/api/conversations/{chat}/uploads?name=big.bin", headers=headers, content=body(size)
    )
    assert answer.status_code == 200 and answer.json()["size"] == size, answer.text


async def run(users: int, size: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-uploads-http-"))
    port = free_port()
    proc = await start(tmp, port)
    gateway = psutil.Process(proc.pid)
    sockets = [await own(port, f"c-{n}", f"user-{n}") for n in range(users)]
    await asyncio.sleep(1.0)  # the start-up's tail (the agent, the sweeps)
    before = peak = gateway.memory_info().rss
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, gateway.memory_info().rss)
            await asyncio.sleep(0.005)

    sampler = asyncio.create_task(sample())
    started = time.perf_counter()
    try:
        limits = httpx.Limits(max_connections=users)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=300, limits=limits) as http:
            await asyncio.gather(*(upload(http, port, f"c-{n}", f"user-{n}", size) for n in range(users)))
        took = time.perf_counter() - started
    finally:
        done.set()
        await sampler
        for ws in sockets:
            await ws.close()
        proc.terminate()
        await proc.wait()
    return {
        "users": users,
        "file_mb": size / 1e6,
        "seconds": round(took, 2),
        "rss_before_mb": round(before / 1e6, 1),
        "peak_rss_growth_mb": round((peak - before) / 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("--quick", action="store_true", help="3 users, 1 MB: a smoke run")
    args = parser.parse_args()
    users, mb = (3, 1.0) if args.quick else (args.users, args.mb)
    print(json.dumps(asyncio.run(run(users, int(mb * 1e6)))))


if __name__ == "__main__":
    main()
