"""Inbound events survive serialization with their identities kept apart."""

from __future__ import annotations

import copy
import json

from msgspec.structs import fields

from chatgate.domain.inbound import Attachment, Inbound
from chatgate.domain.source import Source


def full_inbound() -> Inbound:
    return Inbound(
        transport="discord-gw",
        delivery_id="d-1",
        source=Source(
            platform="discord",
            chat_id="th1",
            chat_type="thread",
            user_id="u1",
            user_name="Ann",
            thread_id="th1",
            parent_chat_id="c1",
            scope_id="g1",
            chat_name="design",
            chat_topic="v2",
            user_id_alt="alt1",
        ),
        text="approve",
        kind="button",
        action_id="act-1",
        message_ref="msg-1",
        reply_to="msg-0",
        received_at=1700000000.25,
        attachments=(
            Attachment(kind="image", ref="https://cdn/x.png", mime="image/png", name="x.png", size=1234),
            Attachment(kind="file", ref="file-2"),
        ),
        payload={"custom_id": "approve:1", "nested": {"values": ["a", "b"]}},
    )


def test_round_trip_preserves_every_field() -> None:
    original = full_inbound()
    restored = Inbound.from_dict(original.to_dict())
    assert restored == original
    for f in fields(Inbound):
        assert getattr(restored, f.name) == getattr(original, f.name), f.name


def test_round_trip_through_json_preserves_every_field() -> None:
    original = full_inbound()
    restored = Inbound.from_dict(json.loads(json.dumps(original.to_dict())))
    assert restored == original


def test_round_trip_restores_typed_source_and_attachments() -> None:
    restored = Inbound.from_dict(full_inbound().to_dict())
    assert isinstance(restored.source, Source)
    assert isinstance(restored.attachments, tuple)
    assert all(isinstance(a, Attachment) for a in restored.attachments)
    assert restored.attachments[0].size == 1234
    assert restored.attachments[1] == Attachment(kind="file", ref="file-2")


def test_action_id_message_ref_and_reply_to_stay_in_their_own_fields() -> None:
    data = full_inbound().to_dict()
    assert (data["action_id"], data["message_ref"], data["reply_to"]) == ("act-1", "msg-1", "msg-0")
    restored = Inbound.from_dict(data)
    assert restored.action_id == "act-1"
    assert restored.message_ref == "msg-1"
    assert restored.reply_to == "msg-0"
    assert restored.delivery_id == "d-1"


def test_absent_identities_stay_none_and_do_not_borrow_from_each_other() -> None:
    slash = Inbound(
        transport="t",
        delivery_id="d-2",
        source=Source(platform="discord", chat_id="c1", chat_type="group"),
        text="/status",
        kind="command",
        action_id="act-9",
    )
    restored = Inbound.from_dict(slash.to_dict())
    assert restored.action_id == "act-9"
    assert restored.message_ref is None
    assert restored.reply_to is None


def test_minimal_inbound_round_trips_with_defaults() -> None:
    minimal = Inbound(
        transport="webchat", delivery_id="d-3", source=Source(platform="webchat", chat_id="c1"), text="hi"
    )
    restored = Inbound.from_dict(minimal.to_dict())
    assert restored == minimal
    assert restored.kind == "text"
    assert restored.attachments == ()
    assert restored.payload == {}


def test_to_dict_is_plain_data() -> None:
    data = full_inbound().to_dict()
    assert isinstance(data["source"], dict)
    assert all(isinstance(a, dict) for a in data["attachments"])
    json.dumps(data)  # raises if anything is not plain data


def test_from_dict_does_not_mutate_its_input() -> None:
    data = full_inbound().to_dict()
    before = copy.deepcopy(data)
    Inbound.from_dict(data)
    assert data == before


def test_from_dict_canonicalizes_the_source() -> None:
    data = full_inbound().to_dict()
    data["source"]["chat_id"] = "  th1 "
    data["source"]["platform"] = "Discord"
    restored = Inbound.from_dict(data)
    assert restored.source.chat_id == "th1"
    assert restored.source.platform == "discord"
