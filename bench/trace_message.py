"""Which source files and functions of chatgate one web chat message runs.

Starts a real gateway in this process (SQLite in a temp dir, the web chat on 127.0.0.1,
the echo agent), connects a real WebSocket client, sends a warm-up message, then traces
every Python function call in every thread (``sys.setprofile`` and
``threading.setprofile``, installed before the gateway starts its threads) while a
second message travels from the socket to its final reply frame (a coroutine resumed
in that time counts as a call, as the profiler reports it). Prints one JSON object: the
number of distinct ``src/chatgate`` files and functions that ran, and the lists themselves.

    .venv/bin/python bench/trace_message.py [--messages N]

This is how the layout issue counts "a message's walk": a steady-state message (the
warm-up has already imported and built everything), all threads (the SQLite writer and
readers run store code off the loop).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import websockets

from chatgate.app.config import load_config
from chatgate.app.gateway import Gateway

SRC = str(Path(__file__).resolve().parent.parent / "src" / "chatgate")


class Tracer:
    """Installed before the gateway starts (so every thread it starts has it); records only while
    ``active``: ``threading.setprofile`` reaches only threads started after it."""

    def __init__(self) -> None:
        self.functions: set[tuple[str, str]] = set()
        self.active = False

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or not self.active:
            return
        code = frame.f_code
        if code.co_filename.startswith(SRC):
            self.functions.add((code.co_filename[len(SRC) + 1 :], code.co_qualname))

    def install(self) -> None:
        threading.setprofile(self)
        sys.setprofile(self)

    def uninstall(self) -> None:
        self.active = False
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


async def _ask(ws: Any, msg_id: str, text: str) -> None:
    await ws.send(json.dumps({"type": "message", "id": msg_id, "text": text}))
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 20))
        if frame.get("type") == "final" and frame.get("in_reply_to") == msg_id:
            await ws.send(json.dumps({"type": "received", "message_id": frame["message_id"]}))
            return


async def main(messages: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        config_path = Path(tmp) / "chatgate.yaml"
        config_path.write_text("http:\n  port: 0\nagent:\n  echo:\n    chunk_delay_ms: 0\n")
        tracer = Tracer()
        tracer.install()
        gateway = Gateway(load_config(config_path), Path(tmp) / "state")
        await gateway.start()
        try:
            async with websockets.connect(f"ws://127.0.0.1:{gateway.port}/ws") as ws:
                await ws.send(json.dumps({"type": "hello", "chat_id": "trace", "user_id": "u1"}))
                await asyncio.wait_for(ws.recv(), 20)
                await _ask(ws, "warm", "warm up")
                await asyncio.sleep(0.2)  # the warm-up's delivery settles before tracing
                tracer.active = True
                for i in range(messages):
                    await _ask(ws, f"m{i}", f"message {i}")
                await asyncio.sleep(0.2)  # its settlement (the ledger row) is part of the walk
                tracer.active = False
        finally:
            tracer.uninstall()
            await gateway.stop()
    files = sorted({f for f, _ in tracer.functions})
    return {
        "files": len(files),
        "functions": len(tracer.functions),
        "file_list": files,
        "function_list": sorted(f"{f}:{q}" for f, q in tracer.functions),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="the same single message (for smoke tests)")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.messages)), indent=2))
