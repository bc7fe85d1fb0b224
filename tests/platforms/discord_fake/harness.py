"""A small Discord world on the fake, and gateway configs pointed at it, for the Discord tests."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from discord_fake.server import FakeDiscord
from discord_fake.state import (
    ANNOUNCEMENT_THREAD,
    FORUM,
    PRIVATE_THREAD,
    PUBLIC_THREAD,
    TOKEN,
    TOKEN_ENV,
    Channel,
    User,
)

GUILD_ID = "1100000000000000001"
ANN = User("1200000000000000001", "ann", "Ann G")
BOB = User("1200000000000000002", "bob", "Bob")
EVE = User("1200000000000000003", "eve", "Eve")
ROLE_OPS = "1300000000000000001"


@dataclass
class World:
    fake: FakeDiscord
    general: Channel
    free: Channel
    forum: Channel
    dm: Channel
    threads: dict[int, Channel]


def build_world(fake: FakeDiscord) -> World:
    guild = fake.guild(GUILD_ID, "Guild", roles={ROLE_OPS: "ops"})
    general = fake.channel(guild, "1400000000000000001", name="general", topic="release talk")
    free = fake.channel(guild, "1400000000000000002", name="free", topic=None)
    forum = fake.channel(guild, "1400000000000000003", FORUM, name="help")
    threads = {
        ANNOUNCEMENT_THREAD: fake.channel(
            guild, "1500000000000000010", ANNOUNCEMENT_THREAD, name="news-t", parent_id=general.id
        ),
        PUBLIC_THREAD: fake.channel(
            guild, "1500000000000000011", PUBLIC_THREAD, name="public-t", parent_id=general.id
        ),
        PRIVATE_THREAD: fake.channel(
            guild, "1500000000000000012", PRIVATE_THREAD, name="private-t", parent_id=general.id
        ),
    }
    dm = fake.dm("1600000000000000001", ANN)
    return World(fake, general, free, forum, dm, threads)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    server = FakeDiscord()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
def world(fake: FakeDiscord, monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    return build_world(fake)


def discord_section(fake: FakeDiscord, world: World, **overrides: Any) -> dict[str, Any]:
    section: dict[str, Any] = {
        "enabled": True,
        "token_env": TOKEN_ENV,
        "allow_users": [ANN.id, BOB.id],
        "api_base": fake.base + "/api/v10",
        "free_response_channels": [world.free.id],
        "command_guilds": [GUILD_ID],
    }
    section.update(overrides)
    return section


def discord_config(fake: FakeDiscord, world: World, tmp_path: Any, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "http": {"port": 0},
        "agent": {"echo": {"chunk_delay_ms": 2}},
        "platforms": {
            "web": {"enabled": False},
            "discord": discord_section(fake, world, **overrides.pop("discord", {})),
        },
        "locks": {"credential_dir": str(tmp_path / "locks")},
        "shutdown": {"drain_seconds": 5, "outbox_flush_seconds": 2},
    }
    values.update(overrides)
    return values


async def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def echo_of(text: str) -> str:
    return f"echo: {text}"


@pytest.fixture
async def run(tmp_path: Path) -> AsyncIterator[Any]:
    """Start real in-process gateways on ``tmp_path/state`` (stopped at the end)."""
    from chatgate.app.config import GatewayConfig
    from chatgate.app.gateway import Gateway
    from chatgate.platforms.kit.conform import conform

    started: list[Gateway] = []

    async def start(config: dict[str, Any]) -> Gateway:
        gateway = Gateway(conform(GatewayConfig, config), tmp_path / "state")
        await gateway.start()
        started.append(gateway)
        return gateway

    yield start
    for gateway in started:
        await gateway.stop()


def inbox(tmp_path: Path) -> list[dict[str, Any]]:
    db = sqlite3.connect(tmp_path / "state" / "chatgate.db")
    try:
        rows = db.execute("SELECT delivery_id, inbound_json, session_key FROM inbox ORDER BY seq").fetchall()
    finally:
        db.close()
    return [{**json.loads(body), "delivery_id": d, "session_key": key} for d, body, key in rows]


async def connected(fake: FakeDiscord) -> None:
    await wait_for(
        lambda: fake.gateway.current is not None and fake.gateway.current.socket is not None, 30, "IDENTIFY"
    )
    await wait_for(lambda: fake.commands.get("1100000000000000001"), 30, "the slash commands")


def interaction_body(
    channel: Any, user: User, kind: int, data: dict[str, Any], *, nick: str | None = None, **extra: Any
) -> dict[str, Any]:
    """An interaction as Discord sends it (the gateway's INTERACTION_CREATE ``d`` without id and token)."""
    wire_channel: dict[str, Any] = {"id": channel.id, "type": channel.type, "name": channel.name}
    if channel.parent_id:
        wire_channel["parent_id"] = channel.parent_id
    body: dict[str, Any] = {"type": kind, "channel_id": channel.id, "channel": wire_channel, "data": data}
    if channel.guild_id:
        body["guild_id"] = channel.guild_id
        body["member"] = {
            "nick": nick, "roles": [], "user": user.wire(), "permissions": "0", "flags": 0,
            "joined_at": "2026-01-01T00:00:00+00:00", "deaf": False, "mute": False,
        }  # fmt: skip
    else:
        body["user"] = user.wire()
    body.update(extra)
    return body


def slash(name: str, **options: Any) -> dict[str, Any]:
    return {"type": 1, "name": name, "id": "1700000000000000001",
            "options": [{"name": k, "type": 3, "value": v} for k, v in options.items()]}  # fmt: skip


def press(custom_id: str) -> dict[str, Any]:
    return {"component_type": 2, "custom_id": custom_id}
