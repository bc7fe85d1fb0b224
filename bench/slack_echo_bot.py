#!/usr/bin/env python
"""The floor for bench/platform_cpu.py on Slack: a bare Bolt app that echoes, nothing more.

Socket Mode on the same libraries as the gateway (``slack_bolt``'s ``AsyncApp`` and the
aiohttp Socket Mode handler, ``slack_sdk``'s web client), ``say``s ``echo: <text>`` for every
message, remembers nothing, commits nothing. Bolt's defaults otherwise (it acknowledges
before the listener runs).

Usage: ``slack_echo_bot.py API_BASE`` with the tokens in ``BENCH_SLACK_BOT_TOKEN`` and
``BENCH_SLACK_APP_TOKEN``; SIGTERM stops it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient


async def main(api_base: str) -> None:
    app = AsyncApp(client=AsyncWebClient(token=os.environ["BENCH_SLACK_BOT_TOKEN"], base_url=api_base))

    @app.event("message")
    async def echo(event: dict[str, Any], say: Any) -> None:
        await say(f"echo: {event['text']}")

    handler = AsyncSocketModeHandler(
        app, os.environ["BENCH_SLACK_APP_TOKEN"], web_client=AsyncWebClient(base_url=api_base)
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await handler.connect_async()
    await stop.wait()
    await handler.close_async()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
