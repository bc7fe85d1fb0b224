#!/usr/bin/env python
"""The floor for bench/platform_cpu.py on Discord: a bare discord.py client that echoes.

``on_message`` sends ``echo: <content>`` to the message's channel for every message not
from a bot; it remembers nothing and commits nothing. discord.py is pointed at the fake the
way the gateway points it (``chatgate.platforms.discord.endpoint``).

Usage: ``discord_echo_bot.py API_BASE`` (``.../api/v10``) with the token in
``BENCH_DISCORD_TOKEN``; SIGTERM stops it.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/discord.py would shadow the discord.py library for a script run from bench/.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import asyncio  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402

import aiohttp  # noqa: E402

import discord  # noqa: E402
from chatgate.platforms.discord.endpoint import point_gateway, point_rest  # noqa: E402


async def start_echo_client(api: str, token: str) -> tuple[discord.Client, asyncio.Task[None]]:
    """Point discord.py at ``api`` and start the echoing client; also ``first_contact.py``'s bare bot."""
    point_rest(api)
    async with (
        aiohttp.ClientSession() as session,
        session.get(api + "/gateway/bot", headers={"Authorization": f"Bot {token}"}) as answer,
    ):
        point_gateway((await answer.json())["url"])
    intents = discord.Intents.default()
    intents.message_content = True
    client = discord.Client(intents=intents)

    @client.event
    async def on_message(message: discord.Message) -> None:
        if not message.author.bot:
            await message.channel.send(f"echo: {message.content}")

    return client, asyncio.create_task(client.start(token))


async def main(api: str) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    client, task = await start_echo_client(api, os.environ["BENCH_DISCORD_TOKEN"])
    await asyncio.wait({task, asyncio.create_task(stop.wait())}, return_when=asyncio.FIRST_COMPLETED)
    await client.close()
    await asyncio.gather(task, return_exceptions=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
