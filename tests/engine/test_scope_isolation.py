"""Two Slack workspaces, one channel id: contract keys for the first, never a shared session.

The relay contract's session key leaves the workspace out (a connector binds ``follow_up``
and ``interrupt_inbound`` by it), and a Slack channel id is unique only within its workspace.
The real store binds a key to the scope of its first message; a second workspace's event for
the same key is keyed with its workspace instead of joining the first one's conversation.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from chatgate.domain.errors import ScopeConflict
from chatgate.domain.inbox import AdmitRequest
from chatgate.engine.authz import PlatformAccess
from chatgate.engine.intake import AdmissionRefused
from support.engine_harness import RecordingAdapter, make_inbound

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from support.engine_harness import MakeHarness

    Wait = Callable[..., Awaitable[Any]]

SLACK = {"slack": PlatformAccess(allow_all=True)}
CONTRACT_KEY = "agent:main:slack:group:C1:U1"
SECOND_WORKSPACE_KEY = "agent:main:slack:group:T2:C1:U1"


def slack_adapter() -> RecordingAdapter:
    adapter = RecordingAdapter()
    adapter.platform = "slack"
    return adapter


def slack(text: str, workspace: str | None, **extra: Any) -> dict[str, Any]:
    return dict(platform="slack", chat_id="C1", chat_type="group", user_id="U1", scope_id=workspace, **extra)


async def test_the_first_workspace_gets_the_contract_key_and_the_second_its_own_session(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(rules=SLACK, adapter=slack_adapter())
    first = await h.send("from T1", **slack("from T1", "T1"))
    second = await h.send("from T2", **slack("from T2", "T2"))
    again = await h.send("T1 again", **slack("T1 again", "T1"))

    assert first.session_key == CONTRACT_KEY
    assert second.session_key == SECOND_WORKSPACE_KEY
    assert again.session_key == CONTRACT_KEY
    await wait(lambda: len(h.adapter.texts()) == 3)

    sessions = dict(h.query("SELECT key, session_id FROM sessions"))
    assert set(sessions) == {CONTRACT_KEY, SECOND_WORKSPACE_KEY}
    assert sessions[CONTRACT_KEY] != sessions[SECOND_WORKSPACE_KEY]
    scopes = {k: json.loads(s).get("scope_id") for k, s in h.query("SELECT key, source_json FROM sessions")}
    assert scopes == {CONTRACT_KEY: "T1", SECOND_WORKSPACE_KEY: "T2"}
    # The agent saw each workspace's conversation alone, and each reply went to its own workspace.
    t2_turns = h.agent.requests(SECOND_WORKSPACE_KEY)
    assert [m.text for m in t2_turns[-1].messages] == ["from T2"]
    assert t2_turns[-1].history == ()
    t1_seen = [e.content for r in h.agent.requests(CONTRACT_KEY) for e in r.history] + [
        m.text for r in h.agent.requests(CONTRACT_KEY) for m in r.messages
    ]
    assert t1_seen and not any("T2" in text for text in t1_seen)
    routed = {r.text: r.target.get("scope_id") for r in h.adapter.rows(kinds=("final",))}
    assert routed == {"echo: from T1": "T1", "echo: from T2": "T2", "echo: T1 again": "T1"}


async def test_a_redelivery_to_the_second_workspace_is_still_one_message(make_harness: MakeHarness) -> None:
    h = await make_harness(rules=SLACK, adapter=slack_adapter())
    await h.send("hello", **slack("hello", "T1"))
    a = await h.send("hi", delivery_id="t2-1", **slack("hi", "T2"))
    b = await h.send("hi", delivery_id="t2-1", **slack("hi", "T2"))
    assert a.new and not b.new
    assert a.session_key == b.session_key == SECOND_WORKSPACE_KEY
    assert h.query("SELECT COUNT(*) FROM inbox WHERE delivery_id = 't2-1'") == [(1,)]


async def test_the_store_refuses_another_scope_under_a_bound_key_and_changes_nothing(
    make_harness: MakeHarness,
) -> None:
    """The guard for the race two workspaces' first messages could run: a key never mixes scopes."""
    h = await make_harness(rules=SLACK, adapter=slack_adapter())
    await h.send("hello", **slack("hello", "T1"))
    before = h.query("SELECT COUNT(*) FROM inbox")
    intruder = make_inbound("mine now", **slack("mine now", "T2"))
    with pytest.raises(ScopeConflict):
        await h.store.admit(AdmitRequest(inbound=intruder, session_key=CONTRACT_KEY))
    assert h.query("SELECT COUNT(*) FROM inbox") == before
    (source_json,) = h.query("SELECT source_json FROM sessions WHERE key = ?", CONTRACT_KEY)[0]
    assert json.loads(source_json)["scope_id"] == "T1"


async def test_an_event_without_a_workspace_for_a_workspace_session_is_refused_with_the_reason(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness(rules=SLACK, adapter=slack_adapter())
    await h.send("hello", **slack("hello", "T1"))
    with pytest.raises(AdmissionRefused) as refused:
        await h.send("who am I", **slack("who am I", None))
    assert refused.value.code == "scope_conflict"
    assert "workspace" in refused.value.message
    assert h.query("SELECT COUNT(*) FROM inbox WHERE session_key = ?", CONTRACT_KEY) == [(1,)]


async def test_control_commands_of_the_second_workspace_act_on_its_own_session(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(rules=SLACK, adapter=slack_adapter())
    gate = h.agent.hold("long")
    await h.send("long", **slack("long", "T1"))
    await wait(lambda: h.agent.running("long"))
    stopped = await h.send("/stop", **slack("/stop", "T2"))
    assert stopped.session_key == SECOND_WORKSPACE_KEY
    assert h.agent.running("long"), "the other workspace's /stop stops nothing here"
    gate.set()
    await wait(lambda: h.adapter.texts(), message="the first workspace's turn finishes")
    assert h.agent.turns_with("long")[0].state == "done"
