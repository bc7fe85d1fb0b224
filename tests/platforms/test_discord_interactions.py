"""Interactions on the fake Discord: slash commands registered once, every shape reaching the agent
through the relay's decoder, deferred and answered by follow-up, or in the channel once the token died."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from discord_fake.harness import (
    ANN,
    GUILD_ID,
    World,
    connected,
    discord_config,
    echo_of,
    fake,
    inbox,
    interaction_body,
    press,
    run,
    slash,
    wait_for,
    world,
)
from discord_fake.server import FakeDiscord

from chatgate.domain.commands import CONTROL_COMMANDS
from chatgate.platforms.discord.commands import desired_commands

__all__ = ["fake", "run", "world"]
DEFERRED = {"type": 5}


async def test_slash_commands_are_registered_from_the_control_table_and_not_again_when_unchanged(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    config = discord_config(fake, world, tmp_path)
    gateway = await run(config)
    await connected(fake)
    (put,) = fake.of("PUT", f"/guilds/{GUILD_ID}/commands")
    registered = {c["name"]: c for c in put.body if c["type"] == 1}
    assert set(registered) == {"ask", *(c.name for c in CONTROL_COMMANDS)}
    assert [(o["name"], o["type"], o["required"]) for o in registered["ask"]["options"]] == [
        ("prompt", 3, True)
    ]
    assert [o["name"] for o in registered["remind"]["options"]] == ["when", "prompt"]
    assert [o["name"] for o in registered["every"]["options"]] == ["schedule", "prompt"]
    assert [o["name"] for o in registered["bg"]["options"]] == ["prompt"]
    assert [o["name"] for o in registered["cancel"]["options"]] == ["id"]
    assert put.body == desired_commands() and "options" not in registered["stop"]
    await gateway.stop()
    await run(config)
    await wait_for(lambda: len(fake.of("GET", f"/guilds/{GUILD_ID}/commands")) == 2, 30, "the second look")
    await wait_for(lambda: fake.gateway.identifies == 2, 30, "the second IDENTIFY")
    assert len(fake.of("PUT", f"/guilds/{GUILD_ID}/commands")) == 1


async def test_a_slash_command_is_deferred_and_answered_by_follow_up(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    sent = await fake.interact(
        interaction_body(world.general, ANN, 2, slash("ask", prompt="why?"), nick="Annie")
    )
    await wait_for(lambda: fake.of("POST", "/webhooks/"), 30, "the follow-up")
    assert fake.interaction_responses[sent["id"]] == [DEFERRED]
    (follow_up,) = fake.of("POST", "/webhooks/")
    assert follow_up.body["content"] == echo_of("why?") and follow_up.status == 200
    (row,) = inbox(tmp_path)
    assert (
        row["text"] == "why?"
        and row["kind"] == "text"
        and row["action_id"] == sent["id"]
        and row["transport"] == "discord"
    )
    assert row["session_key"] == f"agent:main:discord:group:{world.general.id}:{ANN.id}"


async def test_an_expired_token_falls_back_to_a_channel_message(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    config = discord_config(fake, world, tmp_path, agent={"echo": {"chunk_delay_ms": 300}})
    await run(config)
    await connected(fake)
    sent = await fake.interact(interaction_body(world.free, ANN, 2, slash("ask", prompt="slow")))
    await wait_for(lambda: sent["id"] in fake.interaction_responses, 30, "the deferral")
    fake.expire(sent["token"])  # the 15 minutes are over before the answer is ready
    await wait_for(lambda: fake.view(world.free.id), 60, "the answer in the channel")
    assert [m.content for m in fake.view(world.free.id)] == [echo_of("slow")]
    assert [c.status for c in fake.of("POST", "/webhooks/")] == [401]


async def test_control_commands_answer_by_follow_up(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    await fake.interact(interaction_body(world.dm, ANN, 2, slash("status")))
    await wait_for(lambda: fake.of("POST", "/webhooks/"), 30, "the /status reply")
    (reply,) = fake.of("POST", "/webhooks/")
    assert f"agent:main:discord:dm:{world.dm.id}" in reply.body["content"]


async def test_every_component_and_modal_shape_reaches_the_agent_whole(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    bot_message = {"id": "1800000000000000001"}
    bodies = [
        interaction_body(world.free, ANN, 3, press("more"), message=bot_message),
        interaction_body(
            world.free,
            ANN,
            3,
            {"component_type": 3, "custom_id": "pick", "values": ["a", "b"]},
            message=bot_message,
        ),
        interaction_body(
            world.free,
            ANN,
            5,
            {
                "custom_id": "form",
                "components": [
                    {"type": 1, "components": [{"type": 4, "custom_id": "name", "value": "Zoë"}]},
                    {
                        "type": 18,
                        "label": "Notes",
                        "component": {"type": 4, "custom_id": "notes", "value": ""},
                    },
                ],
            },
        ),
        interaction_body(
            world.free,
            ANN,
            2,
            {"type": 2, "name": "Who", "target_id": ANN.id, "resolved": {"users": {ANN.id: ANN.wire()}}},
        ),
        interaction_body(
            world.free,
            ANN,
            2,
            {
                "type": 3,
                "name": "Ask the agent",
                "target_id": "1800000000000000002",
                "resolved": {
                    "messages": {
                        "1800000000000000002": {
                            "id": "1800000000000000002",
                            "content": "quoted words",
                            "author": ANN.wire(),
                        }
                    }
                },
            },
        ),
    ]
    for body in bodies:
        await fake.interact(body)
    await wait_for(lambda: len(fake.of("POST", "/webhooks/")) == 5, 60, "five follow-ups")
    rows = inbox(tmp_path)
    assert [r["kind"] for r in rows] == ["button", "select", "modal", "context_menu", "context_menu"]
    assert rows[0]["message_ref"] == bot_message["id"] and rows[0]["text"] == "more"
    assert rows[1]["payload"]["values"] == ["a", "b"]
    assert rows[2]["text"] == "form\nname: Zoë\nnotes: (empty)"
    assert rows[2]["payload"]["fields"][1] == {"id": "notes", "type": 4, "label": "Notes", "value": ""}
    assert rows[3]["payload"]["target"]["id"] == ANN.id
    assert rows[4]["reply_to"] == "1800000000000000002" and "quoted words" in rows[4]["text"]
    assert len({r["session_key"] for r in rows}) == 1


async def test_an_unsupported_interaction_is_told_and_recorded(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    sent = await fake.interact(interaction_body(world.free, ANN, 3, {"component_type": 99, "custom_id": "x"}))
    await wait_for(lambda: sent["id"] in fake.interaction_responses, 30, "the answer")
    (answer,) = fake.interaction_responses[sent["id"]]
    assert (
        answer["type"] == 4
        and answer["data"]["flags"] == 64
        and "component type 99" in answer["data"]["content"]
    )
    assert inbox(tmp_path) == []


async def test_a_bad_option_value_gets_an_ephemeral_error_and_nothing_is_stored(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    await run(discord_config(fake, world, tmp_path))
    await connected(fake)
    first = await fake.interact(
        interaction_body(world.free, ANN, 2, slash("remind", when="soonish", prompt="tea"))
    )
    await wait_for(lambda: first["id"] in fake.interaction_responses, 30, "the first answer")
    (answer,) = fake.interaction_responses[first["id"]]
    assert answer["type"] == 4 and answer["data"]["flags"] == 64
    assert "/remind when: 'soonish' is not a duration" in answer["data"]["content"]
    # Back to back, the second may be deferred while the first is admitted: then it is told by
    # an ephemeral follow-up (Discord refuses a second callback), never twice, never silently.
    bad = [slash("ask", prompt="   "), slash("cancel", id="a b")]
    sent = [await fake.interact(interaction_body(world.free, ANN, 2, data)) for data in bad]

    def told(interaction: dict[str, Any]) -> list[str]:
        answers = fake.interaction_responses.get(interaction["id"], [])
        said = [a["data"]["content"] for a in answers if a["type"] == 4 and a["data"]["flags"] == 64]
        followed = [c.body for c in fake.of("POST", f"/{interaction['token']}")]
        said += [b["content"] for b in followed if b.get("flags") == 64]
        return said

    await wait_for(lambda: all(told(i) for i in sent), 30, "both answers")
    assert [len(told(i)) for i in sent] == [1, 1]
    assert "/ask prompt: say what to ask" in told(sent[0])[0]
    assert "/cancel id: 'a b' must be one word" in told(sent[1])[0]
    assert inbox(tmp_path) == []


async def test_an_approval_prompt_has_hp1_buttons_and_a_press_resolves_it_by_edit(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    (workdir / "x").mkdir(parents=True)
    config = discord_config(
        fake,
        world,
        tmp_path,
        tools={"enabled": True, "workdir": str(workdir)},
        approvals={"timeout_seconds": 60},
    )
    await run(config)
    await connected(fake)
    await fake.post(world.free, ANN, "!sh rm -rf ./x")
    await wait_for(lambda: any(m.components for m in fake.view(world.free.id)), 60, "the prompt")
    (prompt,) = [m for m in fake.view(world.free.id) if m.components]
    buttons = [b for row in prompt.components for b in row["components"]]
    tokens = [b["custom_id"] for b in buttons]
    assert all(t.startswith("hp1:") for t in tokens) and any(t.endswith(":deny") for t in tokens)
    once = next(t for t in tokens if t.endswith(":once"))
    pressed = await fake.interact(interaction_body(world.free, ANN, 3, press(once), message=prompt.wire()))
    await wait_for(lambda: not (workdir / "x").exists(), 60, "the approved command to run")
    await wait_for(lambda: not prompt.components, 30, "the buttons to go")
    assert "Approved" in prompt.content
    assert fake.interaction_responses[pressed["id"]] == [{"type": 6}]  # a silent update: the edit says it
    late = await fake.interact(interaction_body(world.free, ANN, 3, press(once), message=prompt.wire()))
    await wait_for(lambda: late["id"] in fake.interaction_responses, 30, "the late press's answer")
    (told,) = fake.interaction_responses[late["id"]]
    assert told["type"] == 4 and told["data"]["flags"] == 64 and told["data"]["content"]


async def test_an_interaction_behind_a_long_catch_up_is_deferred_at_once_and_answered_after_it(
    fake: FakeDiscord, world: World, run: Any, tmp_path: Path
) -> None:
    config = discord_config(fake, world, tmp_path)
    gateway = await run(config)
    await connected(fake)
    await fake.post(world.free, ANN, "before")
    await wait_for(lambda: fake.view(world.free.id), 30, "the first reply")
    await gateway.stop()
    fake.gateway.forget_sessions()
    await fake.post(world.free, ANN, "while down")
    fake.history_delay = 5.0  # reading the channel back takes longer than Discord's 3 seconds
    await run(config)
    await wait_for(lambda: fake.of("GET", "/messages?after="), 60, "the catch-up read")
    sent = await fake.interact(interaction_body(world.free, ANN, 2, slash("ask", prompt="now")))
    await wait_for(lambda: sent["id"] in fake.interaction_responses, 30, "the deferral")
    assert fake.of("GET", "/messages?after=")[0].status == 0  # still reading: deferred ahead of its turn
    await wait_for(lambda: fake.of("POST", "/webhooks/"), 60, "the follow-up")
    assert fake.interaction_responses[sent["id"]] == [DEFERRED]
    # The follow-up shows in the channel too, after the caught-up reply.
    assert [m.content for m in fake.view(world.free.id)] == [
        echo_of("before"),
        echo_of("while down"),
        echo_of("now"),
    ]
    (follow_up,) = fake.of("POST", "/webhooks/")
    assert follow_up.body["content"] == echo_of("now")
    rows = inbox(tmp_path)
    assert [r["text"] for r in rows] == ["before", "while down", "now"]  # its place kept
