"""Approval prompts over /ws: prompt frames, button frames, re-sending open prompts after
``ready``, and bad button frames. A real in-process Gateway with the shell tool enabled,
a real SQLite file and real sockets."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from chatgate.app.gateway import Gateway
from support.web_harness import StartGateway, WebClient, of_type, web_config

Connect = Callable[[int], Awaitable[WebClient]]


async def tools_gateway(start_gateway: StartGateway, **approvals: Any) -> Gateway:
    gateway = await start_gateway(web_config(tools={"enabled": True}, approvals=approvals))
    assert gateway.port is not None
    return gateway


def is_prompt(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "prompt"


async def prompted(
    start_gateway: StartGateway, connect_client: Connect, chat: str
) -> tuple[Any, Any, dict[str, Any]]:
    """A tools-enabled gateway, Ann's client in ``chat``, and the prompt her dangerous call raised."""
    gateway = await tools_gateway(start_gateway)
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello(chat, "ann", user_name="Ann")
    await client.message("m1", "!sh rm -rf ./nothing")
    return gateway, client, (await client.until(is_prompt))[-1]


async def test_an_open_prompt_is_resent_after_ready_to_every_connection_that_says_hello(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway, first, shown = await prompted(start_gateway, connect_client, "chat-p")
    assert set(shown) == {"type", "prompt_id", "text", "options"}
    assert shown["options"] == [
        {"id": "once", "label": "Approve once"},
        {"id": "session", "label": "Approve for this session"},
        {"id": "always", "label": "Always approve"},
        {"id": "deny", "label": "Deny"},
    ]
    await first.close()

    later = await connect_client(gateway.port)
    await later.hello("chat-p", "ann", user_name="Ann")
    assert (await later.recv()) == shown  # right after ready: the prompt, exactly as shown before
    other_chat = await connect_client(gateway.port)
    await other_chat.hello("chat-other", "ann")
    assert of_type(await other_chat.sync(), "prompt") == []

    await later.send({"type": "button", "id": "t1", "prompt_id": shown["prompt_id"], "option_id": "deny"})
    frames = await later.until(lambda f: f.get("type") == "final")
    assert {"type": "ack", "id": "t1", "prompt_id": shown["prompt_id"], "duplicate": False} in frames
    resolved = of_type(frames, "prompt_resolved")
    assert resolved == [
        {
            "type": "prompt_resolved",
            "prompt_id": shown["prompt_id"],
            "outcome": "denied",
            "text": "Denied by Ann — not run.",
        }
    ]
    assert frames[-1]["text"].startswith("not run:")

    again = await connect_client(gateway.port)
    await again.hello("chat-p", "ann")
    assert of_type(await again.sync(), "prompt") == []  # answered: no longer re-sent


async def test_a_resent_tap_is_acknowledged_as_a_duplicate_and_changes_nothing(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    _, client, prompt = await prompted(start_gateway, connect_client, "chat-d")
    tap = {"type": "button", "id": "t1", "prompt_id": prompt["prompt_id"], "option_id": "once"}
    await client.send(tap)
    await client.until(lambda f: f.get("type") == "final")
    await client.send(tap)
    frames = await client.sync()
    assert {"type": "ack", "id": "t1", "prompt_id": prompt["prompt_id"], "duplicate": True} in frames
    assert of_type(frames, "prompt_resolved") == []  # a duplicate renders nothing


async def test_a_tap_on_an_unknown_prompt_says_it_is_not_open(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await tools_gateway(start_gateway)
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-u", "ann")
    await client.send({"type": "button", "id": "t1", "prompt_id": "abc.00000001", "option_id": "once"})
    frames = await client.sync()
    assert frames == [
        {"type": "ack", "id": "t1", "prompt_id": "abc.00000001", "duplicate": False},
        {
            "type": "prompt_resolved",
            "prompt_id": "abc.00000001",
            "outcome": "expired",
            "text": "This prompt is no longer open — not run.",
        },
    ]


async def test_bad_button_frames_get_structured_errors(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await tools_gateway(start_gateway)
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.send({"type": "button", "id": "early", "prompt_id": "a.1", "option_id": "once"})
    assert (await client.recv()) == {
        "type": "error",
        "code": "not_ready",
        "message": "send a hello frame first",
        "id": "early",
    }
    await client.hello("chat-b", "ann")
    bad = [
        {"type": "button", "id": "b1", "prompt_id": "a.1", "option_id": "yes"},
        {"type": "button", "id": "b2", "prompt_id": "has space", "option_id": "once"},
        {"type": "button", "id": "b3", "prompt_id": "x" * 49, "option_id": "once"},
        {"type": "button", "id": "b4", "option_id": "once"},
        {"type": "button", "id": "b5", "prompt_id": 7, "option_id": "once"},
    ]
    for frame in bad:
        await client.send(frame)
    errors = of_type(await client.sync(), "error")
    assert [(e["code"], e.get("id")) for e in errors] == [("invalid_frame", f"b{i}") for i in range(1, 6)]
