"""The relay's draft lane: Slack-shaped and Telegram-shaped chats behind one connector.

The decision is per chat from its platform's descriptor (LC-03): a Slack descriptor that
advertises ``supports_draft_streaming`` and the ``draft`` op gets one streamed message per
turn (LC-10), cumulative prefix-stable frames without a cursor (LC-13, LC-14, counted by the
simulator's ``rewrites``), the turn's final as the sealing ``draft(final=true)`` (LC-15) and
no separate send; a Telegram chat on the same connection gets a preview with a cursor and a
real final (LC-04). The flag without the op, or the op without the flag, is not enough
(LC-01, LC-02). Draft ids are integers below 2^53, one per turn (LC-31).
"""

from __future__ import annotations

from typing import Any

import pytest

from chatgate.domain.outbound import PREVIEW_CURSOR
from relaysim import RelaySimulator
from support.relay_harness import GW, SECRET, RelayWorld

OPS = ["send", "edit", "typing", "delete", "draft"]
TEXT = "a question whose answer streams long enough for several frames to go out"
PLATFORMS = [
    {"platform": "slack", "bot_id": "s1", "allow_all": True},
    {"platform": "telegram", "bot_id": "t1", "allow_all": True},
]


async def _world(world: RelayWorld, slack: dict[str, Any]) -> RelayWorld:
    await world.sim.stop()
    descriptors = [{"platform": "slack", **slack}, {"platform": "telegram", "supported_ops": OPS[:-1]}]
    world.sim = RelaySimulator(world.tmp / "relay-drafts.db", {GW: [SECRET]}, descriptors)
    await world.sim.start()
    world.agent = None
    world.extra = {"agent": {"echo": {"chunk_delay_ms": 100, "chunk_chars": 3}}}
    await world.start(platforms=PLATFORMS)
    await world.sim.wait_live(GW, 20)
    return world


def _message(platform: str, chat: str, text: str, mid: str) -> dict[str, Any]:
    source = {"platform": platform, "chat_id": chat, "chat_type": "group", "user_id": "u1", "scope_id": "T1"}
    return {"text": text, "message_id": mid, "source": source}


def _ops(world: RelayWorld, platform: str, op: str) -> list[dict[str, Any]]:
    return [o.action for o in world.sim.ops(GW) if o.platform == platform and o.op == op]


async def test_a_slack_shaped_chat_streams_one_sealed_message_and_a_telegram_chat_gets_a_real_final(
    world: RelayWorld,
) -> None:
    world = await _world(world, {"supports_draft_streaming": True, "supported_ops": OPS})
    await world.sim.inject_inbound(GW, _message("slack", "C1", TEXT, "m1"))
    await world.sim.inject_inbound(GW, _message("telegram", "-100", TEXT, "m2"))
    final = f"echo: {TEXT}"

    def shown(platform: str) -> list[Any]:
        return [m for m in world.sim.messages(GW) if m.platform == platform and not m.deleted]

    await world.wait_for(lambda: [m.content for m in shown("slack")] == [final], "the slack final", 60)
    await world.wait_for(lambda: [m.content for m in shown("telegram")] == [final], "the telegram final", 60)
    [stream] = shown("slack")
    assert stream.op == "draft" and not stream.streaming and stream.rewrites == 0
    drafts = _ops(world, "slack", "draft")
    assert len(drafts) >= 2 and [d["final"] for d in drafts] == [False] * (len(drafts) - 1) + [True]
    assert drafts[-1]["content"] == final and all(PREVIEW_CURSOR not in d["content"] for d in drafts)
    assert len({d["draft_id"] for d in drafts}) == 1 and 0 <= drafts[0]["draft_id"] < 2**53
    assert all(d["metadata"].get("reply_to_message_id") == "m1" for d in drafts)
    assert not _ops(world, "slack", "send") and not _ops(world, "slack", "edit")
    assert not _ops(world, "telegram", "draft")
    assert _ops(world, "telegram", "send")[0]["content"].endswith(PREVIEW_CURSOR)

    await world.sim.inject_inbound(GW, _message("slack", "C1", TEXT + " again", "m3"))
    await world.wait_for(lambda: len(shown("slack")) == 2, "the second turn's stream", 60)
    ids = {d["draft_id"] for d in _ops(world, "slack", "draft")}
    assert len(ids) == 2, "a new turn reused a sealed draft id"


@pytest.mark.parametrize(
    "slack",
    [{"supports_draft_streaming": True, "supported_ops": OPS[:-1]}, {"supported_ops": OPS}],
    ids=["flag-without-op", "op-without-flag"],
)
async def test_the_flag_or_the_op_alone_keeps_edited_previews(
    world: RelayWorld, slack: dict[str, Any]
) -> None:
    world = await _world(world, slack)
    await world.sim.inject_inbound(GW, _message("slack", "C2", TEXT, "m1"))
    final = f"echo: {TEXT}"
    await world.wait_for(
        lambda: [m.content for m in world.sim.messages(GW) if not m.deleted] == [final], "the final", 60
    )
    assert not _ops(world, "slack", "draft")


async def test_a_tool_call_is_a_task_card_only_where_the_descriptor_advertises_it(world: RelayWorld) -> None:
    """LC-05..09: the card shows the tool call in progress, then complete, and the turn's end
    stops the same card id; a chat whose descriptor lacks the op gets no card at all."""
    await world.sim.stop()
    card_ops = [*OPS, "task_card", "task_card_stop"]
    descriptors = [
        {"platform": "slack", "supports_draft_streaming": True, "supported_ops": card_ops},
        {"platform": "telegram", "supported_ops": OPS[:-1]},
    ]
    world.sim = RelaySimulator(world.tmp / "relay-cards.db", {GW: [SECRET]}, descriptors)
    await world.sim.start()
    world.agent = None
    (world.tmp / "work").mkdir()
    world.extra = {
        "agent": {"echo": {"chunk_delay_ms": 0}},
        "tools": {"enabled": True, "workdir": str(world.tmp / "work")},
    }
    await world.start(platforms=PLATFORMS)
    await world.sim.wait_live(GW, 20)
    await world.sim.inject_inbound(GW, _message("slack", "C3", "!sh echo hi", "m1"))
    await world.sim.inject_inbound(GW, _message("telegram", "-200", "!sh echo hi", "m2"))
    await world.wait_for(lambda: _ops(world, "slack", "task_card_stop"), "the card's stop", 60)
    await world.wait_for(lambda: _ops(world, "telegram", "send"), "the telegram reply", 60)
    cards = _ops(world, "slack", "task_card")
    assert [c["chunks"][0]["status"] for c in cards] == ["in_progress", "complete"]
    assert cards[0]["chunks"][0]["title"] == "shell"
    [stop] = _ops(world, "slack", "task_card_stop")
    assert {c["card_id"] for c in cards} == {stop["card_id"]}
    [card] = [m for m in world.sim.messages(GW) if m.op == "task_card"]
    assert not card.streaming and card.content == "shell:complete"
    assert not _ops(world, "telegram", "task_card") and not _ops(world, "telegram", "task_card_stop")
