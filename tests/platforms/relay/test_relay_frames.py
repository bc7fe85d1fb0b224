"""Typed relay frames: whatever arrives is a frame or a ``BadFrame`` with a reason, never an
exception; what the gateway sends is exactly the wire shape the simulator reads."""

from __future__ import annotations

import base64
import json
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatgate.platforms.relay import connection
from chatgate.platforms.relay.frames import (
    INTAKE_TYPES,
    Action,
    DeleteAction,
    Descriptor,
    DescriptorFrame,
    EditAction,
    FollowUpAction,
    GoingIdleAckFrame,
    GoingIdleFrame,
    HelloFrame,
    InboundAckFrame,
    InboundEvent,
    InboundFrame,
    Incoming,
    InterruptFrame,
    InterruptInboundFrame,
    OutboundFrame,
    OutboundResultFrame,
    PassthroughFrame,
    PromptAction,
    PromptOption,
    SendAction,
    SessionSource,
    TypingAction,
    read_buffer_id,
)
from chatgate.platforms.relay.wire import BadFrame, encode, parse_frame
from relaysim import ops
from relaysim.buffer import Entry
from relaysim.descriptors import SIMULATED_OPS, build_descriptor
from relaysim.frames import LineDecoder, parse_buffer_id
from relaysim.frames import encode as sim_encode
from support.relay_harness import GW, RelayWorld

INCOMING_MODELS = tuple(get_args(get_args(Incoming)[0]))
FRAME_TYPES = [
    "descriptor",
    "inbound",
    "passthrough_forward",
    "outbound_result",
    "interrupt_inbound",
    "going_idle_ack",
]
SOURCE_KEYS = list(SessionSource.model_fields)
EVENT_KEYS = list(InboundEvent.model_fields)
DESCRIPTOR_KEYS = list(Descriptor.model_fields)
RESULT_KEYS = ["success", "message_id", "error", "retry_after"]

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- what may arrive -----------------------------------------------------------------------------

tricky_text = st.sampled_from(["", " ", "discord", "c1", "command", "x" * 33_000, "a \ud800", "%%%", "e30="])
json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and infinities too: both parsers take them
    st.text(max_size=12),
    tricky_text,
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)


