"""The relay's pure parts: the upgrade token, line framing, the descriptor and the text lane."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from chatgate.domain.inbound import Inbound
from chatgate.domain.session_key import session_key
from chatgate.domain.source import canonical_source
from chatgate.platforms.relay.auth import make_upgrade_token
from chatgate.platforms.relay.connection import dial_url
from chatgate.platforms.relay.frames import Descriptor, GoingIdleAckFrame, InboundFrame, InterruptInboundFrame
from chatgate.platforms.relay.text_lane import to_inbound
from chatgate.platforms.relay.wire import BadFrame, FrameSplitter, parse_frame


def decode_event(event: object, buffer_id: str | None, *, received_at: float) -> Inbound | BadFrame:
    """An ``inbound`` frame holding ``event``, parsed and decoded as the relay hub does."""
    frame = parse_frame(json.dumps({"type": "inbound", "event": event}))
    if isinstance(frame, BadFrame):
        return frame
    assert isinstance(frame, InboundFrame)
    return to_inbound(frame.event, buffer_id, received_at=received_at)


def _verify_by_hand(token: str, secrets: list[str], now: int) -> str | None:
    """An independent reading of the documented formula; returns the gateway id or None."""
    padded = token + "=" * (-len(token) % 4)
    raw = base64.urlsafe_b64decode(padded).decode()
    gateway_id, exp, sig = raw.rsplit(":", 2)
    for secret in secrets:
        expected = hmac.new(secret.encode(), f"{gateway_id}:{exp}".encode(), hashlib.sha256).hexdigest()
        if hmac.compare_digest(expected, sig) and int(exp) > now:
            return gateway_id
    return None


def test_upgrade_token_round_trips_against_an_independent_implementation() -> None:
    token = make_upgrade_token("gw-1", "s3cret", ttl_seconds=300, now=1_700_000_000)
    assert "=" not in token and "+" not in token and "/" not in token
    assert _verify_by_hand(token, ["other", "s3cret"], now=1_700_000_000) == "gw-1"
    assert _verify_by_hand(token, ["wrong"], now=1_700_000_000) is None
    assert _verify_by_hand(token, ["s3cret"], now=1_700_000_301) is None  # expired
    raw = base64.urlsafe_b64decode(token + "==").decode()
    assert raw.split(":")[1] == str(1_700_000_300)


def test_a_gateway_id_with_a_colon_is_refused() -> None:
    with pytest.raises(ValueError, match="':'"):
        make_upgrade_token("a:b", "s")


@pytest.mark.parametrize(
    ("configured", "dialed"),
    [
        ("https://relay.example", "wss://relay.example/relay"),
        ("http://127.0.0.1:8787/", "ws://127.0.0.1:8787/relay"),
        ("ws://h/relay", "ws://h/relay"),
    ],
)
def test_dial_url_normalizes_the_base_url(configured: str, dialed: str) -> None:
    assert dial_url(configured) == dialed


def test_frames_split_across_and_packed_into_messages_are_reassembled() -> None:
    splitter = FrameSplitter()
    first = json.dumps({"type": "interrupt_inbound", "session_key": "k1", "n": 1})
    second = json.dumps({"type": "going_idle_ack", "n": 2})
    assert splitter.feed(first[:5]) == []
    lines = splitter.feed(first[5:] + "\n" + second + "\n")
    assert lines == [first, second]
    assert [parse_frame(line) for line in lines if isinstance(line, str)] == [
        InterruptInboundFrame(type="interrupt_inbound", session_key="k1"),
        GoingIdleAckFrame(type="going_idle_ack"),
    ]
    assert splitter.feed(b'{"type":"going_idle_ack"}\n') == ['{"type":"going_idle_ack"}']


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "not JSON"),
        ("[1,2]", "not a JSON object"),
        ('{"no_type": 1}', "no string 'type'"),
        ('{"type": 5}', "no string 'type'"),
        ('{"type": "going_idle_ack", "n": ' + "9" * 5000 + "}", "not JSON"),
        ('{"type": "inbound", "bufferId": ' + "9" * 4301 + "}", "not JSON"),
        ('{"type": ' + "-" + "1" * 10_000 + "}", "not JSON"),
    ],
)
def test_malformed_lines_become_bad_frames_and_the_next_line_still_parses(line: str, reason: str) -> None:
    lines = FrameSplitter().feed(line + "\n" + '{"type":"going_idle_ack"}\n')
    out = [parse_frame(item) if isinstance(item, str) else item for item in lines]
    assert isinstance(out[0], BadFrame) and reason in out[0].reason
    assert out[1] == GoingIdleAckFrame(type="going_idle_ack")


def test_an_oversized_frame_is_dropped_without_growing_the_buffer() -> None:
    splitter = FrameSplitter(max_bytes=100)
    out = splitter.feed("x" * 150)
    assert len(out) == 1 and isinstance(out[0], BadFrame) and "longer than 100" in out[0].reason
    assert splitter.feed("y" * 30 + '\n{"type":"going_idle_ack"}\n') == ['{"type":"going_idle_ack"}']


def test_descriptor_maps_to_capabilities_and_gates_new_ops() -> None:
    legacy = Descriptor.model_validate(
        {"platform": "Discord", "max_message_length": 0, "supports_edit": True, "len_unit": "chars", "x": 1}
    )
    caps = legacy.capabilities()
    assert legacy.platform == "discord" and caps.max_length == 4096 and caps.edit and caps.typing
    assert legacy.supports("follow_up") and not legacy.supports("prompt") and not caps.buttons
    advertised = Descriptor.model_validate(
        {
            "platform": "telegram",
            "max_message_length": 4096,
            "len_unit": "utf16",
            "supported_ops": ["send", "prompt"],
        }
    )
    assert advertised.supports("prompt") and not advertised.supports("follow_up")
    assert advertised.capabilities().length_unit == "utf16" and not advertised.capabilities().edit
    bad = parse_frame(json.dumps({"type": "descriptor", "descriptor": {"platform": ""}}))
    assert isinstance(bad, BadFrame)


def _event(**source: object) -> dict[str, object]:
    base: dict[str, object] = {"platform": "discord", "chat_id": "c1", "chat_type": "group", "user_id": "u1"}
    base.update(source)
    return {"text": "hello", "message_type": "text", "source": base}


def test_text_lane_user_name_prefers_display_name_then_name_then_handle() -> None:
    names = [
        ({"user_display_name": "Benny", "user_name": "ben", "user_handle": "b"}, "Benny"),
        ({"user_display_name": "", "user_name": "ben", "user_handle": "b"}, "ben"),
        ({"user_handle": "b"}, "b"),
    ]
    for fields, expected in names:
        decoded = decode_event(_event(**fields), None, received_at=0.0)
        assert not isinstance(decoded, BadFrame)
        assert decoded.source.user_name == expected


def test_root_and_nested_message_ids_converge_and_key_the_delivery() -> None:
    root_only = {**_event(), "message_id": "m9"}
    nested_only = _event(message_id="m9")
    both = {**_event(message_id="other"), "message_id": "m9"}
    decoded = [decode_event(e, "b1", received_at=0.0) for e in (root_only, nested_only, both)]
    for d in decoded:
        assert not isinstance(d, BadFrame)
        assert d.message_ref == "m9" and d.delivery_id == "discord:c1:m9"
    no_id = decode_event(_event(), "b7", received_at=0.0)
    assert not isinstance(no_id, BadFrame) and no_id.delivery_id == "buffer:b7"


def test_text_lane_labels_are_an_observation_even_when_null() -> None:
    cleared = decode_event(_event(chat_name=None, chat_topic=None), None, received_at=0.0)
    absent = decode_event(_event(), None, received_at=0.0)
    assert not isinstance(cleared, BadFrame) and cleared.labels_observed()
    assert not isinstance(absent, BadFrame) and not absent.labels_observed()


def test_text_lane_identity_is_the_native_session_identity() -> None:
    decoded = decode_event(
        _event(chat_type="thread", chat_id="th1", thread_id="th1", parent_chat_id="p1", scope_id="g1"),
        None,
        received_at=0.0,
    )
    assert not isinstance(decoded, BadFrame)
    assert session_key(canonical_source(decoded.source)) == "agent:main:discord:thread:th1:th1"


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ("not an object", "'event' object"),
        ({"text": "x"}, "'source'"),
        ({"text": 5, "source": {"platform": "discord", "chat_id": "c"}}, "event.text"),
        ({"text": "x", "source": {"chat_id": "c"}}, "source.platform"),
        ({"text": "x", "source": {"platform": "discord"}}, "source.chat_id"),
        ({"text": "x", "source": {"platform": "discord", "chat_id": {"a": 1}}}, "source.chat_id"),
        ({"text": "x", "media_urls": "u", "source": {"platform": "discord", "chat_id": "c"}}, "media_urls"),
        ({"text": "x" * 32_001, "source": {"platform": "discord", "chat_id": "c"}}, "limit"),
    ],
)
def test_unusable_text_events_say_why(event: object, reason: str) -> None:
    decoded = decode_event(event, "b", received_at=0.0)
    assert isinstance(decoded, BadFrame) and reason in decoded.reason
