#!/usr/bin/env python
"""The relay lane's floor: a bare ``websockets`` client doing the relay adapter's job, durably nothing.

Like chatgate's relay adapter it dials the connector (``ws://…/relay`` with the contract's
upgrade token), sends one ``hello``, waits for the ``descriptor``, and then for every
``inbound`` frame sends its ``inbound_ack`` and an ``outbound`` ``send`` with the text
``echo: <text>``, and reads the ``outbound_result``. No store, no session, no agent, one
WebSocket message per frame: the least a gateway on this library spends per relayed message.

Prints ``floor is running: open http://127.0.0.1:0/`` once the descriptor arrived (the line
chatgate's benchmarks wait for); SIGTERM closes the socket and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import itertools
import json
import os
import signal
import time

from websockets.asyncio.client import ClientConnection, connect


def upgrade_token(gateway_id: str, secret: str, ttl: int = 300) -> str:
    signed = f"{gateway_id}:{int(time.time()) + ttl}"
    sig = hmac.new(secret.encode(), signed.encode(), hashlib.sha256).hexdigest()
    return base64.urlsafe_b64encode(f"{signed}:{sig}".encode()).decode().rstrip("=")


async def relay(ws: ClientConnection, platform: str, bot_id: str) -> None:
    ids = itertools.count(1)
    carry = ""
    await ws.send(json.dumps({"type": "hello", "platform": platform, "botId": bot_id}) + "\n")
    async for message in ws:
        *lines, carry = (carry + str(message)).split("\n")
        for line in lines:
            if not line.strip():
                continue
            frame = json.loads(line)
            kind = frame.get("type")
            if kind == "descriptor":
                print("floor is running: open http://127.0.0.1:0/", flush=True)
            elif kind == "inbound":
                buffer_id, event = frame.get("bufferId"), frame.get("event") or {}
                if buffer_id is not None:
                    await ws.send(json.dumps({"type": "inbound_ack", "bufferId": str(buffer_id)}) + "\n")
                chat_id = (event.get("source") or {}).get("chat_id")
                action = {"op": "send", "chat_id": chat_id, "content": f"echo: {event.get('text', '')}"}
                out = {"type": "outbound", "requestId": f"r{next(ids)}", "action": action}
                await ws.send(json.dumps({**out, "platform": platform, "botId": bot_id}) + "\n")


async def main_async(args: argparse.Namespace) -> None:
    secret = os.environ[args.secret_env]
    headers = {"Authorization": f"Bearer {upgrade_token(args.gateway_id, secret)}"}
    url = args.url.rstrip("/").replace("http://", "ws://", 1) + "/relay"
    async with connect(url, additional_headers=headers, max_size=4 * 2**20, proxy=None) as ws:
        task = asyncio.create_task(relay(ws, args.platform, args.bot_id))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        for t in (task, stopper):
            t.cancel()
        await asyncio.gather(task, stopper, return_exceptions=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="the connector's base URL, e.g. http://127.0.0.1:8787")
    p.add_argument("--gateway-id", required=True)
    p.add_argument("--secret-env", required=True, help="environment variable holding the relay secret")
    p.add_argument("--platform", default="discord")
    p.add_argument("--bot-id", default="bench-bot")
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
