#!/usr/bin/env python
"""What one streamed model reply costs the agent's client, against a bare aiohttp floor.

Three clients stream the same reply from the project's fake OpenAI-compatible server
(``tests/agents/fake_openai_server.py``, on its own thread, so its work is not counted):

- ``sdk_create_httpx``: the SDK's typed ``chat.completions.create`` on its default httpx
  transport (what the openai agent used before);
- ``sdk_post_aiohttp``: the SDK's low-level ``post`` with plain-dict chunks on its aiohttp
  transport (what the openai agent used until it got its own client);
- ``agent_client``: ``chatgate.agents.model_http.ModelEndpoint``, the agent's client now
  (one aiohttp POST, the SDK's retry rules, an SSE decoder, typed errors);
- ``bare_aiohttp``: a hand-written aiohttp request and SSE split, no SDK (the floor).

CPU is this thread's (``time.thread_time``), so other load on the machine does not count.
Rounds interleave the clients; the figures are medians over rounds. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
from openai import AsyncOpenAI, AsyncStream, DefaultAioHttpClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "agents"))
from fake_openai_server import API_KEY, FakeOpenAIServer, Reply

from chatgate.agents.model_http import ModelEndpoint

REPLY = "Sure: here is a short answer from the model."
MESSAGES = [
    {"role": "system", "content": "You are chatting on Telegram with Ada. " * 10},
    {"role": "user", "content": "hello there"},
    {"role": "assistant", "content": "Hi! How can I help?"},
    {"role": "user", "content": "message 3 from Ada"},
]


async def sdk_create(client: AsyncOpenAI) -> str:
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
    parts = [c.delta.content or "" async for chunk in stream for c in chunk.choices]
    return "".join(parts)


async def sdk_post(client: AsyncOpenAI) -> str:
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    stream = await client.post(
        "/chat/completions", body=body, cast_to=object, stream=True, stream_cls=AsyncStream[object]
    )
    parts: list[str] = []
    async for chunk in stream:
        for choice in chunk.get("choices") or ():  # type: ignore[attr-defined]
            parts.append((choice.get("delta") or {}).get("content") or "")
    return "".join(parts)


async def agent_client(endpoint: ModelEndpoint) -> str:
    stream = await endpoint.stream("/chat/completions", {"model": "m", "messages": MESSAGES, "stream": True})
    parts: list[str] = []
    try:
        async for chunk in stream:
            for choice in chunk.get("choices") or ():
                parts.append((choice.get("delta") or {}).get("content") or "")
    finally:
        await stream.close()
    return "".join(parts)


async def bare(session: aiohttp.ClientSession, base: str) -> str:
    parts: list[str] = []
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with session.post(f"{base}/chat/completions", json=body, headers=headers) as response:
        async for line in response.content:
            if line.startswith(b"data: ") and not line.startswith(b"data: [DONE]"):
                for choice in json.loads(line[6:]).get("choices") or ():
                    parts.append((choice.get("delta") or {}).get("content") or "")
    return "".join(parts)


async def cpu_ms_per_call(call: Callable[[], Awaitable[str]], calls: int) -> float:
    for _ in range(20):  # warm: connections, caches
        assert await call() == REPLY
    started = time.thread_time()
    for _ in range(calls):
        await call()
    return (time.thread_time() - started) * 1000 / calls


async def main(args: argparse.Namespace) -> dict[str, object]:
    server = FakeOpenAIServer()
    server.start()
    server.script(*[Reply(REPLY, chunks=args.chunks)] * ((args.calls + 20) * 3 * args.rounds))
    figures: dict[str, list[float]] = {}
    try:
        for round_no in range(args.rounds):
            print(f"[openai_client] round {round_no + 1}/{args.rounds}", file=sys.stderr)
            typed = AsyncOpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0)
            lean = AsyncOpenAI(
                base_url=server.base_url, api_key=API_KEY, max_retries=0, http_client=DefaultAioHttpClient()
            )
            endpoint = ModelEndpoint(server.base_url, API_KEY, timeout_s=60.0, max_retries=0)
            async with aiohttp.ClientSession() as session:
                subjects: dict[str, Callable[[], Awaitable[str]]] = {
                    "sdk_create_httpx": functools.partial(sdk_create, typed),
                    "sdk_post_aiohttp": functools.partial(sdk_post, lean),
                    "agent_client": functools.partial(agent_client, endpoint),
                    "bare_aiohttp": functools.partial(bare, session, server.base_url),
                }
                for name, call in subjects.items():
                    figures.setdefault(name, []).append(await cpu_ms_per_call(call, args.calls))
            await typed.close()
            await lean.close()
            await endpoint.aclose()
    finally:
        server.stop()
    medians = {name: round(statistics.median(values), 3) for name, values in figures.items()}
    floor = medians["bare_aiohttp"]
    return {
        "workload": {"calls": args.calls, "rounds": args.rounds, "chunks_per_reply": args.chunks},
        "cpu_ms_per_reply": medians,
        "ratio_to_bare": {name: round(value / floor, 2) for name, value in medians.items()},
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunks", type=int, default=4)
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
