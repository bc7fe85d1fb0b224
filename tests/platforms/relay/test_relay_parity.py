"""Lane parity: a text message and an interaction from the same chat and user are one session
with one pinned context, across a restart and after a rename seen on another user's message."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from support.relay_harness import GW, RelayWorld

GUILD = "g1"
PARENT = "p1"


@dataclass(frozen=True)
class Chat:
    name: str
    chat_id: str
    chat_type: str
    channel_type: int
    guild: str | None
    parent: str | None = None

    @property
    def thread(self) -> str | None:
        return self.chat_id if self.chat_type == "thread" else None


CHATS = [
    Chat("dm", "dm1", "dm", 1, None),
    Chat("guild channel", "c1", "group", 0, GUILD),
    Chat("announcement thread", "t10", "thread", 10, GUILD, PARENT),
    Chat("public thread", "t11", "thread", 11, GUILD, PARENT),
    Chat("private thread", "t12", "thread", 12, GUILD, PARENT),
]


def text(
    chat: Chat, mid: str, body: str, *, user: str = "u1", name: str = "Ann", label: str = "#ops"
) -> dict[str, Any]:
    source: dict[str, Any] = {
        "platform": "discord",
        "chat_id": chat.chat_id,
        "chat_type": chat.chat_type,
        "user_id": user,
        "user_display_name": name,
        "user_name": name.lower(),
        "thread_id": chat.thread,
        "parent_chat_id": chat.parent,
        "chat_name": None if chat.chat_type == "dm" else f"Guild / {label}",
        "chat_topic": None if chat.chat_type == "dm" else "release talk",
    }
    if chat.guild:
        source["scope_id"] = chat.guild
    return {"text": body, "message_type": "text", "message_id": mid, "source": source}


def interaction(chat: Chat, iid: str, kind: int, data: dict[str, Any], **extra: Any) -> bytes:
    user = {"id": "u1", "username": "ann", "global_name": "Ann G"}
    channel: dict[str, Any] = {"id": chat.chat_id, "type": chat.channel_type, "name": "raw-channel-name"}
    if chat.parent:
        channel["parent_id"] = chat.parent
    body: dict[str, Any] = {
        "id": iid,
        "type": kind,
        "channel_id": chat.chat_id,
        "channel": channel,
        "data": data,
    }
    if chat.guild:
        body["guild_id"] = chat.guild
        body["member"] = {"nick": "Ann", "user": user}
    else:
        body["user"] = {**user, "global_name": "Ann"}
    body.update(extra)
    return json.dumps(body).encode()


def slash(chat: Chat, iid: str) -> bytes:
    return interaction(
        chat, iid, 2, {"type": 1, "name": "ask", "options": [{"name": "prompt", "type": 3, "value": "x"}]}
    )


def button(chat: Chat, iid: str) -> bytes:
    return interaction(chat, iid, 3, {"component_type": 2, "custom_id": "more"}, message={"id": f"bot-{iid}"})


async def _turns(world: RelayWorld, count: int) -> list[tuple[str, str]]:
    await world.wait_for(lambda: len(world.agent.requests) >= count, f"{count} turns")
    return [(r.session_key, r.system) for r in world.agent.requests]


@pytest.mark.parametrize("chat", CHATS, ids=[c.name for c in CHATS])
async def test_every_lane_keys_one_session_with_one_pinned_context(world: RelayWorld, chat: Chat) -> None:
    await world.start()
    await world.sim.wait_connected(GW, 10)
    await world.sim.inject_inbound(GW, text(chat, "m1", "first"))
    await _turns(world, 1)
    await world.sim.inject_passthrough(GW, slash(chat, "i1"))
    await _turns(world, 2)
    await world.sim.inject_passthrough(GW, button(chat, "i2"))
    await _turns(world, 3)
    await world.sim.inject_inbound(GW, text(chat, "m2", "second"))
    before = await _turns(world, 4)
    assert len({key for key, _ in before}) == 1, before
    assert len({system for _, system in before}) == 1, [s for _, s in before]
    if chat.chat_type != "dm":
        assert "Guild / #ops" in before[0][1] and "release talk" in before[0][1]
    assert "raw-channel-name" not in before[0][1]  # an interaction body's channel name is not a label

    await world.restart()
    await world.sim.wait_connected(GW, 10)
    await world.sim.inject_passthrough(GW, slash(chat, "i3"))  # no text since the restart
    after_restart = await _turns(world, 1)
    assert after_restart == [before[0]]

    if chat.chat_type == "dm":
        return
    # A rename seen on another user's message applies to the chat, so to u1's next interaction too.
    await world.sim.inject_inbound(GW, text(chat, "m3", "hi", user="u2", name="Bob", label="#renamed"))
    await _turns(world, 2)
    await world.sim.inject_passthrough(GW, slash(chat, "i4"))
    await world.sim.inject_inbound(GW, text(chat, "m4", "third", label="#renamed"))
    turns = await _turns(world, 4)
    renamed = [s for k, s in turns[1:] if k == before[0][0]]  # u1's session after u2's message
    assert len(renamed) == (3 if chat.chat_type == "thread" else 2)  # a thread is shared: u2's turn too
    assert len(set(renamed)) == 1 and "#renamed" in renamed[0] and "#ops" not in renamed[0]
