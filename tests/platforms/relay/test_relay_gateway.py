"""A real gateway behind the real relay simulator: acks after commit, replays, replies, bad frames."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from chatgate.app.gateway import Gateway
from chatgate.engine.ports import Admitted
from chatgate.platforms.relay.connection import NoResult, Outcome, RelayConnection, Unsent
from support.relay_harness import GW, RelayWorld, relay_hub

GUILD = "900"
CHANNEL = "901"


def text_event(
    text: str, message_id: str, *, user: str = "u1", name: str = "Ann", **source: Any
) -> dict[str, Any]:
    src: dict[str, Any] = {
        "platform": "discord",
        "chat_id": CHANNEL,
        "chat_type": "group",
        "user_id": user,
        "user_display_name": name,
        "scope_id": GUILD,
        "chat_name": "Guild / #ops",
        "chat_topic": "deploys",
    }
    src.update(source)
    return {"text": text, "message_type": "text", "message_id": message_id, "source": src}


def interaction(
    iid: str,
    data: dict[str, Any],
    *,
    kind: int = 2,
    user: str = "u1",
    nick: str | None = "Ann",
    channel: dict[str, Any] | None = None,
    **extra: Any,
) -> bytes:
    body: dict[str, Any] = {
        "id": iid,
        "type": kind,
        "application_id": "app",
        "token": "stripped-by-the-connector",
        "guild_id": GUILD,
        "channel_id": (channel or {}).get("id", CHANNEL),
        "channel": channel or {"id": CHANNEL, "type": 0},
        "member": {"nick": nick, "user": {"id": user, "username": "ann", "global_name": "Ann G"}},
        "data": data,
    }
    body.update(extra)
    return json.dumps(body).encode()


async def test_a_text_message_is_acked_after_commit_and_answered_with_its_route(world: RelayWorld) -> None:
    await world.start()
    await world.sim.wait_connected(GW, 10)
    buffer_id = await world.sim.inject_inbound(GW, text_event("hello", "m1"))
    await world.sim.wait_acked(buffer_id, 10)
    assert world.query(
        "SELECT status FROM inbox WHERE delivery_id = 'discord:901:m1'"
    )  # committed before ack
    sent = await world.wait_ops("send", 1)
    assert sent[0]["content"] == "echo: hello" and sent[0]["chat_id"] == CHANNEL
    assert sent[0]["metadata"] == {"scope_id": GUILD, "user_id": "u1"}


async def test_a_replayed_delivery_is_acked_again_and_runs_once(world: RelayWorld) -> None:
    await world.start()
    await world.sim.wait_connected(GW, 10)
    world.sim.lose_acks(GW)  # the gateway's ack never reaches the connector
    buffer_id = await world.sim.inject_inbound(GW, text_event("once", "m2"))
    await world.wait_for(lambda: buffer_id in world.sim.lost_acks(GW), "the lost ack")
    await world.wait_ops("send", 1)
    world.sim.lose_acks(GW, False)
    await world.sim.drop_connection(GW)  # the connector replays the unacked entry on the reconnect
    await world.sim.wait_acked(buffer_id, 10)
    assert [d.replay for d in world.sim.deliveries(GW) if d.buffer_id == buffer_id] == [False, True]
    assert world.query("SELECT COUNT(*) FROM inbox") == [(1,)]
    await world.sim.inject_inbound(GW, text_event("after", "m3"))
    await world.wait_ops("send", 2)
    assert [a["content"] for a in world.ops("send")] == ["echo: once", "echo: after"]


@pytest.mark.parametrize("lane", ["inbound", "passthrough"])
async def test_an_intake_cancelled_before_commit_is_replayed_and_admitted_once(
    world: RelayWorld, lane: str
) -> None:
    gateway = await world.start()
    await world.sim.wait_connected(GW, 10)
    intake = gateway.intake
    real_sink = intake._sink
    entered = asyncio.Event()

    class StalledSink:
        """Stands in front of the real admission and never lets this delivery reach it."""

        async def admit(self, inbound: Any) -> Admitted:
            entered.set()
            await asyncio.Event().wait()
            return await real_sink.admit(inbound)

    intake._sink = StalledSink()
    if lane == "inbound":
        buffer_id = await world.sim.inject_inbound(GW, text_event("stalled", "m4"))
    else:
        body = interaction(
            "7001", {"type": 1, "name": "ask", "options": [{"name": "prompt", "type": 3, "value": "x"}]}
        )
        buffer_id = await world.sim.inject_passthrough(GW, body)
    await asyncio.wait_for(entered.wait(), 10)
    await world.stop()  # cancels the intake mid-admission: nothing was committed, nothing acked
    assert buffer_id in world.sim.unacked(GW)
    assert world.query("SELECT COUNT(*) FROM inbox") == [(0,)]
    await world.start()
    await world.sim.wait_acked(buffer_id, 10)
    assert world.query("SELECT COUNT(*) FROM inbox") == [(1,)]
    op = "send" if lane == "inbound" else "follow_up"
    replies = await world.wait_ops(op, 1)
    assert len(replies) == 1 and replies[0]["content"].startswith("echo: ")


async def test_interaction_replies_use_follow_up_when_advertised(world: RelayWorld) -> None:
    await world.start()
    await world.sim.wait_connected(GW, 10)
    await world.sim.inject_passthrough(GW, interaction("7100", {"type": 1, "name": "ping_me"}))
    follow = await world.wait_ops("follow_up", 1)
    assert follow[0]["kind"] == "discord.interaction_token"
    assert follow[0]["content"] == "echo: /ping_me"
    assert follow[0]["session_key"] == f"agent:main:discord:group:{CHANNEL}:u1"
    assert "token" not in json.dumps(follow[0]).replace("interaction_token", "")
    assert world.ops("send") == []


async def test_without_follow_up_an_interaction_is_answered_in_the_chat(world: RelayWorld) -> None:
    await world.sim.stop()
    from relaysim import RelaySimulator

    world.sim = RelaySimulator(
        world.tmp / "relay2.db", {GW: ["relay-test-secret"]},
        [{"platform": "discord", "supported_ops": ["send", "edit", "typing"]}],
    )  # fmt: skip
    await world.sim.start()
    await world.start()
    await world.sim.wait_connected(GW, 10)
    await world.sim.inject_passthrough(GW, interaction("7200", {"type": 1, "name": "hello"}))
    sent = await world.wait_ops("send", 1)
    assert sent[0]["content"] == "echo: /hello" and world.ops("follow_up") == []


CONTENT_CASES = [
    (
        "nested subcommands",
        interaction("7301", {"type": 1, "name": "skill", "options": [
            {"name": "run", "type": 1, "options": [{"name": "target", "type": 3, "value": "deploy"},
                                                   {"name": "dry", "type": 5, "value": True}]}]}),
        ["/skill run", "target:deploy", "dry:true"],
    ),
    (
        "select with two values",
        interaction("7302", {"component_type": 3, "custom_id": "pick", "values": ["alpha", "beta"]}, kind=3,
                    message={"id": "555", "channel_id": CHANNEL}),
        ["pick", "alpha", "beta"],
    ),
    (
        "modal, label shape",
        interaction("7303", {"custom_id": "form", "components": [
            {"type": 18, "id": 1, "component": {"type": 4, "custom_id": "title", "value": "Résumé ✨"}},
            {"type": 18, "id": 2, "component": {"type": 4, "custom_id": "notes", "value": ""}}]}, kind=5),
        ["form", "title: Résumé ✨", "notes: (empty)"],
    ),
    (
        "modal, legacy action rows",
        interaction("7304", {"custom_id": "legacy", "components": [
            {"type": 1, "components": [{"type": 4, "custom_id": "when", "value": "Next week"}]},
            {"type": 1, "components": [{"type": 4, "custom_id": "why", "value": "naïve café"}]}]}, kind=5),
        ["legacy", "when: Next week", "why: naïve café"],
    ),
    (
        "message context menu",
        interaction("7305", {"type": 3, "name": "Summarize", "target_id": "777", "resolved": {"messages": {
            "777": {"id": "777", "content": "the quarterly numbers",
                    "author": {"id": "u9", "username": "zed"}}}}}),
        ["Summarize", "777", "the quarterly numbers"],
    ),
    (
        "user context menu",
        interaction("7306", {"type": 2, "name": "Profile", "target_id": "u9", "resolved": {"users": {
            "u9": {"id": "u9", "username": "zed", "global_name": "Zed Z"}}}}),
        ["Profile", "Zed Z", "u9"],
    ),
]  # fmt: skip


async def test_the_agent_input_holds_every_submitted_value(world: RelayWorld) -> None:
    await world.start()
    await world.sim.wait_connected(GW, 10)
    for _, body, _ in CONTENT_CASES:
        await world.sim.inject_passthrough(GW, body)
    await world.wait_for(lambda: len(world.agent.requests) >= len(CONTENT_CASES), "every turn")
    inputs = [r.model_input for r in world.agent.requests]
    for (name, _, expected), got in zip(CONTENT_CASES, inputs, strict=True):
        for part in expected:
            assert part in got, f"{name}: {part!r} missing from {got!r}"


async def test_ping_and_autocomplete_are_rejected_with_a_reason_and_acked(world: RelayWorld) -> None:
    await world.start()
    await world.sim.wait_connected(GW, 10)
    ping = await world.sim.inject_passthrough(GW, interaction("7401", {}, kind=1))
    auto = await world.sim.inject_passthrough(GW, interaction("7402", {"type": 1, "name": "q"}, kind=4))
    await world.sim.wait_acked(ping, 10)
    await world.sim.wait_acked(auto, 10)
    assert world.gateway is not None
    reasons = [r.reason.lower() for r in await world.gateway.store.rejected()]
    assert any("ping" in r for r in reasons) and any("autocomplete" in r for r in reasons)
    assert world.query("SELECT COUNT(*) FROM inbox") == [(0,)]


async def test_malformed_frames_are_logged_and_the_gateway_keeps_serving(
    world: RelayWorld, caplog: pytest.LogCaptureFixture
) -> None:
    await world.start()
    await world.sim.wait_connected(GW, 10)
    bad_lines = [
        "{this is not json",
        json.dumps({"type": "mystery_frame"}),
        json.dumps({"type": "inbound", "event": {"text": "no source"}}),
        json.dumps(
            {"type": "passthrough_forward", "forward": {"platform": "discord", "bodyB64": "%%%not-b64"}}
        ),
        json.dumps({"type": "inbound", "event": {"text": "x" * (2 * 1024 * 1024)}}),
        json.dumps({"type": "outbound_result", "requestId": "nobody", "result": {"success": True}}),
        "[" * 200_000,  # json.loads raises RecursionError, not ValueError
        json.dumps({"type": "outbound_result", "requestId": "x", "result": {"retry_after": 10**400}}),
    ]
    for line in bad_lines:
        assert await world.sim.send_raw(GW, line + "\n")
    # A lone surrogate (legal in JSON, not in UTF-8): rejected with its reason, so never replayed forever.
    assert await world.sim.send_raw(
        GW, json.dumps({"type": "inbound", "event": text_event("a \ud800", "m8")}) + "\n"
    )
    await world.sim.inject_inbound(GW, text_event("still here", "m9"))
    sent = await world.wait_ops("send", 1)
    assert sent[0]["content"] == "echo: still here"
    assert world.sim.connected(GW) and world.sim.counters(GW).connections == 1
    assert world.gateway is not None
    reasons = " | ".join(r.reason for r in await world.gateway.store.rejected())
    assert "'source'" in reasons and "base64" in reasons
    logged = caplog.text
    assert "not JSON" in logged and "mystery_frame" in logged and "longer than" in logged
    assert "nested too deeply" in logged and "UTF-8" in reasons


async def test_an_outbound_result_that_never_arrives_is_recorded_as_ambiguous(world: RelayWorld) -> None:
    await world.start(outbound_timeout_seconds=0.5)
    await world.sim.wait_connected(GW, 10)
    world.sim.set_result_policy(GW, "never")
    await world.sim.inject_inbound(GW, text_event("lost in the void", "m10"))
    await world.wait_for(
        lambda: world.query("SELECT status, last_error FROM outbox WHERE status = 'ambiguous'"),
        "an ambiguous row",
    )
    [(status, error)] = world.query("SELECT status, last_error FROM outbox WHERE kind = 'final'")
    assert status == "ambiguous" and "outbound_result" in error


async def _fifty_unanswered_sends(world: RelayWorld) -> tuple[Gateway, list[asyncio.Task[Outcome]]]:
    """Fifty sends written to the connector, which never answers them."""
    world.extra = {"delivery": {"send_timeout_seconds": 120}}
    gateway = await world.start(outbound_timeout_seconds=60)
    await world.sim.wait_connected(GW, 10)
    world.sim.set_result_policy(GW, "never")
    conn = relay_hub(gateway).connection
    assert await conn.wait_connected(10)  # the gateway read the connector's answer too
    sends = [
        asyncio.create_task(conn.request({"op": "send", "chat_id": CHANNEL, "content": f"n{i}"}, "discord"))
        for i in range(50)
    ]
    await world.wait_for(lambda: len(world.ops("send")) == 50, "50 sends on the wire")
    return gateway, sends


async def test_fifty_in_flight_sends_settle_when_the_connection_drops(world: RelayWorld) -> None:
    _, sends = await _fifty_unanswered_sends(world)
    await world.sim.drop_connection(GW)
    async with asyncio.timeout(10):  # a hang guard, not a speed claim: the drop must settle every request
        outcomes = await asyncio.gather(*sends)
    assert all(isinstance(o, NoResult) for o in outcomes)
    assert {o.reason for o in outcomes if isinstance(o, NoResult)} == {
        "the relay connection was lost before the connector answered"
    }


async def test_shutdown_with_fifty_in_flight_sends_ends_them_within_the_budget(world: RelayWorld) -> None:
    gateway, sends = await _fifty_unanswered_sends(world)
    conn = relay_hub(gateway).connection
    loop = asyncio.get_running_loop()
    started = loop.time()
    await relay_hub(gateway).close(budget=2.0)
    elapsed = loop.time() - started
    outcomes = [t.result() for t in sends]  # every task is done: close() settled them
    assert all(isinstance(o, NoResult) for o in outcomes)
    assert elapsed < 2.0 + 3.0, f"close took {elapsed:.1f}s for a 2s budget"
    late = await conn.request({"op": "send", "chat_id": CHANNEL, "content": "late"}, "discord")
    assert isinstance(late, Unsent)


async def test_interrupt_inbound_stops_exactly_that_sessions_turn(world: RelayWorld) -> None:
    await world.start()
    await world.sim.wait_connected(GW, 10)
    await world.sim.inject_inbound(GW, text_event("SLOW work", "m11", user="u1"))
    await asyncio.wait_for(world.agent.started.wait(), 10)
    await world.sim.inject_inbound(GW, text_event("waiting behind it", "m11b", user="u1"))
    await world.sim.inject_inbound(GW, text_event("other user", "m12", user="u2", name="Bob"))
    await world.wait_ops("send", 1)  # the other session runs on
    key = f"agent:main:discord:group:{CHANNEL}:u1"
    assert await world.sim.send_interrupt(GW, key, CHANNEL)
    await world.wait_for(
        lambda: (
            world.query("SELECT status FROM inbox WHERE delivery_id = 'discord:901:m11'") == [("cancelled",)]
        ),
        "the interrupted item cancelled",
    )
    world.agent.release.set()
    await world.sim.inject_inbound(GW, text_event("next", "m13", user="u1"))
    sent = await world.wait_ops("send", 3)
    # Only the running turn was stopped: the message waiting behind it is answered, then the next.
    assert [s["content"] for s in sent] == ["echo: other user", "echo: waiting behind it", "echo: next"]


async def test_stop_in_a_relayed_chat_is_sent_to_the_connector_as_interrupt(world: RelayWorld) -> None:
    await world.start()
    await world.sim.wait_connected(GW, 10)
    await world.sim.inject_inbound(GW, text_event("/stop", "m14"))
    interrupts = await world.wait_for(lambda: world.sim.interrupts(GW), "an interrupt frame")
    assert interrupts[0].session_key == f"agent:main:discord:group:{CHANNEL}:u1"


async def test_graceful_shutdown_goes_idle_and_the_next_start_gets_the_buffered_backlog(
    world: RelayWorld,
) -> None:
    await world.start()
    await world.sim.wait_connected(GW, 10)
    await world.stop()
    assert world.sim.counters(GW).going_idle == 1 and world.sim.idle(GW)
    waiting = await world.sim.inject_inbound(GW, text_event("while you were away", "m20"))
    assert world.sim.unacked(GW) == [waiting]  # buffered by the connector, not lost
    await world.start()
    await world.sim.wait_acked(waiting, 10)
    sent = await world.wait_ops("send", 1)
    assert sent[0]["content"] == "echo: while you were away"
    hellos = world.sim.hellos(GW)
    assert [h.platform for h in hellos] == ["discord", "discord"]
    assert {c["name"] for c in hellos[-1].command_manifest or []} >= {"help", "new", "stop", "status"}


async def test_a_stop_during_the_handshake_still_asks_the_connector_to_buffer(
    world: RelayWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The connector's answer to our hello is read late (a busy loop): the stop comes before it.
    read = RelayConnection._on_descriptor

    def read_late(connection: RelayConnection, descriptor: Any) -> None:
        asyncio.get_running_loop().call_later(0.3, read, connection, descriptor)

    monkeypatch.setattr(RelayConnection, "_on_descriptor", read_late)
    await world.start()
    await world.sim.wait_connected(GW, 10)  # the connector answered; the gateway has not read it yet
    await world.stop()
    assert world.sim.counters(GW).going_idle == 1 and world.sim.idle(GW)
    waiting = await world.sim.inject_inbound(GW, text_event("sent during the stop", "m21"))
    assert world.sim.unacked(GW) == [waiting]  # buffered by the connector, not lost


async def test_a_reply_waits_out_a_connector_outage_without_spending_its_attempts(world: RelayWorld) -> None:
    world.extra = {"delivery": {"max_attempts": 1, "send_timeout_seconds": 10}}
    await world.start()
    await world.sim.wait_connected(GW, 10)
    port = world.sim.port
    await world.sim.inject_inbound(GW, text_event("SLOW reply", "m30"))
    await asyncio.wait_for(world.agent.started.wait(), 10)
    await world.sim.stop()  # the connector is gone while the turn finishes
    world.agent.release.set()
    await world.wait_for(lambda: world.query("SELECT id FROM outbox WHERE kind = 'final'"), "the final row")
    await asyncio.sleep(1.0)  # several delivery rounds against the outage
    [(status, attempts)] = world.query("SELECT status, attempts FROM outbox WHERE kind = 'final'")
    assert status == "pending" and attempts == 0, (status, attempts)  # deferred, not failed
    from relaysim import RelaySimulator

    world.sim = RelaySimulator(world.tmp / "relay.db", {GW: ["relay-test-secret"]}, [{"platform": "discord"}])
    await world.sim.start(port=port)
    sent = await world.wait_ops("send", 1)
    assert sent[0]["content"] == "echo: SLOW reply"
