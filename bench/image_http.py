"""A 10 MB image from a web chat user to the model, through a gateway process (issue 29), against a
bare program doing the same job over the same HTTP.

- ``gateway``: ``chatgate run`` on loopback (built-in web chat, SQLite, the OpenAI agent with
  ``vision`` against a fake model server in this process). The user says ``hello`` on a
  WebSocket; the clock starts; the image is uploaded (``POST .../uploads``) and a message naming
  it is sent; the clock stops when the model server has read a chat completion request holding
  the image's bytes (checked by their sha256).
- ``bare``: an aiohttp server (in this process) that takes the same upload, streams it to a file,
  fsyncs it, reads it back and posts it to the same model server as a ``data:`` URL: the floor of
  "a file a person sent reaches the model durably".

Runs interleave (gateway, bare, ``--runs`` each); prints one JSON object with the medians and
their ratio:

    .venv/bin/python bench/image_http.py --mb 10 --runs 5
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))
from media import noise_png
from uploads_http import free_port, own, start

MODEL_KEY = "sk-bench-image"


class Model:
    """A fake OpenAI-compatible server: notes when a request holding the expected image arrived."""

    def __init__(self) -> None:
        self.expected = ""
        self.arrived = asyncio.Event()
        self.at = 0.0

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        for message in body.get("messages", []):
            content = message.get("content")
            for part in content if isinstance(content, list) else []:
                url = (part.get("image_url") or {}).get("url", "") if part.get("type") == "image_url" else ""
                if (
                    url
                    and hashlib.sha256(base64.b64decode(url.split(",", 1)[1])).hexdigest() == self.expected
                ):
                    self.at = time.perf_counter()
                    self.arrived.set()
        answer = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await answer.prepare(request)
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                 "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}  # fmt: skip
        await answer.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
        return answer


async def serve(app: web.Application, port: int) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def gateway_run(tmp: Path, model: Model, model_port: int, image: bytes) -> float:
    port = free_port()
    openai = {"base_url": f"http://127.0.0.1:{model_port}/v1", "model": "m", "api_key_env": "BENCH_MODEL_KEY"}
    config = {"agent": {"kind": "openai", "openai": {**openai, "vision": True}}}
    proc = await start(tmp, port, config, {"BENCH_MODEL_KEY": MODEL_KEY})
    try:
        async with aiohttp.ClientSession() as http:
            ws = await own(port, "c-1", "user-1")
            await asyncio.sleep(3.0)  # the agent's SDK is imported after start
            model.arrived.clear()
            started = time.perf_counter()
            headers = {"X-Chatgate-User": "user-1", "Origin": f"http://127.0.0.1:{port}",
                       "Content-Type": "application/octet-stream"}  # fmt: skip
            where = f"http://127.0.0.1:{port}/api/conversations/c-1/uploads?name=shot.png"
            async with http.post(where, data=image, headers=headers) as answer:
                upload = await answer.json()
                assert answer.status == 200, upload
            attachment = {"ref": upload["ref"], "name": upload["name"]}
            await ws.send(
                json.dumps({"type": "message", "id": "m1", "text": "look", "attachments": [attachment]})
            )
            await asyncio.wait_for(model.arrived.wait(), 120)
            await ws.close()
            return model.at - started
    finally:
        proc.terminate()
        await proc.wait()


async def bare_run(tmp: Path, model: Model, model_port: int, image: bytes) -> float:
    """The floor: take the upload to a file (fsync), read it back, post it to the model."""

    async def upload(request: web.Request) -> web.Response:
        path = tmp / f"bare-{time.perf_counter_ns()}.png"
        with open(path, "wb") as f:  # noqa: ASYNC230  (the bare program's own simple way)
            async for piece in request.content.iter_chunked(256 * 1024):
                f.write(piece)
            f.flush()
            os.fsync(f.fileno())
        data = await asyncio.to_thread(path.read_bytes)
        url = "data:image/png;base64," + base64.b64encode(data).decode()
        parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": url}}]
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": parts}]}
        where = f"http://127.0.0.1:{model_port}/v1/chat/completions"
        async with aiohttp.ClientSession() as http, http.post(where, json=body) as answer:
            await answer.read()
        return web.json_response({"ok": True})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/upload", upload)
    port = free_port()
    runner = await serve(app, port)
    try:
        model.arrived.clear()
        started = time.perf_counter()
        where = f"http://127.0.0.1:{port}/upload"
        async with aiohttp.ClientSession() as http, http.post(where, data=image) as answer:
            assert answer.status == 200
        await asyncio.wait_for(model.arrived.wait(), 120)
        return model.at - started
    finally:
        await runner.cleanup()


async def main_async(mb: float, runs: int) -> dict[str, Any]:
    image = noise_png(mb)
    model = Model()
    model.expected = hashlib.sha256(image).hexdigest()
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", model.chat)
    model_port = free_port()
    runner = await serve(app, model_port)
    gateway: list[float] = []
    bare: list[float] = []
    try:
        for run in range(runs):
            tmp = Path(tempfile.mkdtemp(prefix=f"bench-image-http-{run}-"))
            gateway.append(await gateway_run(tmp, model, model_port, image))
            bare.append(await bare_run(tmp, model, model_port, image))
    finally:
        await runner.cleanup()
    g, b = statistics.median(gateway), statistics.median(bare)
    return {
        "bytes": len(image),
        "runs": runs,
        "gateway_s": round(g, 4),
        "bare_s": round(b, 4),
        "ratio": round(g / b, 2),
        "gateway_each_s": [round(x, 4) for x in gateway],
        "bare_each_s": [round(x, 4) for x in bare],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a 1 MB image, one run: a smoke run")
    args = parser.parse_args()
    mb, runs = (1.0, 1) if args.quick else (args.mb, args.runs)
    print(json.dumps(asyncio.run(main_async(mb, runs))))


if __name__ == "__main__":
    main()
