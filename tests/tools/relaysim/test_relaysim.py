"""The relay connector simulator, driven by a raw ``websockets`` client over loopback.

Nothing here uses chatgate's gateway code: the client below speaks the wire by
hand, and tokens are made by an implementation written in this file. Absence of
a frame is proven by ordering (a later request's answer arrives first while the
simulator is known to be holding the frame back), never by sleeping.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import signal
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from relaysim import RelaySimulator, make_token
from relaysim.buffer import AckOutcome, DurableBuffer
from relaysim.control import is_loopback
from relaysim.frames import LineDecoder

GW = "gw-test"
SECRET = "first secret ✓"
# Generous: a stalled CI machine may pause for seconds; nothing waits this long when healthy.
TIMEOUT = 20.0
# The replay waits this long for an ack; the tests ack explicitly and never rely on it expiring.
NO_ACK_EXPIRY = 120.0

MakeSim = Callable[..., Awaitable[RelaySimulator]]


def hand_token(gateway_id: str, secret: str, exp: int = 0) -> str:
    """The contract's token, written independently of relaysim.auth."""
    signature = hmac.new(secret.encode("utf-8"), f"{gateway_id}:{exp}".encode(), hashlib.sha256).hexdigest()
    raw = f"{gateway_id}:{exp}:{signature}".encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").replace("=", "")


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class RawGateway:
    """A gateway as seen on the wire: newline-delimited JSON frames in text messages."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._decoder = LineDecoder()
        self._frames: deque[dict[str, Any]] = deque()

    async def send(self, *frames: dict[str, Any]) -> None:
        await self.ws.send("".join(json.dumps(f) + "\n" for f in frames))

    async def recv(self) -> dict[str, Any]:
        while not self._frames:
            message = await asyncio.wait_for(self.ws.recv(), TIMEOUT)
            assert isinstance(message, str), "the relay must send text messages"
            assert message.endswith("\n"), "every frame ends with a newline"
            for item in self._decoder.feed(message):
                assert isinstance(item, dict), item
                self._frames.append(item)
        return self._frames.popleft()

    async def expect(self, frame_type: str) -> dict[str, Any]:
        frame = await self.recv()
        assert frame["type"] == frame_type, frame
        return frame

    async def hello(self, platform: str = "discord", bot_id: str = "bot-1") -> dict[str, Any]:
        await self.send({"type": "hello", "platform": platform, "botId": bot_id})
        descriptor: dict[str, Any] = (await self.expect("descriptor"))["descriptor"]
        return descriptor

    async def outbound(self, request_id: str, action: dict[str, Any], **extra: Any) -> None:
        await self.send({"type": "outbound", "requestId": request_id, "action": action, **extra})

    async def result(self, request_id: str) -> dict[str, Any]:
        frame = await self.expect("outbound_result")
        assert frame["requestId"] == request_id, frame
        result: dict[str, Any] = frame["result"]
        return result

    async def roundtrip(self, request_id: str) -> dict[str, Any]:
        """A typing op whose result must be the next frame: proves nothing else was queued before it."""
        await self.outbound(request_id, {"op": "typing", "chat_id": "c-sync"})
        return await self.result(request_id)

    async def ack(self, buffer_id: str) -> None:
        await self.send({"type": "inbound_ack", "bufferId": buffer_id})

    async def closed(self) -> tuple[int | None, str | None]:
        """Wait for the relay to end the connection: (code, reason) of its close frame, or (None, None)."""
        with pytest.raises(ConnectionClosed) as info:
            while True:
                await asyncio.wait_for(self.ws.recv(), TIMEOUT)
        rcvd = info.value.rcvd
        return (rcvd.code, rcvd.reason) if rcvd is not None else (None, None)


@asynccontextmanager
async def gateway(sim: RelaySimulator, headers: dict[str, str] | None = None) -> AsyncIterator[RawGateway]:
    headers = auth(hand_token(GW, SECRET)) if headers is None else headers
    async with connect(sim.relay_url, additional_headers=headers, open_timeout=TIMEOUT) as ws:
        yield RawGateway(ws)


@pytest.fixture
async def make_sim(tmp_path: Path) -> AsyncIterator[MakeSim]:
    started: list[RelaySimulator] = []

    async def make(**kwargs: Any) -> RelaySimulator:
        kwargs.setdefault("secrets", {GW: [SECRET]})
        kwargs.setdefault("ack_timeout", NO_ACK_EXPIRY)
        sim = RelaySimulator(kwargs.pop("db_path", tmp_path / "relay.db"), **kwargs)
        await sim.start("127.0.0.1", 0)
        started.append(sim)
        return sim

    yield make
    for sim in reversed(started):
        await asyncio.wait_for(sim.stop(), TIMEOUT)


def event(text: str) -> dict[str, Any]:
    return {"text": text, "message_type": "text", "source": {"platform": "discord", "chat_id": "c1"}}


# -- authentication -------------------------------------------------------------------------------


async def test_a_token_made_by_an_independent_implementation_is_accepted(make_sim: MakeSim) -> None:
    sim = await make_sim()
    later = int(time.time()) + 3600
    assert make_token(GW, SECRET, later) == hand_token(GW, SECRET, later)
    for token in (hand_token(GW, SECRET), hand_token(GW, SECRET, later)):
        async with gateway(sim, auth(token)) as gw:
            assert (await gw.hello())["platform"] == "discord"
            assert sim.connected(GW)
    assert sim.counters(GW).connections == 2
    assert sim.counters().closes_4401 == 0


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param(auth(hand_token(GW, "wrong secret")), id="wrong-secret"),
        pytest.param(auth("not-a-token!"), id="garbage"),
        pytest.param(auth(base64.urlsafe_b64encode(b"gw-test:0:zz").decode()), id="malformed-signature"),
        pytest.param(auth(hand_token(GW, SECRET) + "=="), id="padded"),
        pytest.param(auth(hand_token("stranger", SECRET)), id="unknown-gateway"),
        pytest.param({"Authorization": "Basic " + hand_token(GW, SECRET)}, id="not-bearer"),
        pytest.param({}, id="missing"),
    ],
)
async def test_bad_tokens_are_closed_with_4401_unauthorized(
    make_sim: MakeSim, headers: dict[str, str]
) -> None:
    sim = await make_sim()
    async with gateway(sim, headers) as gw:
        assert await gw.closed() == (4401, "unauthorized")
    assert sim.counters().closes_4401 == 1
    assert sim.counters().connections == 0
    assert not sim.connected(GW)


async def test_an_expired_token_is_closed_with_4401_expired(make_sim: MakeSim) -> None:
    sim = await make_sim()
    past = int(time.time()) - 60
    async with gateway(sim, auth(hand_token(GW, SECRET, past))) as gw:
        assert await gw.closed() == (4401, "expired")
    # Expiry is only ever reported to a holder of a valid secret.
    async with gateway(sim, auth(hand_token(GW, "wrong secret", past))) as gw:
        assert await gw.closed() == (4401, "unauthorized")


async def test_every_secret_of_the_rotation_list_is_accepted(make_sim: MakeSim) -> None:
    sim = await make_sim(secrets={GW: ["old secret", "new secret"]})
    for secret in ("old secret", "new secret"):
        async with gateway(sim, auth(hand_token(GW, secret))) as gw:
            await gw.hello()
    async with gateway(sim, auth(hand_token(GW, "retired secret"))) as gw:
        assert await gw.closed() == (4401, "unauthorized")
    assert sim.counters(GW).connections == 2


async def test_revoke_closes_the_live_session_with_4401_and_refuses_the_next(make_sim: MakeSim) -> None:
    sim = await make_sim()
    async with gateway(sim) as gw:
        await gw.hello()
        sim.revoke(GW)
        assert await gw.closed() == (4401, "unauthorized")
    async with gateway(sim) as gw:
        assert await gw.closed() == (4401, "unauthorized")
    assert sim.counters(GW).closes_4401 == 2


# -- handshake and outbound ops -------------------------------------------------------------------


async def test_each_hello_gets_the_descriptor_of_its_platform(make_sim: MakeSim) -> None:
    sim = await make_sim(
        platforms=[{"platform": "discord"}, {"platform": "telegram", "supported_ops": ["send", "prompt"]}]
    )
    async with gateway(sim) as gw:
        await gw.send({"type": "hello", "platform": "slack", "botId": "b"})  # not fronted: no descriptor
        discord = await gw.hello("discord", "d-bot")
        telegram = await gw.hello("telegram", "t-bot")
    assert discord == {
        "contract_version": 1,
        "platform": "discord",
        "label": "Discord",
        "max_message_length": 2000,
        "supports_draft_streaming": False,
        "supports_edit": True,
        "supports_threads": True,
        "markdown_dialect": "discord",
        "len_unit": "chars",
    }
    assert telegram["max_message_length"] == 4096
    assert telegram["len_unit"] == "utf16"
    assert telegram["markdown_dialect"] == "markdown_v2"
    assert telegram["supported_ops"] == ["send", "prompt"]
    assert [(h.platform, h.bot_id, h.answered) for h in sim.hellos(GW)] == [
        ("slack", "b", False),
        ("discord", "d-bot", True),
        ("telegram", "t-bot", True),
    ]


async def test_outbound_ops_get_results_as_the_descriptor_allows(make_sim: MakeSim) -> None:
    sim = await make_sim(
        platforms=[{"platform": "discord"}, {"platform": "telegram", "supported_ops": ["send", "prompt"]}]
    )
    async with gateway(sim) as gw:
        await gw.hello("discord")
        await gw.hello("telegram")
        await gw.outbound("r1", {"op": "send", "chat_id": "c1", "content": "hi"}, platform="discord")
        sent = await gw.result("r1")
        assert sent["success"] is True and isinstance(sent["message_id"], str) and sent["message_id"]
        edit = {"op": "edit", "chat_id": "c1", "message_id": sent["message_id"], "content": "hi!"}
        await gw.outbound("r2", edit, platform="discord")
        assert await gw.result("r2") == {"success": True}
        follow = {"op": "follow_up", "session_key": "agent:main:discord:dm:c1", "kind": "k", "content": "x"}
        await gw.outbound("r3", follow, platform="discord")  # legacy set: no supported_ops on discord
        assert (await gw.result("r3"))["success"] is True
        await gw.outbound("r4", {"op": "delete", "chat_id": "c1", "message_id": "m"}, platform="discord")
        refused = await gw.result("r4")
        assert refused["success"] is False and "delete" in refused["error"]
        await gw.outbound(
            "r5", {"op": "edit", "chat_id": "c1", "message_id": "m", "content": "x"}, platform="telegram"
        )
        assert (await gw.result("r5"))["success"] is False  # telegram advertises send and prompt only
        options = [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}]
        prompt = {
            "op": "prompt",
            "chat_id": "c9",
            "prompt_id": "p1",
            "content": "Run it?",
            "options": options,
        }
        await gw.outbound("r6", prompt, platform="telegram")
        assert (await gw.result("r6"))["success"] is True
        await gw.outbound("r7", {"op": "teleport", "chat_id": "c1"}, platform="discord")
        assert (await gw.result("r7"))["success"] is False
        await gw.outbound("r8", {"op": "send", "chat_id": "c1", "content": "x" * 2001}, platform="discord")
        too_long = await gw.result("r8")
        assert too_long["success"] is False and "2000" in too_long["error"]
    assert [op.request_id for op in sim.ops(GW)] == [f"r{i}" for i in range(1, 9)]
    assert [m.content for m in sim.messages(GW) if m.op == "send"] == ["hi!"]


async def test_never_mode_swallows_results_and_fail_mode_fails_them(make_sim: MakeSim) -> None:
    sim = await make_sim()
    send = {"op": "send", "chat_id": "c1", "content": "hello"}
    async with gateway(sim) as gw:
        await gw.hello()
        sim.set_result_policy(GW, "never")
        await gw.outbound("swallowed", send)
        op = await sim.wait_for_op(GW, lambda o: o.request_id == "swallowed", TIMEOUT)
        sim.set_result_policy(GW, "fail")
        await gw.outbound("failed", send)
        assert await gw.result("failed") == {"success": False, "error": "simulated failure"}
        sim.set_result_policy(GW, "ok", delay=NO_ACK_EXPIRY)
        await gw.outbound("delayed", send)
        await sim.wait_for_op(GW, lambda o: o.request_id == "delayed", TIMEOUT)  # policy read on receipt
        sim.set_result_policy(GW, "ok")
        await gw.outbound("prompt", send)
        # The next frame answers "prompt": nothing was ever sent for "swallowed", "delayed" is held.
        assert (await gw.result("prompt"))["success"] is True
    assert op.result is None and op.action == send
    assert [o.result is None for o in sim.ops(GW)] == [True, False, True, False]


# -- buffering and replay -------------------------------------------------------------------------


async def test_replay_is_in_order_and_waits_for_each_ack(make_sim: MakeSim) -> None:
    sim = await make_sim()
    ids = [await sim.inject_inbound(GW, event(f"m{i}")) for i in range(3)]
    assert sim.unacked(GW) == ids
    assert [int(i) for i in ids] == sorted(int(i) for i in ids)
    async with gateway(sim) as gw:
        await gw.hello()
        first = await gw.expect("inbound")
        assert (first["bufferId"], first["event"]) == (ids[0], event("m0"))
        late = await sim.inject_inbound(GW, event("late"))  # live delivery waits for the replay
        await gw.roundtrip("sync-1")  # the second entry was not sent before the first was acked
        assert [d.buffer_id for d in sim.deliveries(GW)] == [ids[0]]
        received = [first["bufferId"]]
        await gw.ack(first["bufferId"])
        for _ in range(3):
            frame = await gw.expect("inbound")
            received.append(frame["bufferId"])
            await gw.ack(frame["bufferId"])
        await sim.wait_acked(late, TIMEOUT)
    assert received == [*ids, late]
    assert all(d.replay for d in sim.deliveries(GW))
    assert sim.unacked(GW) == []


async def test_unacked_entries_survive_a_restart_and_acked_ones_never_come_back(
    make_sim: MakeSim, tmp_path: Path
) -> None:
    db = tmp_path / "shared.db"
    first = await make_sim(db_path=db)
    ids = [await first.inject_inbound(GW, event("a")), await first.inject_passthrough(GW, b'{"type":2}')]
    await first.stop()

    second = await make_sim(db_path=db)
    assert second.unacked(GW) == ids
    async with gateway(second) as gw:
        await gw.hello()
        inbound = await gw.expect("inbound")
        assert inbound["bufferId"] == ids[0]
        await gw.ack(ids[0])
        forward = await gw.expect("passthrough_forward")
        assert forward["bufferId"] == ids[1]
        assert base64.b64decode(forward["forward"]["bodyB64"]) == b'{"type":2}'
        await gw.ack(ids[1])
        await second.wait_acked(ids[1], TIMEOUT)
    await second.stop()

    third = await make_sim(db_path=db)
    assert third.unacked(GW) == []
    async with gateway(third) as gw:
        await gw.hello()
        await third.wait_live(GW, TIMEOUT)
        fresh = await third.inject_inbound(GW, event("b"))
        frame = await gw.expect("inbound")  # the first delivery on this connection is the new entry
        assert frame["bufferId"] == fresh and int(fresh) > int(ids[1])


async def test_the_buffer_lists_and_walks_each_gateways_pending_entries_in_id_order(tmp_path: Path) -> None:
    buffer = DurableBuffer(tmp_path / "buffer.db")
    await buffer.open()
    ids = {gw: [] for gw in ("a", "b")}
    for n in range(6):  # the two gateways' entries interleave
        for gw in ids:
            ids[gw].append((await buffer.append(gw, {"type": "inbound", "n": n})).buffer_id)
    assert await buffer.ack("a", ids["a"][2]) is AckOutcome.ACKED
    assert await buffer.ack("a", ids["a"][0]) is AckOutcome.ACKED
    assert await buffer.ack("a", ids["a"][0]) is AckOutcome.UNKNOWN
    assert await buffer.ack("a", ids["b"][1]) is AckOutcome.FOREIGN
    left = [ids["a"][i] for i in (1, 3, 4, 5)]

    def walk(gw: str) -> list[int]:
        found, cursor = [], 0
        while (entry := buffer.next_after(gw, cursor)) is not None:
            found.append(cursor := entry.buffer_id)
        return found

    assert [e.buffer_id for e in buffer.pending("a")] == walk("a") == left
    assert [e.buffer_id for e in buffer.pending("b")] == walk("b") == ids["b"]
    assert buffer.next_after("a", ids["a"][4]) == buffer.pending("a")[-1]
    assert buffer.next_after("a", ids["a"][5]) is None and buffer.next_after("nobody", 0) is None
    await buffer.close()

    reopened = DurableBuffer(tmp_path / "buffer.db")  # the index is rebuilt from the file
    await reopened.open()
    assert [e.buffer_id for e in reopened.pending("a")] == left
    assert reopened.next_after("b", ids["b"][0]) == reopened.pending("b")[1]
    await reopened.close()


async def test_a_replay_goes_on_after_an_ack_timeout_and_the_entry_comes_back_first_next_time(
    make_sim: MakeSim,
) -> None:
    sim = await make_sim(ack_timeout=0.2)  # a short bound so that the test can let it run out
    ids = [await sim.inject_inbound(GW, event(f"m{i}")) for i in range(2)]
    async with gateway(sim) as gw:
        await gw.hello()
        assert (await gw.expect("inbound"))["bufferId"] == ids[0]  # never acked
        assert (await gw.expect("inbound"))["bufferId"] == ids[1]  # sent once the wait ran out
        await gw.ack(ids[1])
        await sim.wait_acked(ids[1], TIMEOUT)
    assert sim.unacked(GW) == [ids[0]]
    async with gateway(sim) as gw:
        await gw.hello()
        assert (await gw.expect("inbound"))["bufferId"] == ids[0]
        await gw.ack(ids[0])
        await sim.wait_acked(ids[0], TIMEOUT)
    assert sim.unacked(GW) == []


async def test_a_second_connection_for_the_same_gateway_replaces_the_first(make_sim: MakeSim) -> None:
    sim = await make_sim()
    async with gateway(sim) as old:
        await old.hello()
        async with gateway(sim) as new:
            assert await old.closed() == (1008, "replaced by a newer connection for this gateway id")
            await new.hello()
            await sim.wait_live(GW, TIMEOUT)
            buffer_id = await sim.inject_inbound(GW, event("to the new one"))
            assert (await new.expect("inbound"))["bufferId"] == buffer_id
    assert sim.counters(GW).connections == 2


async def test_an_unacked_live_delivery_is_replayed_after_a_network_drop(make_sim: MakeSim) -> None:
    sim = await make_sim()
    async with gateway(sim) as gw:
        await gw.hello()
        await sim.wait_live(GW, TIMEOUT)
        acked = await sim.inject_inbound(GW, event("acked"))
        assert (await gw.expect("inbound"))["bufferId"] == acked
        await gw.ack(acked)
        await sim.wait_acked(acked, TIMEOUT)
        dropped = await sim.inject_inbound(GW, event("dropped"))
        assert (await gw.expect("inbound"))["bufferId"] == dropped
        assert await sim.drop_connection(GW)
        assert await gw.closed() == (None, None)  # no close frame: a blip, not a goodbye
    async with gateway(sim) as gw:
        await gw.hello()
        replayed = await gw.expect("inbound")
        assert replayed["bufferId"] == dropped and replayed["event"] == event("dropped")
        await gw.ack(dropped)
        await sim.wait_acked(dropped, TIMEOUT)
        await gw.roundtrip("sync")  # and "acked" was not delivered again
    assert [d.buffer_id for d in sim.deliveries(GW)] == [acked, dropped, dropped]


async def test_passthrough_forward_carries_the_raw_body_and_the_hello_bot(make_sim: MakeSim) -> None:
    sim = await make_sim()
    body = '{"type":3,"data":{"custom_id":"ok","values":["é"]}}'.encode()
    async with gateway(sim) as gw:
        await gw.hello("discord", "bot-77")
        await sim.wait_live(GW, TIMEOUT)
        buffer_id = await sim.inject_passthrough(GW, body)
        frame = await gw.expect("passthrough_forward")
    assert frame["bufferId"] == buffer_id
    assert frame["forward"] == {
        "platform": "discord",
        "botId": "bot-77",
        "method": "POST",
        "path": "/interactions/bot-77",
        "headers": [["content-type", "application/json"]],
        "bodyB64": base64.b64encode(body).decode(),
    }


async def test_going_idle_is_acked_and_buffers_until_the_next_connection(make_sim: MakeSim) -> None:
    sim = await make_sim()
    async with gateway(sim) as gw:
        await gw.hello()
        await sim.wait_live(GW, TIMEOUT)
        await gw.send({"type": "going_idle"})
        await gw.expect("going_idle_ack")
        assert sim.idle(GW)
        held = await sim.inject_inbound(GW, event("while idle"))
        await gw.roundtrip("sync")  # inject returned, and the frame did not go out
        assert sim.deliveries(GW) == []
    assert sim.idle(GW)  # still buffered-only between connections
    async with gateway(sim) as gw:
        await gw.hello()
        frame = await gw.expect("inbound")
        assert frame["bufferId"] == held
        await gw.ack(held)
        await sim.wait_live(GW, TIMEOUT)
        assert not sim.idle(GW)
        live = await sim.inject_inbound(GW, event("live again"))
        assert (await gw.expect("inbound"))["bufferId"] == live
    assert sim.counters(GW).going_idle == 1


# -- framing --------------------------------------------------------------------------------------


async def test_frames_split_across_messages_and_batched_in_one_are_parsed(make_sim: MakeSim) -> None:
    sim = await make_sim()
    async with gateway(sim) as gw:
        hello = json.dumps({"type": "hello", "platform": "discord", "botId": "b"}) + "\n"
        await gw.ws.send(hello[:7])
        await gw.ws.send(hello[7:20])
        await gw.ws.send(hello[20:])
        await gw.expect("descriptor")
        two = [
            {"type": "outbound", "requestId": "a", "action": {"op": "typing", "chat_id": "c"}},
            {"type": "outbound", "requestId": "b", "action": {"op": "typing", "chat_id": "c"}},
        ]
        text = "".join(json.dumps(f) + "\n" for f in two)
        await gw.ws.send(text + '{"type":"outbound","requestId":"c",')  # the third frame arrives in halves
        await gw.ws.send('"action":{"op":"typing","chat_id":"c"}}\n')
        assert [(await gw.expect("outbound_result"))["requestId"] for _ in range(3)] == ["a", "b", "c"]


async def test_malformed_lines_are_skipped_without_dropping_the_socket(make_sim: MakeSim) -> None:
    sim = await make_sim()
    async with gateway(sim) as gw:
        await gw.hello()
        await gw.ws.send('not json\n[1, 2]\n{"no": "type"}\n{"type": "warp"}\n\n')
        await gw.ws.send('{"type": "outbound", "action": {}}\n{"type":"inbound_ack","bufferId":"x"}\n')
        await gw.ws.send(b"\x00binary")
        assert (await gw.roundtrip("still-alive"))["success"] is True
    assert sim.counters(GW).bad_frames == 7
    assert sim.counters(GW).connections == 1


# -- interrupts and the control API ---------------------------------------------------------------


async def test_interrupts_travel_both_ways(make_sim: MakeSim) -> None:
    sim = await make_sim()
    assert not await sim.send_interrupt(GW, "agent:main:discord:dm:c1", "c1")  # not connected
    async with gateway(sim) as gw:
        await gw.hello()
        await gw.send({"type": "interrupt", "session_key": "agent:main:discord:dm:c1", "reason": "stop"})
        await gw.roundtrip("sync")
        assert await sim.send_interrupt(GW, "agent:main:discord:dm:c2", "c2")
        frame = await gw.expect("interrupt_inbound")
    assert frame == {"type": "interrupt_inbound", "session_key": "agent:main:discord:dm:c2", "chat_id": "c2"}
    assert [(i.session_key, i.reason) for i in sim.interrupts(GW)] == [("agent:main:discord:dm:c1", "stop")]
    assert sim.counters(GW).interrupts == 1


async def test_control_routes_drive_the_simulator_over_http(make_sim: MakeSim) -> None:
    sim = await make_sim()
    async with httpx.AsyncClient(base_url=sim.base_url, timeout=TIMEOUT) as http:
        injected = await http.post("/sim/inbound", json={"gateway_id": GW, "event": event("over http")})
        buffer_id = injected.json()["bufferId"]
        assert (await http.get("/sim/unacked", params={"gateway_id": GW})).json() == {"unacked": [buffer_id]}
        body = {"gateway_id": GW, "body": {"type": 2, "data": {"name": "ask"}}}
        forward_id = (await http.post("/sim/passthrough", json=body)).json()["bufferId"]
        raw = base64.b64encode(b"\x01raw").decode()
        raw_id = (await http.post("/sim/passthrough", json={"gateway_id": GW, "bodyB64": raw})).json()[
            "bufferId"
        ]
        assert (await http.post("/sim/results", json={"gateway_id": GW, "mode": "never"})).status_code == 200
        bad = await http.post("/sim/results", json={"gateway_id": GW, "mode": "sometimes"})
        assert bad.status_code == 400 and "mode" in bad.json()["error"]
        assert (await http.post("/sim/inbound", content=b"{nope")).status_code == 400
        assert (await http.get("/sim/ops")).status_code == 400  # gateway_id is required

        async with gateway(sim) as gw:
            await gw.hello()
            frames = []
            for _ in range(3):
                frames.append(await gw.recv())
                await gw.ack(frames[-1]["bufferId"])
            await sim.wait_acked(raw_id, TIMEOUT)
            assert (await http.get("/sim/unacked", params={"gateway_id": GW})).json() == {"unacked": []}
            await gw.outbound("r1", {"op": "send", "chat_id": "c1", "content": "hi"})
            await sim.wait_for_op(GW, lambda op: op.request_id == "r1", TIMEOUT)
            ops = (await http.get("/sim/ops", params={"gateway_id": GW})).json()["ops"]
            status = (await http.get("/sim/status")).json()
            assert (await http.post("/sim/revoke", json={"gateway_id": GW})).json() == {"revoked": GW}
            assert await gw.closed() == (4401, "unauthorized")

    assert [f["bufferId"] for f in frames] == [buffer_id, forward_id, raw_id]
    assert frames[0]["event"] == event("over http")
    assert base64.b64decode(frames[1]["forward"]["bodyB64"]) == b'{"type":2,"data":{"name":"ask"}}'
    assert base64.b64decode(frames[2]["forward"]["bodyB64"]) == b"\x01raw"
    assert [(op["request_id"], op["op"], op["result"]) for op in ops] == [("r1", "send", None)]
    assert status["gateways"][GW]["connected"] is True and status["relay_url"] == sim.relay_url


def test_only_loopback_clients_count_as_local() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.0.1", "::1", "::ffff:127.0.0.1", "localhost"))
    assert not any(is_loopback(h) for h in ("10.0.0.1", "192.0.2.5", "::ffff:10.0.0.1", "", None, "example"))


# -- the command line -----------------------------------------------------------------------------


def _cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_") and k != "MY_RELAY_SECRET"}
    env.update(extra)
    return env


@pytest.mark.parametrize(
    ("flags", "variable"),
    [([], "CHATGATE_RELAY_SECRET"), (["--secret-env", "MY_RELAY_SECRET"], "MY_RELAY_SECRET")],
)
async def test_the_cli_refuses_to_start_without_its_secret_variable(
    tmp_path: Path, flags: list[str], variable: str
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "relaysim.cli", "--port", "0", "--db", str(tmp_path / "r.db"), *flags,
        env=_cli_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode == 78
    assert f"environment variable {variable} is not set".encode() in err
    assert out == b""
    assert not (tmp_path / "r.db").exists()


async def test_the_cli_serves_a_gateway_and_stops_on_sigterm(tmp_path: Path) -> None:
    # The installed console script, next to this interpreter (the README's venv puts it there).
    command = Path(sys.executable).with_name("chatgate-relay-sim")
    assert command.exists(), "install the simulator: pip install -e tools/relaysim"
    proc = await asyncio.create_subprocess_exec(
        str(command), "--port", "0", "--db", str(tmp_path / "r.db"),
        "--platform", "discord", "--platform", "telegram", "--supported-ops", "send,prompt",
        env=_cli_env(CHATGATE_RELAY_SECRET="cli secret"), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), TIMEOUT)).decode()
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        assert fields["gateway_id"] == "local" and fields["secret_env"] == "CHATGATE_RELAY_SECRET"
        assert "cli secret" not in line
        headers = auth(hand_token("local", "cli secret"))
        async with connect(fields["url"], additional_headers=headers, open_timeout=TIMEOUT) as ws:
            gw = RawGateway(ws)
            assert (await gw.hello("telegram"))["supported_ops"] == ["send", "prompt"]
            assert (await gw.hello("discord"))["supported_ops"] == ["send", "prompt"]
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


# -- files: the re-host and send_media ------------------------------------------------------------


async def test_the_re_host_serves_what_send_media_names_and_send_media_is_checked(make_sim: MakeSim) -> None:
    ops = ["send", "send_media"]
    sim = await make_sim(platforms=[{"platform": "discord", "supported_ops": ops}, {"platform": "telegram"}])
    sim.media.cap_bytes = 1000
    async with httpx.AsyncClient(base_url=sim.base_url, timeout=TIMEOUT) as http:
        post = http.post  # the bytes as the body, named by ?filename=
        assert (await post("/relay/media", content=b"x")).status_code == 401
        token = auth(hand_token(GW, SECRET))
        assert (await post("/relay/media", content=b"x" * 1001, headers=token)).status_code == 413
        png_type = token | {"content-type": "image/png"}
        made = await post("/relay/media?filename=a.png", content=b"png!", headers=png_type)
        url = made.json()["url"]
        served = await http.get(url)
    assert made.status_code == 200 and made.json()["expires_at"] > time.time() + 3000
    assert (served.content, served.headers["content-type"]) == (b"png!", "image/png")
    gone = url.rsplit("/", 1)[0] + "/nothing"
    media = {"op": "send_media", "chat_id": "c1", "media_kind": "image", "source_url": url, "caption": "a"}
    async with gateway(sim) as gw:
        await gw.hello("discord")
        await gw.hello("telegram")
        cases = [
            ({**media}, "discord", None),
            ({**media, "media_kind": "gif"}, "discord", "media_kind must be one of"),
            ({**media, "source_url": 7}, "discord", "source_url must be a string"),
            ({**media, "source_url": gone}, "discord", "no live re-host"),
            ({**media}, "telegram", "not in the descriptor's supported_ops"),
        ]
        for n, (action, platform, error) in enumerate(cases):
            await gw.outbound(f"m{n}", action, platform=platform)
            result = await gw.result(f"m{n}")
            assert result["success"] is (error is None), result
            assert error is None or error in result["error"], result
    (posted,) = [m for m in sim.messages(GW) if m.op == "send_media"]
    assert (posted.media_kind, posted.source_url, posted.content) == ("image", url, "a")
