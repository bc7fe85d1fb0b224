"""Approval prompts over the relay: the `prompt` op with hp1 tokens, answered by a Discord
button press or by a text-lane `prompt_response`, resolved first and rendered as recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chatgate.domain.prompts import MAX_TOKEN_BYTES, PROMPT_ID_RE, prompt_token
from relaysim import RelaySimulator
from support.relay_harness import GW, SECRET, RelayWorld

OPS = ["send", "edit", "typing", "follow_up", "prompt"]


@pytest.fixture
async def approvals_world(world: RelayWorld) -> RelayWorld:
    await world.sim.stop()
    world.sim = RelaySimulator(
        world.tmp / "relay-prompts.db", {GW: [SECRET]}, [{"platform": "discord", "supported_ops": OPS}]
    )
    await world.sim.start()
    world.agent = None  # the configured echo agent: `!sh <command>` calls the shell tool
    world.extra = {
        "agent": {"echo": {"chunk_delay_ms": 0}},
        "tools": {"enabled": True, "workdir": str(world.tmp / "work")},
        "approvals": {"timeout_seconds": 30},
    }
    (world.tmp / "work").mkdir()
    return world


def dm_text(text: str, mid: str, **extra: Any) -> dict[str, Any]:
    source = {"platform": "discord", "chat_id": "dm1", "chat_type": "dm", "user_id": "u1", "user_name": "Ann"}
    return {"text": text, "message_id": mid, "source": source, **extra}


def press(token: str, iid: str, message_id: str | None) -> bytes:
    body = {
        "id": iid,
        "type": 3,
        "channel_id": "dm1",
        "channel": {"id": "dm1", "type": 1},
        "user": {"id": "u1", "username": "ann", "global_name": "Ann"},
        "message": {"id": message_id or "unknown"},
        "data": {"component_type": 2, "custom_id": token},
    }
    return json.dumps(body).encode()


def target(world: RelayWorld) -> Path:
    path = world.tmp / "work" / "x"
    path.mkdir(exist_ok=True)
    return path


async def test_a_prompt_op_carries_valid_tokens_and_a_button_press_resolves_it(
    approvals_world: RelayWorld,
) -> None:
    world = approvals_world
    victim = target(world)
    await world.start()
    await world.sim.wait_connected(GW, 10)
    await world.sim.inject_inbound(GW, dm_text("!sh rm -rf ./x", "m1"))
    [prompt] = await world.wait_ops("prompt", 1)
    assert PROMPT_ID_RE.fullmatch(prompt["prompt_id"])
    assert prompt["chat_id"] == "dm1" and "rm -rf ./x" in prompt["content"]
    option_ids = [o["id"] for o in prompt["options"]]
    assert "once" in option_ids and "deny" in option_ids
    for option in option_ids:
        assert len(prompt_token(prompt["prompt_id"], option).encode()) <= MAX_TOKEN_BYTES
    assert victim.exists()  # nothing runs while the prompt is open
    prompt_message = next(o for o in world.sim.ops(GW) if o.op == "prompt").result
    message_id = prompt_message.get("message_id") if prompt_message else None

    await world.sim.inject_passthrough(GW, press(prompt_token(prompt["prompt_id"], "once"), "i1", message_id))
    await world.wait_for(lambda: not victim.exists(), "the approved command to run")
    edits = await world.wait_for(
        lambda: [a for a in world.ops("edit") if "Approved" in a.get("content", "")], "the resolved prompt"
    )
    assert "Ann" in edits[0]["content"]
    sent = await world.wait_for(
        # the reply edits the preview that showed the tool's status line (or is sent, if none)
        lambda: [a for a in world.ops("send") + world.ops("edit") if "exit code 0" in a.get("content", "")],
        "reply",
    )
    assert sent
    assert world.query("SELECT state, tier FROM approvals") == [("approved", "once")]


async def test_a_text_lane_prompt_response_denies_and_the_command_does_not_run(
    approvals_world: RelayWorld,
) -> None:
    world = approvals_world
    victim = target(world)
    await world.start()
    await world.sim.wait_connected(GW, 10)
    await world.sim.inject_inbound(GW, dm_text("!sh rm -rf ./x", "m1"))
    [prompt] = await world.wait_ops("prompt", 1)
    answer = dm_text(
        "/deny",
        "m2",
        message_type="command",
        prompt_response={"prompt_id": prompt["prompt_id"], "option_id": "deny", "label": "Deny"},
    )
    await world.sim.inject_inbound(GW, answer)
    reply = await world.wait_for(
        lambda: [
            a for a in world.ops("send") + world.ops("edit") if "not run" in a.get("content", "").lower()
        ],
        "the denial reply",
    )
    assert reply and victim.exists()
    assert world.query("SELECT state FROM approvals") == [("denied",)]
    # The reply may be the preview's tool status line: wait for the turn to commit.
    await world.wait_for(lambda: not world.query("SELECT seq FROM inbox WHERE status = 'queued'"), "the turn")
    # The answer was a command, answered at admission: never queued as a message, never a turn.
    assert world.query("SELECT seq, status, outcome FROM inbox") == [
        (1, "done", "ok"),
        (2, "done", "command"),
    ]
