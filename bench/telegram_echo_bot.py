#!/usr/bin/env python
"""The floor for bench/telegram.py: a bare Telegram echo bot on the gateway's own Bot API client.

Long polls, answers every text message with ``echo: <text>``, remembers nothing, commits
nothing. The updates of one batch are answered concurrently, as the gateway does.
Usage: ``telegram_echo_bot.py API_BASE`` with the token in ``BENCH_TELEGRAM_TOKEN``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from chatgate.platforms.telegram.botapi import BotApi


async def answer(api: BotApi, update: dict[str, Any]) -> None:
    message = update.get("message") or {}
    if "text" in message:
        await api.call("sendMessage", 20, chat_id=message["chat"]["id"], text=f"echo: {message['text']}")


async def main(base: str) -> None:
    api = BotApi(os.environ["BENCH_TELEGRAM_TOKEN"], base)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    offset = None

    async def poll() -> None:
        nonlocal offset
        while True:
            updates = await api.call("getUpdates", 40, offset=offset, timeout=25)
            await asyncio.gather(*(answer(api, u) for u in updates))
            if updates:
                offset = updates[-1]["update_id"] + 1

    task = asyncio.create_task(poll())
    await asyncio.wait({task, asyncio.create_task(stop.wait())}, return_when=asyncio.FIRST_COMPLETED)
    task.cancel()
    await api.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
