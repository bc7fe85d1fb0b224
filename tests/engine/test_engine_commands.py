"""Control commands are answered inline, never queued behind a turn; the interrupt busy policy."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from support.engine_harness import Harness, MakeHarness

    Wait = Callable[..., Awaitable[Any]]


async def command_replies(h: Harness, count: int, wait: Wait) -> list[str]:
    await wait(lambda: len(h.adapter.rows("c1", ["command"])) >= count, message=f"{count} command replies")
    return [r.text for r in h.adapter.rows("c1", ["command"])]


async def start_long_turn_with_queue(h: Harness, wait: Wait, queued: int) -> None:
    """A turn of 'long' that runs until released, with ``queued`` messages waiting behind it."""
    h.agent.hold("long")
    await h.send("long", delivery_id="long")
    for i in range(queued):
        await h.send(f"q{i}", delivery_id=f"q{i}")
    await wait(lambda: h.agent.running("long"), message="the long turn running")


async def test_status_is_answered_while_the_sessions_turn_is_still_running(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness()
    gate = h.agent.hold("long")
    await h.send("long", delivery_id="long")
    await wait(lambda: h.agent.running("long"))

    status = await h.send("/status", delivery_id="status-1")
    (reply,) = await command_replies(h, 1, wait)

    assert h.agent.running("long") and not gate.is_set(), "answered while the turn is blocked"
    assert status.session_key in reply
    assert "State: running a reply" in reply
    assert h.inbox("status-1") == ("done", 0, "command"), "a command is never queued"
    gate.set()
    assert await h.finals("c1", 1) == ["echo: long"]
    assert [r.kind for r in h.adapter.rows("c1")] == ["command", "final"]
    assert not h.agent.turns_with("/status")


async def test_status_counts_only_the_messages_waiting_behind_the_running_turn(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness()
    await start_long_turn_with_queue(h, wait, queued=1)
    await h.send("/status")
    (reply,) = await command_replies(h, 1, wait)
    assert "Waiting messages: 1" in reply, reply


async def test_stop_cancels_the_running_turn_and_drops_the_queued_messages_without_finals(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness()
    await start_long_turn_with_queue(h, wait, queued=2)

    stop = await h.send("/stop", delivery_id="stop-1")
    assert stop.new
    (reply,) = await command_replies(h, 1, wait)
    assert reply.startswith("Stopped.")
    await wait(lambda: h.agent.turns_with("long")[0].state == "cancelled", message="long turn cancelled")
    assert [h.inbox(d)[0] for d in ("long", "q0", "q1")] == ["cancelled"] * 3
    assert h.inbox("stop-1") == ("done", 0, "command")

    # The session keeps working; nothing of the dropped messages is ever answered.
    await h.send("after")
    assert await h.finals("c1", 1) == ["echo: after"]
    assert [r.kind for r in h.adapter.rows("c1")] == ["command", "final"]
    assert not h.agent.turns_with("q0") and not h.agent.turns_with("q1")
    assert len(h.agent.turns_with("long")) == 1


def dropped(reply: str) -> int | None:
    found = re.search(r"Dropped (\d+) waiting message", reply)
    return int(found.group(1)) if found else None


@pytest.mark.parametrize("command", ["/stop", "/new"])
async def test_stop_and_new_replies_say_how_many_waiting_messages_were_dropped(
    make_harness: MakeHarness, wait: Wait, command: str
) -> None:
    h = await make_harness()
    await start_long_turn_with_queue(h, wait, queued=2)
    await h.send(command)
    (reply,) = await command_replies(h, 1, wait)
    assert "{" not in reply
    assert dropped(reply) == 2, reply  # q0 and q1 waited; 'long' was running, not waiting


async def test_new_cancels_the_turn_drops_the_queue_and_the_next_turn_has_no_old_history(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness()
    first = await h.send("remember me")
    await h.finals("c1", 1)
    await start_long_turn_with_queue(h, wait, queued=1)
    long_request = h.agent.turns_with("long")[0].request
    assert [e.content for e in long_request.history] == ["remember me", "echo: remember me"]
    before = await h.store.session_info(first.session_key)

    await h.send("/new", delivery_id="new-1")
    (reply,) = await command_replies(h, 1, wait)
    assert reply.startswith("Started a new conversation.")
    await wait(lambda: h.agent.turns_with("long")[0].state == "cancelled", message="long turn cancelled")
    assert h.inbox("long")[0] == "cancelled" and h.inbox("q0")[0] == "cancelled"
    after = await h.store.session_info(first.session_key)
    assert before is not None and after is not None
    assert after.session_id != before.session_id, "the session id rotated"

    await h.send("fresh")
    assert await h.finals("c1", 2) == ["echo: remember me", "echo: fresh"]
    assert h.agent.turns_with("fresh")[0].request.history == ()
    await h.send("again")
    await h.finals("c1", 3)
    assert [e.content for e in h.agent.turns_with("again")[0].request.history] == ["fresh", "echo: fresh"]
    assert not h.agent.turns_with("q0")


async def test_help_lists_the_commands_and_runs_no_turn(make_harness: MakeHarness, wait: Wait) -> None:
    h = await make_harness()
    await h.send("/help", delivery_id="help-1")
    (reply,) = await command_replies(h, 1, wait)
    for name in ("/help", "/new", "/stop", "/status"):
        assert name in reply
    assert h.inbox("help-1") == ("done", 0, "command")
    await h.send("sentinel")
    await h.finals("c1", 1)
    assert [t.texts for t in h.agent.turns] == [("sentinel",)]


async def test_a_redelivered_stop_is_answered_once_and_does_not_stop_anything_again(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness()
    first = await h.send("/stop", delivery_id="stop-1")
    await command_replies(h, 1, wait)
    gate = h.agent.hold("long")
    await h.send("long", delivery_id="long")
    await h.send("q0", delivery_id="q0")
    await wait(lambda: h.agent.running("long"))

    again = await h.send("/stop", delivery_id="stop-1")

    assert first.new is True and again.new is False and again.seq == first.seq
    assert h.inbox("long")[0] == "queued" and h.inbox("q0")[0] == "queued"
    gate.set()
    assert await h.finals("c1", 2) == ["echo: long", "echo: q0"]
    assert [t.state for t in h.agent.turns_with("long")] == ["done"], "the running turn was not cancelled"
    assert len(h.adapter.rows("c1", ["command"])) == 1
    assert h.query("SELECT COUNT(*) FROM outbox WHERE kind = 'command'") == [(1,)]


async def test_interrupt_policy_cancels_the_running_turn_and_answers_both_messages_in_one_turn(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(scheduler={"busy_policy": "interrupt"})
    h.agent.hold("first")
    await h.send("first", delivery_id="first")
    await wait(lambda: h.agent.running("first"))

    await h.send("second", delivery_id="second")

    assert await h.finals("c1", 1) == ["echo: first\nsecond"]
    turns = h.agent.turns
    assert [t.state for t in turns] == ["cancelled", "done"]
    assert turns[1].texts == ("first", "second")
    assert "first" in turns[1].request.model_input and "second" in turns[1].request.model_input
    assert h.inbox("first") == ("done", 1, "ok") and h.inbox("second") == ("done", 1, "ok")
    await h.send("third")
    assert await h.finals("c1", 2) == ["echo: first\nsecond", "echo: third"]
    assert h.query("SELECT COUNT(*) FROM outbox WHERE kind = 'final'") == [(2,)]
