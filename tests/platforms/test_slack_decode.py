"""The Slack decoders: any JSON gives an ``Inbound``, an ``Undecodable`` with a reason, or a
``Skipped``, never an exception (an exception would make Bolt answer 500, so the envelope
would never be acknowledged and Slack would redeliver it forever)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from slack_fake import BOT_USER, TEAM, block_action, message_event, slash_command

from chatgate.domain.inbound import Inbound
from chatgate.engine.ports import Undecodable
from chatgate.platforms.kit.skipped import Skipped
from chatgate.platforms.slack.decode import (
    IntakeRules,
    decode_command,
    decode_event,
    strip_mention,
)
from chatgate.platforms.slack.interactive import decode_interactive

RULES = IntakeRules(BOT_USER)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=30,
)
KEYS = [
    "event_id",
    "event",
    "type",
    "channel",
    "user",
    "ts",
    "text",
    "thread_ts",
    "subtype",
    "bot_id",
    "channel_type",
    "team_id",
    "trigger_id",
    "actions",
    "message",
    "container",
    "command",
    "channel_id",
]
shaped = st.dictionaries(
    st.sampled_from(KEYS), json_values | st.dictionaries(st.sampled_from(KEYS), json_values)
)


@settings(max_examples=300, deadline=None)
@given(body=shaped)
def test_any_body_decodes_to_a_value_never_an_exception(body: dict[str, Any]) -> None:
    for decoded in (decode_event(body, RULES), decode_interactive(body), decode_command(body)):
        assert isinstance(decoded, Inbound | Undecodable | Skipped)
        if isinstance(decoded, Undecodable):
            assert decoded.reason and decoded.platform == "slack"


def test_identities_stay_in_their_own_fields() -> None:
    body = message_event("C1", "U1", f"<@{BOT_USER}> hi", channel_type="channel", thread_ts="1.0")
    decoded = decode_event(body, RULES)
    assert isinstance(decoded, Inbound)
    assert decoded.delivery_id == body["event_id"] and decoded.message_ref == body["event"]["ts"]
    assert decoded.source.thread_id == "1.0" and decoded.source.scope_id == TEAM
    assert decoded.source.chat_type == "group" and decoded.text == "hi"
    click = decode_interactive(block_action("D1", "U1", "5.0", "hp1:abc.123:once"))
    assert isinstance(click, Inbound) and click.kind == "button" and click.message_ref == "5.0"
    assert click.payload["prompt_response"] == {"prompt_id": "abc.123", "option_id": "once"}
    assert click.delivery_id.startswith("ix:") and click.source.chat_type == "dm"
    command = decode_command(slash_command("D1", "U1", "/chatgate", "stop"))
    assert isinstance(command, Inbound) and command.text == "/stop" and command.message_ref is None
    other = decode_command(slash_command("D1", "U1", "/deploy", "now"))
    assert isinstance(other, Inbound) and other.text == "/deploy now"


def test_a_select_keeps_every_selected_value() -> None:
    payload = block_action("C2", "U1", "6.0", "x")
    options = [{"value": "a"}, {"value": "ü"}]
    select = {"type": "multi_static_select", "action_id": "pick", "block_id": "b", "action_ts": "7.0"}
    payload["actions"][0] = {**select, "selected_options": options}
    decoded = decode_interactive(payload)
    assert isinstance(decoded, Inbound) and decoded.kind == "select"
    assert decoded.payload["values"] == ["a", "ü"]


def test_only_the_bots_own_mention_is_removed() -> None:
    assert strip_mention(f"<@{BOT_USER}> ask <@U2>", BOT_USER) == "ask <@U2>"
    assert strip_mention("no mention  kept  as is", BOT_USER) == "no mention  kept  as is"


def test_channel_rules_decide_what_reaches_the_agent() -> None:
    plain = message_event("C9", "U1", "no mention", channel_type="channel")
    assert isinstance(decode_event(plain, RULES), Skipped)
    assert isinstance(decode_event(plain, IntakeRules(BOT_USER, free_response_channels=("C9",))), Inbound)
    assert isinstance(decode_event(plain, IntakeRules(BOT_USER, require_mention=False)), Inbound)
    mention = message_event("C9", "U1", f"<@{BOT_USER}> hi", channel_type="channel")
    assert isinstance(decode_event(mention, IntakeRules(BOT_USER, channels=("C1",))), Skipped)


def test_a_message_shortcut_quotes_its_target() -> None:
    payload = {
        "type": "message_action",
        "callback_id": "summarize",
        "trigger_id": "trig.77",
        "team": {"id": TEAM},
        "channel": {"id": "C3"},
        "user": {"id": "U1", "username": "ada"},
        "message": {"ts": "9.0", "user": "U2", "text": "the long thread head"},
    }
    decoded = decode_interactive(payload)
    assert isinstance(decoded, Inbound) and decoded.kind == "context_menu"
    assert decoded.reply_to == "9.0" and decoded.message_ref == "9.0" and decoded.delivery_id == "ix:trig.77"
    assert decoded.payload["target"]["content"] == "the long thread head"
    assert decoded.text.startswith("/summarize on message 9.0 by U2:")


def test_a_modal_submission_keeps_every_input_and_needs_a_conversation() -> None:
    values = {
        "b1": {"title": {"type": "plain_text_input", "value": "Grüße 👋"}},
        "b2": {"note": {"type": "plain_text_input", "value": None}},
        "b3": {"pick": {"type": "multi_static_select", "selected_options": [{"value": "x"}, {"value": "y"}]}},
    }
    blocks = [{"type": "input", "block_id": "b1", "label": {"type": "plain_text", "text": "Title"}}]
    view = {"id": "V1", "callback_id": "ticket", "state": {"values": values}, "blocks": blocks,
            "private_metadata": '{"channel": "C4", "thread_ts": "3.0"}'}  # fmt: skip
    payload = {"type": "view_submission", "trigger_id": "trig.88", "team": {"id": TEAM},
               "user": {"id": "U1"}, "view": view}  # fmt: skip
    decoded = decode_interactive(payload)
    assert isinstance(decoded, Inbound) and decoded.kind == "modal"
    assert decoded.source.chat_id == "C4" and decoded.source.thread_id == "3.0"
    fields = {f["action_id"]: f for f in decoded.payload["fields"]}
    assert fields["title"]["value"] == "Grüße 👋" and fields["title"]["label"] == "Title"
    assert fields["note"]["value"] == "" and fields["pick"]["values"] == ["x", "y"]
    nowhere = decode_interactive({**payload, "view": {**view, "private_metadata": ""}})
    assert isinstance(nowhere, Undecodable) and "names no conversation" in nowhere.reason
