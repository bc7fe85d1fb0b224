"""Lane parity: the same chat, user and moment, natively on Discord and through the relay connector,
give one session key and one pinned-context byte string, for every chat kind and every lane.

Each lane is a real in-process gateway with the recording agent: the native one on the fake
Discord, the relay one on the real relay simulator. Both are fed the same fixtures: the same
interaction bodies byte for byte, and a text message carrying the labels the native adapter
observes (what a connector resolves for the same chat).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from discord_fake.harness import (
    ANN,
    World,
    discord_config,
    fake,
    interaction_body,
    press,
    slash,
    wait_for,
    world,
)
from discord_fake.server import FakeDiscord
from discord_fake.state import ANNOUNCEMENT_THREAD, PRIVATE_THREAD, PUBLIC_THREAD, Channel

from chatgate.app.config import GatewayConfig
from chatgate.app.gateway import Gateway
from chatgate.platforms.kit.conform import conform
from relaysim import RelaySimulator
from support.relay_harness import GW, SECRET, RecordingAgent, relay_config

__all__ = ["fake", "world"]
NICK = "Annie"


@dataclass(frozen=True)
class Chat:
    name: str
    pick: str


CHATS = [
    Chat("dm", "dm"),
    Chat("guild channel", "general"),
    Chat("announcement thread", str(ANNOUNCEMENT_THREAD)),
    Chat("public thread", str(PUBLIC_THREAD)),
    Chat("private thread", str(PRIVATE_THREAD)),
]


def _channel(world: World, pick: str) -> Channel:
    return {"dm": world.dm, "general": world.general}.get(pick) or world.threads[int(pick)]


def _interactions(fake: FakeDiscord, channel: Channel) -> list[dict[str, Any]]:
    nick = NICK if channel.guild_id else None
    on_message = {"message": {"id": "1800000000000000001"}}
    select = {"component_type": 3, "custom_id": "pick", "values": ["a", "b"]}
    modal = {
        "custom_id": "form",
        "components": [{"type": 1, "components": [{"type": 4, "custom_id": "f", "value": "v"}]}],
    }
    bodies = [
        interaction_body(channel, ANN, 2, slash("ask", prompt="x"), nick=nick),
        interaction_body(channel, ANN, 3, press("more"), nick=nick, **on_message),
        interaction_body(channel, ANN, 3, select, nick=nick, **on_message),
        interaction_body(channel, ANN, 5, modal, nick=nick),
    ]
    return [fake.complete(body) for body in bodies]


def _relay_text(
    channel: Channel, world: World, mid: str, text: str, labels: dict[str, Any]
) -> dict[str, Any]:
    thread = channel.type in (ANNOUNCEMENT_THREAD, PUBLIC_THREAD, PRIVATE_THREAD)
    source: dict[str, Any] = {
        "platform": "discord",
        "chat_id": channel.id,
        "chat_type": "thread" if thread else "group" if channel.guild_id else "dm",
        "user_id": ANN.id,
        "user_display_name": NICK if channel.guild_id else ANN.global_name,
        "user_name": ANN.username,
        "thread_id": channel.id if thread else None,
        "parent_chat_id": channel.parent_id if thread else None,
        **labels,
    }
    if channel.guild_id:
        source["scope_id"] = channel.guild_id
    return {"text": text, "message_type": "text", "message_id": mid, "source": source}


async def _native(
    fake: FakeDiscord, world: World, tmp: Path, channel: Channel, bodies: list[dict[str, Any]]
) -> Any:
    agent = RecordingAgent()
    config = discord_config(fake, world, tmp, discord={"allow_users": [ANN.id]})
    gateway = Gateway(conform(GatewayConfig, config), tmp / "native", agent=agent)
    await gateway.start()
    try:
        await wait_for(
            lambda: fake.gateway.current is not None and fake.gateway.current.socket, 30, "IDENTIFY"
        )
        await fake.post(channel, ANN, "first", nick=NICK, mention_bot=channel.guild_id is not None)
        await wait_for(lambda: len(agent.requests) == 1, 30, "the first turn")
        for i, body in enumerate(bodies):
            await fake.interact(body)
            await wait_for(lambda n=i + 2: len(agent.requests) == n, 30, f"turn {i + 2}")
        await fake.post(channel, ANN, "second", nick=NICK, mention_bot=channel.guild_id is not None)
        await wait_for(lambda: len(agent.requests) == len(bodies) + 2, 30, "the last turn")
        labels = json.loads(json.dumps(_labels(tmp / "native")))
    finally:
        await gateway.stop()
    return [(r.session_key, r.system) for r in agent.requests], labels


def _labels(state: Path) -> dict[str, Any]:
    import sqlite3

    db = sqlite3.connect(state / "chatgate.db")
    try:
        row = db.execute("SELECT inbound_json FROM inbox ORDER BY seq LIMIT 1").fetchone()
    finally:
        db.close()
    source = json.loads(row[0])["source"]
    return {"chat_name": source.get("chat_name"), "chat_topic": source.get("chat_topic")}


async def _relayed(
    tmp: Path, world: World, channel: Channel, bodies: list[dict[str, Any]], labels: dict[str, Any]
) -> Any:
    agent = RecordingAgent()
    sim = RelaySimulator(tmp / "relay.db", {GW: [SECRET]}, [{"platform": "discord"}], ack_timeout=2.0)
    await sim.start()
    gateway = Gateway(relay_config(sim.base_url, tmp / "relay"), tmp / "relay-state", agent=agent)
    await gateway.start()
    try:
        await sim.wait_connected(GW, 20)
        await sim.inject_inbound(GW, _relay_text(channel, world, "m1", "first", labels))
        await wait_for(lambda: len(agent.requests) == 1, 30, "the first relayed turn")
        for i, body in enumerate(bodies):
            await sim.inject_passthrough(GW, json.dumps(body).encode())
            await wait_for(lambda n=i + 2: len(agent.requests) == n, 30, f"relayed turn {i + 2}")
        await sim.inject_inbound(GW, _relay_text(channel, world, "m2", "second", labels))
        await wait_for(lambda: len(agent.requests) == len(bodies) + 2, 30, "the last relayed turn")
    finally:
        await gateway.stop()
        await sim.stop()
    return [(r.session_key, r.system) for r in agent.requests]


@pytest.mark.parametrize("chat", CHATS, ids=[c.name for c in CHATS])
async def test_native_and_relayed_lanes_key_one_session_with_one_pinned_context(
    fake: FakeDiscord, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chat: Chat
) -> None:
    monkeypatch.setenv("CHATGATE_TEST_RELAY_SECRET", SECRET)
    channel = _channel(world, chat.pick)
    bodies = _interactions(fake, channel)
    native, labels = await _native(fake, world, tmp_path, channel, bodies)
    relayed = await _relayed(tmp_path, world, channel, bodies, labels)
    keys = {key for key, _ in native + relayed}
    systems = {system for _, system in native + relayed}
    assert len(native) == len(relayed) == 6
    assert len(keys) == 1, keys
    assert len(systems) == 1, systems
    if channel.guild_id:
        assert labels["chat_name"] in native[0][1]
