"""A homeserver that is down when the gateway starts delays Matrix, not the gateway: signing
in is the sync loop's first step, retried with backoff, and once the homeserver answers (here:
a TCP relay to the worker's Synapse opens on the configured port) the bot joins and answers."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from matrix.client import shown_by
from matrix.conftest import Gateways
from matrix.harness import People, echo_of, joined, matrix_config, wait_for
from support.procs import free_port

pytestmark = pytest.mark.slow


async def _relay(listen: int, target: str) -> asyncio.Server:
    host, port = target.removeprefix("http://").split(":")

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    return await asyncio.start_server(serve, "127.0.0.1", listen)


async def test_the_gateway_starts_with_the_homeserver_down_and_matrix_comes_up_with_it(
    people: People, gateways: Gateways, tmp_path: Path
) -> None:
    bot, ann = people.account("bot"), people.person("ann")
    port = free_port()
    config = matrix_config(people.server, bot, tmp_path)
    config["platforms"]["matrix"]["homeserver"] = f"http://127.0.0.1:{port}"  # nothing listens yet
    gateway = await gateways.start(config, bot)
    adapter = gateway.adapters["matrix"]
    assert not adapter.state().connected
    await wait_for(lambda: "could not connect" in adapter.state().detail, 30, "the failed sign-in reported")
    relay = await _relay(port, people.server.base)
    try:
        await wait_for(lambda: adapter.state().connected, 60, "Matrix connected once the homeserver answers")
        room = await ann.create_room(invite=[bot.user_id], direct=True)
        await joined(ann, room, bot.user_id)
        asked = await ann.say(room, "are you there?")

        async def answered() -> bool:
            return any(s.reply_to == asked and s.text == echo_of("are you there?")
                       for s in shown_by(await ann.events(room), bot.user_id))  # fmt: skip

        await wait_for(answered, 30, "the answer")
    finally:
        await gateways.stop(gateway)
        relay.close()
        await relay.wait_closed()