def shaped(keys: list[str], values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects whose keys are (mostly) the ones a model reads, holding anything."""
    return st.dictionaries(st.sampled_from(keys) | st.text(max_size=6), values, max_size=len(keys) + 1)


plausible = st.sampled_from(["discord", "c1", "u1", "m1", "group", "", " ", "command", 7, 0, True, None, 1.5])
value = plausible | json_value
source = st.builds(
    lambda rest, platform, chat: {**rest, "platform": platform, "chat_id": chat},
    shaped(SOURCE_KEYS, value),
    value,
    value,
) | shaped(SOURCE_KEYS, value)
event = st.builds(lambda rest, src: {**rest, "source": src}, shaped(EVENT_KEYS, value), source | value)
body = st.builds(
    lambda d: base64.b64encode(json.dumps(d).encode()).decode(), shaped(["id", "type", "data"], value)
)
forward = shaped(["platform", "bodyB64"], value | body)
descriptor = st.builds(lambda rest, p: {**rest, "platform": p}, shaped(DESCRIPTOR_KEYS, value), value)
framed = st.fixed_dictionaries(
    {"type": st.sampled_from([*FRAME_TYPES, "hello", "mystery", "", 5, None])},
    optional={
        "bufferId": value,
        "event": event | value,
        "forward": forward | value,
        "requestId": value,
        "result": shaped(RESULT_KEYS, value) | value,
        "descriptor": descriptor | value,
        "session_key": value,
        "chat_id": value,
    },
)


def check_parsed(line: str, raw: Any = None) -> None:
    parsed = parse_frame(line)
    if isinstance(parsed, BadFrame):
        assert parsed.reason.strip()
        if isinstance(raw, dict) and raw.get("type") in INTAKE_TYPES:
            # An intake frame keeps what its refusal needs: it is recorded and acknowledged.
            assert parsed.frame_type == raw["type"]
            assert parsed.buffer_id == read_buffer_id(raw.get("bufferId"))
        return
    assert isinstance(parsed, INCOMING_MODELS)
    if isinstance(raw, dict):
        assert parsed.type == raw["type"]


@SETTINGS
@given(raw=framed | json_value)
def test_any_json_value_is_a_frame_or_a_bad_frame_with_a_reason(raw: Any) -> None:
    check_parsed(json.dumps(raw), raw)
    check_parsed(json.dumps(raw, ensure_ascii=False), raw)


@SETTINGS
@given(line=st.text(max_size=200))
def test_any_text_is_a_frame_or_a_bad_frame_with_a_reason(line: str) -> None:
    check_parsed(line)


@pytest.mark.parametrize("depth", [150, 199, 200, 201, 600, 990, 5000])
@pytest.mark.parametrize(
    "wrap",
    [
        lambda deep: f"{deep}",
        lambda deep: f'{{"type":"outbound_result","requestId":"r","result":{{"error":{deep}}}}}',
        lambda deep: f'{{"type":"inbound","bufferId":"5","event":{{"reply_to":{deep},"source":{{}}}}}}',
        lambda deep: f'{{"type":"inbound","bufferId":"6","event":{{"media":[{{"url":"u","kind":{deep}}}]}}}}',
    ],
)
def test_deep_nesting_anywhere_is_never_an_exception(depth: int, wrap: Any) -> None:
    for deep in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth):
        line = wrap(deep)
        try:
            raw = json.loads(line)
        except RecursionError:
            raw = None
        check_parsed(line, raw)


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"outbound_result","requestId":"r","result":{"retry_after":' + "9" * 5000 + "}}",
        '{"type":"inbound","bufferId":' + "9" * 5000 + ',"event":{}}',
        '{"type":"outbound_result","requestId":"r","result":{"success":true,"message_id":'
        + "9" * 4000
        + "}}",
        '{"type":"inbound","event":{"text":"x","source":{"platform":"discord","chat_id":"\\udfff"}}}',
        '{"type":"inbound","event":{"text":NaN,"source":{"platform":Infinity,"chat_id":-Infinity}}}',
        '{"type":"inbound","type":"passthrough_forward","forward":{"platform":"discord","bodyB64":"e30="}}',
        '{"type":"inbound"} trailing',
        "\ufeff{}",
    ],
)
def test_edge_lines_are_a_frame_or_a_bad_frame(line: str) -> None:
    check_parsed(line)


def test_refusals_name_the_field_and_keep_the_buffer_id() -> None:
    cases = {
        '{"type":"inbound","bufferId":3,"event":{"text":"x"}}': "inbound frame: event has no 'source' object",
        '{"type":"inbound","bufferId":"b4"}': "inbound frame: no 'event' object",
        '{"type":"inbound","bufferId":"b5","event":{"source":{"platform":"d","chat_id":[1]}}}': (
            "inbound frame: event.source.chat_id must be a string, not list"
        ),
        '{"type":"passthrough_forward","bufferId":"b6","forward":{"platform":"discord"}}': (
            "passthrough_forward frame: forward.bodyB64 is missing"
        ),
        '{"type":"interrupt_inbound","session_key":""}': (
            "interrupt_inbound frame: session_key must be a non-empty string"
        ),
        '{"type":"outbound_result","requestId":"r"}': "outbound_result frame: no 'result' object",
        '{"type":"descriptor","descriptor":{"platform":"x","len_unit":"bytes"}}': "descriptor.len_unit",
        '{"type":"hello"}': "unknown frame type 'hello'",
    }
    for line, reason in cases.items():
        bad = parse_frame(line)
        assert isinstance(bad, BadFrame) and reason in bad.reason, (line, bad)
    bad = parse_frame('{"type":"inbound","bufferId":3,"event":{"text":"x"}}')
    assert isinstance(bad, BadFrame) and (bad.frame_type, bad.buffer_id) == ("inbound", "3")
    for unusable in (True, "", 1.5, [1], None):
        line = json.dumps({"type": "inbound", "bufferId": unusable, "event": {}})
        assert parse_frame(line) == BadFrame(
            "inbound frame: event has no 'source' object", line, "inbound", None
        )


def test_lenient_fields_never_refuse_a_frame() -> None:
    result = parse_frame(
        json.dumps(
            {
                "type": "outbound_result",
                "requestId": 5,
                "result": {"success": "true", "message_id": 42, "error": {"x": 1}, "retry_after": 4000},
                "extra": "ignored",
            }
        )
    )
    assert isinstance(result, OutboundResultFrame) and result.requestId is None
    assert (result.result.success, result.result.message_id, result.result.error) == (False, "42", "{'x': 1}")
    assert result.result.retry_after is None
    interrupt = parse_frame('{"type":"interrupt_inbound","session_key":"k","chat_id":{"bad":1}}')
    assert interrupt == InterruptInboundFrame(type="interrupt_inbound", session_key="k", chat_id=None)
    inbound = parse_frame(
        json.dumps({"type": "inbound", "bufferId": 12, "event": {"source": {"platform": "d", "chat_id": 7}}})
    )
    assert isinstance(inbound, InboundFrame) and inbound.bufferId == "12"
    assert inbound.event.source.chat_id == "7"


# -- what the simulator sends, as the gateway reads it -------------------------------------------


def sim_line(frame: dict[str, Any]) -> str:
    [line] = sim_encode(frame).splitlines()
    return line


@pytest.mark.parametrize("platform", ["discord", "telegram", "slack", "matrix"])
def test_every_simulator_descriptor_parses(platform: str) -> None:
    descriptor = build_descriptor(platform, {"supported_ops": sorted(SIMULATED_OPS)})
    frame = parse_frame(sim_line({"type": "descriptor", "descriptor": descriptor}))
    assert isinstance(frame, DescriptorFrame) and frame.descriptor.platform == platform
    assert frame.descriptor.supports("prompt")


def test_simulator_deliveries_results_and_interrupts_parse() -> None:
    event = {"text": "hi", "message_id": "m1", "source": {"platform": "discord", "chat_id": "c1"}}
    inbound = parse_frame(sim_line(Entry(41, "gw", {"type": "inbound", "event": event}, 0.0).wire()))
    assert isinstance(inbound, InboundFrame) and inbound.bufferId == "41" and inbound.event.text == "hi"
    forward = {"platform": "discord", "botId": "b", "method": "POST", "headers": [["a", "b"]]}
    forward["bodyB64"] = base64.b64encode(b'{"id":"1"}').decode()
    passthrough = parse_frame(
        sim_line(Entry(42, "gw", {"type": "passthrough_forward", "forward": forward}, 0).wire())
    )
    assert isinstance(passthrough, PassthroughFrame) and passthrough.forward.body == b'{"id":"1"}'
    for result in (ops.failure("no"), {"success": True, "message_id": "m9"}, {"success": True}):
        parsed = parse_frame(sim_line({"type": "outbound_result", "requestId": "r1", "result": result}))
        assert isinstance(parsed, OutboundResultFrame) and parsed.result.success is result["success"]
        assert parsed.result.message_id == result.get("message_id")
        assert parsed.result.error == result.get("error")
    interrupt = parse_frame(sim_line({"type": "interrupt_inbound", "session_key": "k", "chat_id": "c1"}))
    assert interrupt == InterruptInboundFrame(type="interrupt_inbound", session_key="k", chat_id="c1")
    assert parse_frame(sim_line({"type": "going_idle_ack"})) == GoingIdleAckFrame(type="going_idle_ack")


# -- what the gateway sends, as the simulator reads it -------------------------------------------

name = st.text(min_size=1, max_size=20)
content = st.text(min_size=1, max_size=300).filter(str.strip)
metadata = st.dictionaries(st.sampled_from(["scope_id", "user_id", "thread_id"]), name)
actions: st.SearchStrategy[Action] = st.one_of(
    st.builds(SendAction, chat_id=name, content=content, metadata=metadata, reply_to=st.none() | name),
    st.builds(EditAction, chat_id=name, message_id=name, content=content, metadata=metadata),
    st.builds(TypingAction, chat_id=name, metadata=metadata),
    st.builds(DeleteAction, chat_id=name, message_id=name, metadata=metadata),
    st.builds(FollowUpAction, session_key=name, kind=name, content=content, metadata=metadata),
    st.builds(
        PromptAction,
        chat_id=name,
        prompt_kind=st.just("approval"),
        prompt_id=name,
        content=content,
        options=st.lists(
            st.builds(PromptOption, id=name, label=name, style=st.sampled_from(["primary", "danger"])),
            min_size=1,
            max_size=4,
        ).map(tuple),
        metadata=metadata,
    ),
)
ALL_OPS = build_descriptor("slack", {"supported_ops": sorted(SIMULATED_OPS)})


def on_the_wire(frame: Any) -> dict[str, Any]:
    """The frame as the simulator's reader sees it: one line, one JSON object."""
    line = encode(frame)
    assert line.endswith("\n") and line.count("\n") == 1
    [read] = list(LineDecoder().feed(line))
    assert isinstance(read, dict), read
    assert read == frame.model_dump(mode="json", exclude_none=True)
    return read


@SETTINGS
@given(
    action=actions,
    platform=st.none() | st.sampled_from(["discord", "slack"]),
    bot=st.none() | name,
)
def test_outbound_frames_are_what_the_simulator_accepts(
    action: Action, platform: str | None, bot: str | None
) -> None:
    read = on_the_wire(OutboundFrame(requestId="0123abcd", action=action, platform=platform, botId=bot))
    assert read["type"] == "outbound" and read["requestId"] == "0123abcd"
    assert ("platform" in read) is (platform is not None) and ("botId" in read) is (bot is not None)
    assert ops.check(read["action"], ALL_OPS) is None
    if isinstance(action, SendAction) and action.reply_to is None:
        assert "reply_to" not in read["action"]


@SETTINGS
@given(
    platform=name,
    bot=name,
    manifest=st.none() | st.lists(st.fixed_dictionaries({"name": name, "description": name}), min_size=1),
    buffer_id=st.integers(min_value=1, max_value=2**62),
    session_key=name,
)
def test_control_frames_are_what_the_simulator_accepts(
    platform: str, bot: str, manifest: list[dict[str, str]] | None, buffer_id: int, session_key: str
) -> None:
    hello = on_the_wire(
        HelloFrame(platform=platform, botId=bot, command_manifest=manifest and tuple(manifest))
    )
    assert hello["platform"] == platform and hello["botId"] == bot
    assert hello.get("command_manifest") == manifest
    ack = on_the_wire(InboundAckFrame(bufferId=str(buffer_id)))
    assert parse_buffer_id(ack["bufferId"]) == buffer_id
    interrupt = on_the_wire(InterruptFrame(session_key=session_key, reason="/stop"))
    assert interrupt == {"type": "interrupt", "session_key": session_key, "reason": "/stop"}
    assert on_the_wire(GoingIdleFrame()) == {"type": "going_idle"}


def test_the_wire_shape_of_each_outgoing_frame_is_unchanged() -> None:
    """The exact lines of the dict-built frames these models replaced."""
    target = {"scope_id": "g1", "user_id": "u1"}
    lines = {
        encode(
            OutboundFrame(
                requestId="r1",
                action=SendAction(chat_id="c1", content="hé", metadata=target, reply_to="m0"),
                platform="discord",
                botId="b1",
            )
        ): {
            "type": "outbound",
            "requestId": "r1",
            "action": {"op": "send", "chat_id": "c1", "content": "hé", "metadata": target, "reply_to": "m0"},
            "platform": "discord",
            "botId": "b1",
        },
        encode(HelloFrame(platform="telegram", botId="b2")): {
            "type": "hello",
            "platform": "telegram",
            "botId": "b2",
        },
        encode(InboundAckFrame(bufferId="17")): {"type": "inbound_ack", "bufferId": "17"},
    }
    for line, expected in lines.items():
        assert line == json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":")) + "\n"
        assert json.loads(line) == expected


