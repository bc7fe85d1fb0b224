"""Bad input on /ws: a structured error frame, and the socket and the gateway keep working."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatgate.platforms.webchat.protocol import FrameError, Hello, Message, Received, decode
from support.web_harness import StartGateway, WebClient

Connect = Callable[[int], Awaitable[WebClient]]


@dataclass(frozen=True)
class Bad:
    payload: str | bytes
    code: str
    frame_id: str | None = None
    before_hello: bool = False


def _j(frame: Any) -> str:
    return json.dumps(frame)


BAD_INPUTS = {
    "invalid_json": Bad('{"type": "message", "id": "j1", "text": ', "invalid_json"),
    "not_json_at_all": Bad("hello there", "invalid_json"),
    "json_array": Bad(_j([{"type": "message", "id": "a1", "text": "hi"}]), "invalid_frame"),
    "json_string": Bad(_j("message"), "invalid_frame"),
    "json_number": Bad("42", "invalid_frame"),
    "json_null": Bad("null", "invalid_frame"),
    "unknown_type": Bad(_j({"type": "typing", "id": "t1"}), "unknown_type", "t1"),
    "missing_type": Bad(_j({"id": "t2", "text": "hi"}), "unknown_type", "t2"),
    "non_string_type": Bad(_j({"type": 7, "id": "t3"}), "unknown_type", "t3"),
    "message_without_id": Bad(_j({"type": "message", "text": "hi"}), "invalid_frame"),
    "message_without_text": Bad(_j({"type": "message", "id": "nt1"}), "invalid_frame", "nt1"),
    "message_with_blank_id": Bad(_j({"type": "message", "id": "   ", "text": "hi"}), "invalid_frame", "   "),
    "message_with_number_text": Bad(_j({"type": "message", "id": "nt2", "text": 5}), "invalid_frame", "nt2"),
    "hello_without_chat_id": Bad(_j({"type": "hello", "user_id": "u1"}), "invalid_frame"),
    "received_without_message_id": Bad(_j({"type": "received"}), "invalid_frame"),
    "message_before_hello": Bad(
        _j({"type": "message", "id": "early", "text": "too soon"}), "not_ready", "early", before_hello=True
    ),
    "received_before_hello": Bad(
        _j({"type": "received", "message_id": "o1"}), "not_ready", before_hello=True
    ),
    "one_megabyte_text": Bad(
        _j({"type": "message", "id": "big", "text": "x" * 1_000_000}), "too_large", "big"
    ),
    "invalid_utf8_binary": Bad(b'{"type":"message","id":"u8","text":"caf\xe9 \xff\xfe"}', "invalid_utf8"),
    "empty_text": Bad(_j({"type": "message", "id": "e1", "text": ""}), "invalid_frame", "e1"),
    "whitespace_text": Bad(_j({"type": "message", "id": "e2", "text": " \n\t "}), "invalid_frame", "e2"),
    "integer_over_4300_digits": Bad(
        '{"type": "message", "id": "n1", "text": "hi", "n": ' + "9" * 5000 + "}", "invalid_json"
    ),
    "integer_over_4300_digits_as_text": Bad(
        '{"type": "message", "id": "n2", "text": ' + "1" * 4301 + "}", "invalid_json"
    ),
    "negative_integer_over_4300_digits": Bad("[-" + "7" * 10_000 + "]", "invalid_json"),
    "huge_float_exponent": Bad('{"type": "message", "id": "f1", "text": 1e999999}', "invalid_frame", "f1"),
    "nan_as_id": Bad('{"type": "message", "id": NaN, "text": "hi"}', "invalid_frame"),
    "received_unparseable_message_id": Bad(_j({"type": "received", "message_id": "xyz"}), "invalid_frame"),
}


@pytest.mark.parametrize("bad", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
async def test_bad_frame_gets_error_code_and_socket_and_gateway_keep_working(
    bad: Bad, start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    bystander = await connect_client(gateway.port)
    await bystander.hello("chat-bystander", "bob")
    client = await connect_client(gateway.port)
    if not bad.before_hello:
        await client.hello("chat-bad", "alice")

    await client.send_raw(bad.payload)
    error = await client.recv()
    assert error["type"] == "error", error
    assert error["code"] == bad.code, error
    assert isinstance(error["message"], str) and error["message"], "the error must say what was wrong"
    assert error.get("id") == bad.frame_id, error
    assert await client.sync() == [], "a rejected frame produced more than one error (or an ack)"

    if bad.before_hello:
        await client.hello("chat-bad", "alice")
    # The same socket still works. A rejected frame's id was not admitted: reusing it is a new message.
    msg_id = bad.frame_id if bad.frame_id and bad.frame_id.strip() else "after-error"
    frames = await client.ask(msg_id, "still there?")
    assert frames[0] == {"type": "ack", "id": msg_id, "duplicate": False}
    assert frames[-1]["text"] == "echo: still there?"
    # And the gateway still serves everyone else.
    other = await bystander.ask("b1", "and me?")
    assert other[-1]["text"] == "echo: and me?"


async def test_many_bad_frames_in_a_row_never_close_the_socket(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-barrage")
    payloads = [b.payload for b in BAD_INPUTS.values() if not b.before_hello] * 3
    for payload in payloads:
        await client.send_raw(payload)
    frames = await client.sync()
    assert len(frames) == len(payloads)
    assert [f["type"] for f in frames] == ["error"] * len(payloads)
    assert (await client.ask("ok", "fine"))[-1]["text"] == "echo: fine"


async def test_received_for_unknown_message_id_gets_error(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-unknown-received")
    await client.send({"type": "received", "message_id": "o999999"})
    frames = await client.sync()
    assert [f.get("type") for f in frames] == ["error"], frames
    assert frames[0]["code"] in ("invalid_frame", "unknown_message")


async def test_deeply_nested_json_gets_error_and_socket_keeps_working(
    start_gateway: StartGateway, connect_client: Connect
) -> None:
    gateway = await start_gateway()
    assert gateway.port is not None
    client = await connect_client(gateway.port)
    await client.hello("chat-nested")
    await client.send_raw("[" * 100_000)
    error = await client.recv()
    assert error["type"] == "error"
    assert error["code"] == "invalid_json"
    assert (await client.ask("after", "still here"))[-1]["text"] == "echo: still here"


# ---------------------------------------------------------------- protocol.decode, fuzzed

FRAME_CODES = {"invalid_utf8", "invalid_json", "invalid_frame", "unknown_type"}

_json_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
_json_value = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_field_names = st.sampled_from(
    ["type", "id", "text", "chat_id", "user_id", "user_name", "token", "message_id"]
)
_frame_like = st.dictionaries(
    _field_names,
    st.sampled_from(["hello", "message", "received", "", "HELLO"]) | _json_value,
    max_size=6,
)


def _encodings(obj: Any) -> st.SearchStrategy[str | bytes]:
    text = json.dumps(obj)
    return st.sampled_from([text, text.encode("utf-8")])


_raw_frames = st.one_of(
    st.text(),
    st.binary(),
    _json_value.flatmap(_encodings),
    _frame_like.flatmap(_encodings),
    # Valid JSON bytes with some bytes flipped: truncated and invalid UTF-8 sequences.
    st.tuples(_frame_like, st.lists(st.tuples(st.integers(0, 500), st.integers(0, 255)), max_size=3)).map(
        lambda t: _corrupt(json.dumps(t[0]).encode("utf-8"), t[1])
    ),
)


def _corrupt(data: bytes, flips: list[tuple[int, int]]) -> bytes:
    buf = bytearray(data)
    for pos, byte in flips:
        if buf:
            buf[pos % len(buf)] = byte
    return bytes(buf)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=_raw_frames)
def test_decode_returns_a_frame_model_or_raises_frame_error(raw: str | bytes) -> None:
    try:
        frame = decode(raw)
    except FrameError as exc:
        assert exc.code in FRAME_CODES
        assert isinstance(exc.message, str) and exc.message
        assert exc.frame_id is None or isinstance(exc.frame_id, str)
        return
    assert isinstance(frame, Hello | Message | Received)


@settings(deadline=None)
@given(
    msg_id=st.text(min_size=1, max_size=50).filter(lambda s: s.strip() == s and s != ""),
    text=st.text(max_size=200),
    as_bytes=st.booleans(),
)
def test_decode_keeps_a_valid_message_frame_exactly(msg_id: str, text: str, as_bytes: bool) -> None:
    raw = json.dumps({"type": "message", "id": msg_id, "text": text, "extra": [1, 2]})
    frame = decode(raw.encode("utf-8") if as_bytes else raw)
    assert frame == Message(type="message", id=msg_id, text=text)


def test_a_regenerate_names_the_message_it_asks_again_and_a_bad_name_is_refused() -> None:
    frame = decode(json.dumps({"type": "message", "id": "m2", "text": "q", "regenerates": "m1"}))
    assert isinstance(frame, Message) and frame.payload() == {"regenerates": "m1"}
    plain = decode(json.dumps({"type": "message", "id": "m3", "text": "q"}))
    assert isinstance(plain, Message) and plain.payload() == {}
    for bad in ("", "   ", "x" * 201, 7, ["m1"]):
        with pytest.raises(FrameError) as info:
            decode(json.dumps({"type": "message", "id": "m4", "text": "q", "regenerates": bad}))
        assert (info.value.code, info.value.frame_id) == ("invalid_frame", "m4"), bad


def test_decode_rejects_deeply_nested_json_with_frame_error() -> None:
    with pytest.raises(FrameError) as info:
        decode("[" * 100_000)
    assert info.value.code == "invalid_json"


async def test_a_lone_surrogate_gets_a_structured_error_and_the_socket_keeps_working(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway()
    assert gateway.port
    client = await WebClient.connect(gateway.port)
    await client.hello("chat-surrogate")
    await client.send_raw(
        '{"type": "message", "id": "m1", "text": "bad \\ud800 text"}'
    )  # legal JSON, not UTF-8
    error = await client.recv()
    assert error["type"] == "error" and error["code"] == "invalid_text" and error["id"] == "m1"
    assert "UTF-8" in error["message"]
    frames = await client.ask("m2", "still fine")
    assert frames[-1] == {"type": "final", "message_id": frames[-1]["message_id"], "in_reply_to": "m2",
                          "text": "echo: still fine"}  # fmt: skip
    await client.close()
