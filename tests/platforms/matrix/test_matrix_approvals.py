"""Approval prompts on Matrix: a message with the bot's reactions under it, answered by a
person's reaction (resolved first, then rendered: the prompt is edited into its recorded
outcome) or by ``/approve`` in reply to it; a stale reaction (on an answered or expired
prompt) runs nothing and is told so in place."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from matrix.client import Person, Shown, shown_by
from matrix.conftest import Gateways
from matrix.harness import People, joined, matrix_config, wait_for

pytestmark = pytest.mark.slow
PROMPT_KEY = "org.chatgate.prompt"


def _states(db: Path) -> list[tuple[str, str | None]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT state, tier FROM approvals ORDER BY requested_at").fetchall()
    finally:
        conn.close()


async def _prompts(person: Person, room: str, bot_id: str) -> list[Shown]:
    return [s for s in shown_by(await person.events(room), bot_id) if PROMPT_KEY in s.content]


async def _reactions(person: Person, room: str, event_id: str, sender: str) -> set[str]:
    found = set()
    for event in await person.events(room):
        rel = (event.get("content") or {}).get("m.relates_to") or {}
        if (
            event.get("type") == "m.reaction"
            and event.get("sender") == sender
            and rel.get("event_id") == event_id
        ):
            found.add(rel.get("key"))
    return found


async def _notices(person: Person, room: str, bot_id: str, about: str) -> list[dict[str, Any]]:
    return [
        e for e in await person.events(room)
        if e.get("sender") == bot_id and (e.get("content") or {}).get("msgtype") == "m.notice"
        and ((e["content"].get("m.relates_to") or {}).get("m.in_reply_to") or {}).get("event_id") == about
    ]  # fmt: skip


def _config(people: People, bot: Any, tmp_path: Path, workdir: Path, timeout: int) -> dict[str, Any]:
    return matrix_config(
        people.server, bot, tmp_path,
        tools={"enabled": True, "workdir": str(workdir)}, approvals={"timeout_seconds": timeout},
    )  # fmt: skip


async def test_a_reaction_approves_a_second_reaction_is_refused_and_a_reply_command_approves(
    people: People, gateways: Gateways, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    (workdir / "x").mkdir(parents=True)
    (workdir / "y").mkdir()
    bot, ann = people.account("bot"), people.person("ann")
    gateway = await gateways.start(_config(people, bot, tmp_path, workdir, 60), bot)
    room = await ann.create_room(invite=[bot.user_id], direct=True)
    await joined(ann, room, bot.user_id)

    await ann.say(room, "!sh rm -rf ./x")
    [prompt] = await wait_for(lambda: _prompts(ann, room, bot.user_id), 30, "the prompt")
    assert "rm -rf ./x" in prompt.text and "React:" in prompt.text

    async def offered() -> bool:
        return {"✅", "❌"} <= await _reactions(ann, room, prompt.event_id, bot.user_id)

    await wait_for(offered, 30, "the bot's reactions under the prompt (approve, deny)")
    assert (workdir / "x").exists()

    await ann.react(room, prompt.event_id, "✅")
    await wait_for(lambda: not (workdir / "x").exists(), 30, "the approved command to run")

    async def resolved() -> bool:
        [now] = await _prompts(ann, room, bot.user_id)
        return now.text.startswith("Approved")

    await wait_for(resolved, 30, "the prompt edited into its outcome")
    assert _states(gateway.state_dir / "chatgate.db") == [("approved", "once")]

    late = await ann.react(room, prompt.event_id, "❌")  # a tap on a prompt already answered
    [told] = await wait_for(
        lambda: _notices(ann, room, bot.user_id, prompt.event_id), 30, "the late tap told"
    )
    assert "Already answered" in told["content"]["body"], told
    assert _states(gateway.state_dir / "chatgate.db") == [("approved", "once")]
    assert late

    await ann.say(room, "!sh rm -rf ./y")
    prompts = await wait_for(lambda: _atleast(_prompts(ann, room, bot.user_id), 2), 30, "the second prompt")
    await ann.say(room, "/approve", reply_to=prompts[1].event_id)
    await wait_for(lambda: not (workdir / "y").exists(), 30, "the command approved by /approve")
    assert _states(gateway.state_dir / "chatgate.db") == [("approved", "once"), ("approved", "once")]


async def _atleast(found: Any, count: int) -> Any:
    items = await found
    return items if len(items) >= count else None


async def test_a_reaction_on_an_expired_prompt_runs_nothing_and_says_expired(
    people: People, gateways: Gateways, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    (workdir / "x").mkdir(parents=True)
    bot, ann = people.account("bot"), people.person("ann")
    gateway = await gateways.start(_config(people, bot, tmp_path, workdir, 1), bot)
    room = await ann.create_room(invite=[bot.user_id], direct=True)
    await joined(ann, room, bot.user_id)
    await ann.say(room, "!sh rm -rf ./x")
    [prompt] = await wait_for(lambda: _prompts(ann, room, bot.user_id), 30, "the prompt")

    async def expired() -> bool:
        [now] = await _prompts(ann, room, bot.user_id)
        return now.text.startswith("Expired")

    await wait_for(expired, 30, "the prompt to expire")
    await ann.react(room, prompt.event_id, "✅")
    [told] = await wait_for(
        lambda: _notices(ann, room, bot.user_id, prompt.event_id), 30, "the stale tap told"
    )
    assert "Expired" in told["content"]["body"] and "not run" in told["content"]["body"], told
    assert (workdir / "x").exists()
    assert _states(gateway.state_dir / "chatgate.db") == [("expired", None)]
