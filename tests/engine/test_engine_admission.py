"""Admission authorizes and bounds input before anything is stored; the pinned context is stable."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from chatgate.domain.inbound import MAX_TEXT_CHARS
from chatgate.engine.authz import PlatformAccess
from chatgate.engine.intake import AdmissionRefused

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from support.engine_harness import Harness, MakeHarness

    Wait = Callable[..., Awaitable[Any]]

TABLES = ("inbox", "sessions", "outbox", "chat_labels", "transcript")


def stored_rows(h: Harness) -> dict[str, int]:
    return {table: h.query(f"SELECT COUNT(*) FROM {table}")[0][0] for table in TABLES}


NOTHING = dict.fromkeys(TABLES, 0)


async def test_a_platform_without_rules_is_refused_as_unauthorized_and_nothing_is_stored(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness()  # rules exist for platform "test" only
    for text in ("hello", "/stop", "/status"):
        with pytest.raises(AdmissionRefused) as refused:
            await h.send(text, platform="other", chat_name="General", chat_type="group")
        assert refused.value.code == "unauthorized"

    assert stored_rows(h) == NOTHING
    assert h.metric("chatgate_refused_total", platform="other", code="unauthorized") == 3
    assert h.metric("chatgate_admitted_total", platform="other") == 0


async def test_an_allowlisted_user_is_admitted_and_answered_and_others_are_refused(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(rules={"test": PlatformAccess(allow_users=frozenset({"alice"}))})
    gate = h.agent.hold("hi")
    admitted = await h.send("hi", user_id="alice", chat_id="shared", delivery_id="alice-1")
    assert admitted.new
    await wait(lambda: h.agent.running("hi"))

    for user in ("mallory", None):
        for text in ("hi", "/stop", "/new"):
            with pytest.raises(AdmissionRefused) as refused:
                await h.send(text, user_id=user, chat_id="shared")
            assert refused.value.code == "unauthorized"
    assert h.agent.running("hi"), "a refused /stop stops nothing"

    gate.set()
    assert await h.finals("shared", 1) == ["echo: hi"]
    assert h.query("SELECT delivery_id FROM inbox") == [("alice-1",)]
    assert h.adapter.rows(kinds=["command"]) == []


async def test_text_over_the_limit_is_refused_as_too_large_and_the_limit_itself_is_admitted(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness(agent="echo")
    with pytest.raises(AdmissionRefused) as refused:
        await h.send("x" * (MAX_TEXT_CHARS + 1))
    assert refused.value.code == "too_large"
    assert stored_rows(h) == NOTHING
    assert h.metric("chatgate_refused_total", platform="test", code="too_large") == 1

    at_limit = "y" * MAX_TEXT_CHARS
    assert (await h.send(at_limit)).new
    # The reply is longer than the platform's 4096-character limit: it arrives in ordered parts.
    expected = f"echo: {at_limit}"
    parts = -(-len(expected) // 4096)
    assert "".join(await h.finals("c1", parts)) == expected


GROUP: dict[str, Any] = {"chat_id": "g1", "chat_type": "group", "user_id": "u1", "user_name": "Ann"}


async def test_the_pinned_system_prompt_is_byte_identical_across_turns_of_a_session(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness()
    await h.send("one", chat_name="Team", **GROUP)
    await h.finals("g1", 1)
    await h.send("two", chat_name="Team", **GROUP)
    await h.finals("g1", 2)
    await h.send("three", **GROUP)  # a lane that carries no chat label (a button, a command)
    await h.finals("g1", 3)

    systems = [t.request.system for t in h.agent.turns]
    assert len(systems) == 3
    assert systems[0].encode() == systems[1].encode() == systems[2].encode()
    assert "Team" in systems[0]
    assert len({t.request.model_input for t in h.agent.turns}) == 3, "per-turn input differs"
    assert "ref-" not in systems[0], "per-turn facts stay out of the pinned prompt"


async def test_a_new_chat_name_changes_the_pinned_prompt_and_the_latest_stored_label_wins(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness()
    await h.send("one", chat_name="Team", **GROUP)
    await h.finals("g1", 1)
    await h.send("two", chat_name="Renamed", **GROUP)
    await h.finals("g1", 2)
    await h.send("three", **GROUP)
    await h.finals("g1", 3)
    # Another member's session in the same chat observes a newer label ...
    await h.send("hello", chat_name="Third", **{**GROUP, "user_id": "u2", "user_name": "Bo"})
    await h.finals("g1", 4)
    # ... and u1's session sees it: labels belong to the chat, read from the store.
    await h.send("four", **GROUP)
    await h.finals("g1", 5)

    u1 = h.agent.turns_with("one")[0].request.session_key
    systems = [r.system for r in h.agent.requests(u1)]
    assert len(systems) == 4
    assert "Team" in systems[0]
    assert "Renamed" in systems[1] and "Team" not in systems[1]
    assert systems[2] == systems[1], "a message without a label keeps the stored one"
    assert "Third" in systems[3] and "Renamed" not in systems[3]
    other = h.agent.turns_with("hello")[0].request.session_key
    assert other != u1