# -- the reader, live ------------------------------------------------------------------------------


async def test_refused_intake_frames_are_recorded_and_acked_and_a_parser_bug_never_stops_the_reader(
    world: RelayWorld, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = connection.parse_frame

    def buggy(line: str) -> Any:
        if "boom" in line:
            raise TypeError("a bug in a validator")
        return real(line)

    monkeypatch.setattr(connection, "parse_frame", buggy)
    await world.start()
    await world.sim.wait_connected(GW, 10)
    assert await world.sim.send_raw(GW, '{"type":"going_idle_ack","boom":1}\n')
    refused = await world.sim.inject_inbound(GW, {"text": "no chat", "source": {"platform": "discord"}})
    await world.sim.wait_acked(refused, 10)
    ok = {
        "text": "hi",
        "message_id": "m1",
        "source": {"platform": "discord", "chat_id": "c1", "user_id": "u1"},
    }
    await world.sim.inject_inbound(GW, ok)
    sent = await world.wait_ops("send", 1)
    assert sent[0]["content"] == "echo: hi"
    assert world.sim.connected(GW) and world.sim.counters(GW).connections == 1
    assert world.gateway is not None
    [rejected] = await world.gateway.store.rejected()
    assert rejected.reason == "inbound frame: event.source.chat_id is missing"
    assert "parsing a frame failed" in caplog.text and "a bug in a validator" in caplog.text
