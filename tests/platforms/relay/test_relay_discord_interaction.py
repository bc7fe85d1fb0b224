"""Relayed Discord interaction bodies: every submitted value kept, identities apart, bad bodies rejected.

Bodies are real JSON bytes shaped like Discord's interaction objects (application
commands with nested subcommands, components, modals in the legacy action-row and
the modern Label shape), decoded by the pure ``decode_interaction``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatgate.domain.commands import parse_command
from chatgate.domain.inbound import MAX_TEXT_CHARS, Inbound
from chatgate.domain.session_key import IsolationPolicy, session_key
from chatgate.domain.source import Source, canonical_source
from chatgate.platforms.discord_wire.interaction import (
    MAX_BODY_BYTES,
    UnsupportedInteraction,
    decode_interaction,
)

INTERACTION = "1300000000000000001"
GUILD = "1100000000000000001"
CHANNEL = "1110000000000000001"
THREAD = "1120000000000000001"
PARENT = "1110000000000000099"
DM_CHANNEL = "1130000000000000001"
MESSAGE = "1200000000000000001"
ADA = {"id": "1000000000000000001", "username": "ada", "global_name": "Ada Lovelace"}
BEE = {"id": "1000000000000000002", "username": "bee", "global_name": None}
RECEIVED_AT = 1_700_000_000.25


def interaction(
    kind: int, data: dict[str, Any] | None, *, place: str = "guild", **extra: Any
) -> dict[str, Any]:
    """A Discord interaction object: ``place`` is ``guild`` (text channel), ``dm`` or ``thread``."""
    body: dict[str, Any] = {
        "id": INTERACTION,
        "application_id": "1400000000000000001",
        "type": kind,
        "token": "interaction-token-not-for-payloads",
        "version": 1,
        "locale": "fr",
    }
    if data is not None:
        body["data"] = data
    if place == "dm":
        body |= {"channel_id": DM_CHANNEL, "channel": {"id": DM_CHANNEL, "type": 1}, "user": ADA}
    else:
        body |= {"guild_id": GUILD, "member": {"user": ADA, "nick": None, "roles": []}}
        if place == "thread":
            body |= {"channel_id": THREAD, "channel": {"id": THREAD, "type": 11, "parent_id": PARENT}}
        else:
            body |= {"channel_id": CHANNEL, "channel": {"id": CHANNEL, "type": 0, "parent_id": "category"}}
    return body | extra


def raw(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def decoded(obj: Any) -> Inbound:
    result = decode_interaction(raw(obj), received_at=RECEIVED_AT)
    assert isinstance(result, Inbound), result
    # What admission stores must survive a JSON round trip unchanged.
    stored = json.loads(json.dumps(result.to_dict(), ensure_ascii=False, allow_nan=False))
    assert Inbound.from_dict(stored) == result
    assert "interaction-token-not-for-payloads" not in json.dumps(stored)
    return result


def rejected(body: bytes) -> UnsupportedInteraction:
    result = decode_interaction(body, received_at=RECEIVED_AT)
    assert isinstance(result, UnsupportedInteraction), result
    assert result.reason
    return result


def slash(name: str, options: list[dict[str, Any]] | None = None, **data: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"id": "1500000000000000001", "name": name, "type": 1} | data
    if options is not None:
        body["options"] = options
    return body


def strings(options: dict[str, str]) -> list[dict[str, Any]]:
    return [{"name": k, "type": 3, "value": v} for k, v in options.items()]


# -- application commands ------------------------------------------------------------------


def test_a_slash_command_keeps_its_subcommand_path_options_and_resolved_names() -> None:
    owner = "1000000000000000009"
    options = [
        {
            "type": 2,
            "name": "ops",
            "options": [
                {
                    "type": 1,
                    "name": "run",
                    "options": [
                        {"type": 3, "name": "target", "value": "deploy"},
                        {"type": 5, "name": "dry", "value": True},
                        {"type": 4, "name": "retries", "value": 3},
                        {"type": 10, "name": "ratio", "value": 0.5},
                        {"type": 6, "name": "owner", "value": owner},
                    ],
                }
            ],
        }
    ]
    resolved = {
        "users": {owner: {"id": owner, "username": "carol", "global_name": "Carol"}},
        "members": {owner: {"nick": "Caz", "roles": []}},
    }
    inbound = decoded(interaction(2, slash("skill", options, resolved=resolved)))

    assert inbound.kind == "command"
    assert inbound.text == f"/skill ops run target:deploy dry:true retries:3 ratio:0.5 owner:{owner}"
    assert parse_command(inbound.text) is None  # not a control command: it goes to the agent
    assert inbound.payload["name"] == "skill"
    assert inbound.payload["path"] == ["ops", "run"]
    assert inbound.payload["options"] == {
        "target": "deploy",
        "dry": True,
        "retries": 3,
        "ratio": 0.5,
        "owner": owner,
    }
    assert inbound.payload["resolved"] == {"owner": {"kind": "user", "id": owner, "name": "Caz"}}
    assert inbound.transport == "relay"
    assert inbound.delivery_id == f"discord:interaction:{INTERACTION}"
    assert inbound.action_id == INTERACTION
    assert inbound.message_ref is None and inbound.reply_to is None
    assert inbound.received_at == RECEIVED_AT
    assert inbound.observes_labels is False and not inbound.labels_observed()
    assert inbound.reply_route == "interaction"


def test_a_subcommand_without_a_group_and_a_channel_option_and_an_attachment() -> None:
    room, file_id = "1110000000000000007", "1600000000000000001"
    options = [
        {
            "type": 1,
            "name": "share",
            "options": [
                {"type": 7, "name": "room", "value": room},
                {"type": 11, "name": "file", "value": file_id},
            ],
        }
    ]
    resolved = {
        "channels": {room: {"id": room, "name": "général", "type": 0}},
        "attachments": {
            file_id: {
                "id": file_id,
                "filename": "notes.txt",
                "size": 12,
                "url": "https://cdn.example/notes.txt",
                "content_type": "text/plain",
            }
        },
    }
    inbound = decoded(interaction(2, slash("doc", options, resolved=resolved)))
    assert inbound.text == f"/doc share room:{room} file:{file_id}"
    assert inbound.payload["path"] == ["share"]
    assert inbound.payload["resolved"]["room"]["name"] == "général"
    assert inbound.payload["resolved"]["file"]["name"] == "notes.txt"
    [attachment] = inbound.attachments
    assert (attachment.ref, attachment.name, attachment.mime, attachment.size) == (
        "https://cdn.example/notes.txt",
        "notes.txt",
        "text/plain",
        12,
    )


@pytest.mark.parametrize(
    ("name", "options", "text", "parsed"),
    [
        ("remind", {"when": "10m", "prompt": " stretch "}, "/remind 10m stretch", ("remind", "10m stretch")),
        ("every", {"schedule": "0 9 * * 1-5", "prompt": "standup"}, "/every 0 9 * * 1-5 standup", None),
        ("bg", {"prompt": "sum it up"}, "/bg sum it up", ("bg", "sum it up")),
        ("cancel", {"id": "ab12"}, "/cancel ab12", ("cancel", "ab12")),
        ("schedules", {"action": "pause", "id": "cd34"}, "/schedules pause cd34", None),
        ("model", {}, "/model", ("model", "")),
        ("ask", {"prompt": "hello there"}, "hello there", None),
    ],
)
def test_our_commands_options_become_the_text_admission_parses(
    name: str, options: dict[str, str], text: str, parsed: tuple[str, str] | None
) -> None:
    inbound = decoded(interaction(2, slash(name, strings(options))))
    assert inbound.text == text and inbound.payload["options"] == options
    assert inbound.kind == ("text" if name == "ask" else "command")
    command = parse_command(inbound.text)
    if parsed is not None:
        assert command is not None and (command.name, command.args) == parsed
    assert (command is None) == (name == "ask")


@pytest.mark.parametrize(
    ("name", "options", "reason"),
    [
        ("remind", {"when": "later", "prompt": "x"}, "/remind when: 'later' is not a duration"),
        ("remind", {"when": "10m"}, "/remind needs prompt"),
        ("every", {"schedule": "9 * *", "prompt": "x"}, "/every schedule:"),
        ("approve", {"scope": "forever"}, "/approve scope: 'forever' is not one of once, session, always"),
        ("ask", {"q": "hi"}, "/ask has no option 'q'"),
        ("ask", {"prompt": "x" * 4001}, "/ask prompt: 4001 characters; the limit is 4000"),
    ],
)
def test_a_bad_option_of_our_commands_is_refused_with_its_reason(
    name: str, options: dict[str, str], reason: str
) -> None:
    result = rejected(raw(interaction(2, slash(name, strings(options)))))
    assert reason in result.reason and result.action_id == INTERACTION


@pytest.mark.parametrize("name", ["stop", "new", "status"])
def test_a_control_command_comes_out_exactly_as_the_command_parser_expects(name: str) -> None:
    inbound = decoded(interaction(2, slash(name)))
    assert inbound.text == f"/{name}"
    command = parse_command(inbound.text)
    assert command is not None and (command.name, command.args) == (name, "")
    assert inbound.payload["options"] == {} and inbound.payload["path"] == []


# -- context menus ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("member", "user", "shown"),
    [
        ({"nick": "Bee Nick"}, {"username": "bee", "global_name": "Bee Global"}, "Bee Nick"),
        ({"nick": None}, {"username": "bee", "global_name": "Bee Global"}, "Bee Global"),
        (None, {"username": "bee", "global_name": None}, "bee"),
    ],
)
def test_a_user_context_menu_names_its_target(
    member: dict[str, Any] | None, user: dict[str, Any], shown: str
) -> None:
    target = BEE["id"]
    resolved: dict[str, Any] = {"users": {target: {"id": target, **user}}}
    if member is not None:
        resolved["members"] = {target: member}
    data = {
        "id": "1500000000000000002",
        "name": "Inspect",
        "type": 2,
        "target_id": target,
        "resolved": resolved,
    }
    inbound = decoded(interaction(2, data))
    assert inbound.kind == "context_menu"
    assert inbound.text == f"/Inspect on user {shown} (id {target})"
    assert inbound.payload["target_id"] == target
    assert inbound.payload["target"]["name"] == shown
    assert inbound.payload["target"]["username"] == "bee"
    assert inbound.message_ref is None and inbound.reply_to is None
    assert inbound.action_id == INTERACTION


@pytest.mark.parametrize(
    ("content", "shown"), [("Ship it 🚀\nsecond line", "Ship it 🚀\nsecond line"), ("", "(no text)")]
)
def test_a_message_context_menu_carries_the_resolved_message(content: str, shown: str) -> None:
    target = "1200000000000000042"
    message = {
        "id": target,
        "channel_id": CHANNEL,
        "content": content,
        "author": BEE,
        "attachments": [
            {"id": "1600000000000000009", "filename": "a.png", "url": "https://cdn.example/a.png"}
        ],
    }
    data = {
        "id": "1500000000000000003",
        "name": "Summarize",
        "type": 3,
        "target_id": target,
        "resolved": {"messages": {target: message}},
    }
    inbound = decoded(interaction(2, data))
    assert inbound.kind == "context_menu"
    assert inbound.text == f"/Summarize on message {target} by bee:\n{shown}"
    assert inbound.reply_to == target
    assert inbound.message_ref is None
    assert inbound.action_id == INTERACTION
    assert inbound.payload["target"]["content"] == content
    assert inbound.payload["target"]["author"] == {"id": BEE["id"], "name": "bee"}
    assert inbound.payload["target"]["attachments"][0]["filename"] == "a.png"


# -- components --------------------------------------------------------------------------------


def component(custom_id: str, component_type: int, **data: Any) -> dict[str, Any]:
    return interaction(
        3,
        {"custom_id": custom_id, "component_type": component_type, **data},
        message={"id": MESSAGE, "channel_id": CHANNEL, "content": "pick one", "author": {"id": "bot"}},
    )


def test_a_button_keeps_its_attached_message_and_its_interaction_apart() -> None:
    inbound = decoded(component("approve-later", 2))
    assert inbound.kind == "button"
    assert inbound.text == "approve-later"
    assert inbound.message_ref == MESSAGE
    assert inbound.action_id == INTERACTION
    assert inbound.delivery_id == f"discord:interaction:{INTERACTION}"
    assert inbound.payload == {"discord_type": 3, "component_type": 2, "custom_id": "approve-later"}


def test_a_prompt_button_carries_its_prompt_response() -> None:
    inbound = decoded(component("hp1:p-42:session", 2))
    assert inbound.kind == "button"
    assert inbound.text == "hp1:p-42:session"
    assert inbound.payload["prompt_response"] == {"prompt_id": "p-42", "option_id": "session"}
    assert inbound.message_ref == MESSAGE and inbound.action_id == INTERACTION


@pytest.mark.parametrize(
    "custom_id",
    [
        "hp1:p-42",
        "hp1::once",
        "hp1:p-42:",
        "hp1:a:b:c",
        "hp2:p-42:once",
        "hp1",
        "hp1:p 42:once",
        "hp1:p-42:maybe",
    ],
)
def test_a_malformed_prompt_token_is_an_ordinary_button(custom_id: str) -> None:
    inbound = decoded(component(custom_id, 2))
    assert inbound.kind == "button"
    assert inbound.text == custom_id
    assert "prompt_response" not in inbound.payload


def test_a_string_select_keeps_every_value_in_order_and_choices_stay_distinguishable() -> None:
    both = decoded(component("flavour", 3, values=["vanille", "chocolat"]))
    one = decoded(component("flavour", 3, values=["chocolat"]))
    none = decoded(component("flavour", 3, values=[]))
    assert both.kind == "select"
    assert both.text == "flavour: vanille, chocolat"
    assert both.payload["values"] == ["vanille", "chocolat"]
    assert one.text == "flavour: chocolat"
    assert one.payload["values"] == ["chocolat"]
    assert none.text == "flavour: (none)"
    assert len({both.text, one.text, none.text}) == 3
    assert both.message_ref == MESSAGE and both.action_id == INTERACTION


@pytest.mark.parametrize(
    ("component_type", "resolved", "names"),
    [
        (
            5,
            {"users": {"u1": {"id": "u1", "username": "bee"}}, "members": {"u1": {"nick": "B"}}},
            {"u1": "B"},
        ),
        (6, {"roles": {"u1": {"id": "u1", "name": "mods"}}}, {"u1": "mods"}),
        (7, {"roles": {"u1": {"id": "u1", "name": "mods"}}}, {"u1": "mods"}),
        (8, {"channels": {"u1": {"id": "u1", "name": "ops", "type": 0}}}, {"u1": "ops"}),
    ],
)
def test_an_entity_select_renders_ids_and_keeps_resolved_names(
    component_type: int, resolved: dict[str, Any], names: dict[str, str]
) -> None:
    inbound = decoded(component("who", component_type, values=["u1"], resolved=resolved))
    assert inbound.kind == "select"
    assert inbound.text == "who: u1"
    assert inbound.payload["values"] == ["u1"]
    assert inbound.payload["resolved"] == names


# -- modals --------------------------------------------------------------------------------------


def _legacy_modal() -> list[dict[str, Any]]:
    def row(custom_id: str, value: str) -> dict[str, Any]:
        return {"type": 1, "components": [{"type": 4, "custom_id": custom_id, "value": value}]}

    return [row("title", "Résumé 📄"), row("details", "ligne 1\nligne 2 ✨"), row("notes", "")]


def _label_modal() -> list[dict[str, Any]]:
    def label(inner: dict[str, Any]) -> dict[str, Any]:
        return {"type": 18, "id": 1, "component": inner}

    return [
        {"type": 10, "id": 9, "content": "Fill in the form"},
        label({"type": 4, "id": 2, "custom_id": "title", "value": "Résumé 📄"}),
        label({"type": 4, "id": 3, "custom_id": "details", "value": "ligne 1\nligne 2 ✨"}),
        label({"type": 4, "id": 4, "custom_id": "notes", "value": ""}),
    ]


@pytest.mark.parametrize("components", [_legacy_modal(), _label_modal()], ids=["action-rows", "labels"])
def test_a_modal_keeps_every_field_with_unicode_and_empty_optional_fields(
    components: list[dict[str, Any]],
) -> None:
    inbound = decoded(interaction(5, {"custom_id": "report", "components": components}))
    assert inbound.kind == "modal"
    assert inbound.text == "report\ntitle: Résumé 📄\ndetails: ligne 1\nligne 2 ✨\nnotes: (empty)"
    fields = [(f["id"], f["value"]) for f in inbound.payload["fields"]]
    assert fields == [("title", "Résumé 📄"), ("details", "ligne 1\nligne 2 ✨"), ("notes", "")]
    assert inbound.payload["custom_id"] == "report"
    assert inbound.message_ref is None  # opened by a slash command: no message
    assert inbound.action_id == INTERACTION


def test_a_modal_select_field_lists_every_value_and_a_modal_from_a_button_refers_to_its_message() -> None:
    components = [
        {
            "type": 18,
            "id": 1,
            "component": {"type": 3, "id": 2, "custom_id": "bugs", "values": ["ant", "bee"]},
        },
        {"type": 18, "id": 3, "component": {"type": 5, "id": 4, "custom_id": "whom", "values": []}},
        {"type": 18, "id": 5, "component": {"type": 4, "id": 6, "custom_id": "why", "value": "parce que"}},
    ]
    body = interaction(5, {"custom_id": "triage", "components": components}, message={"id": MESSAGE})
    inbound = decoded(body)
    assert inbound.text == "triage\nbugs: ant, bee\nwhom: (empty)\nwhy: parce que"
    assert inbound.payload["fields"][0] == {"id": "bugs", "type": 3, "values": ["ant", "bee"]}
    assert inbound.payload["fields"][1]["values"] == []
    assert inbound.message_ref == MESSAGE
    assert inbound.action_id == INTERACTION


# -- sources and session keys -------------------------------------------------------------------


@pytest.mark.parametrize("channel_type", [10, 11, 12])
def test_a_thread_interaction_is_a_thread_under_its_parent(channel_type: int) -> None:
    body = interaction(2, slash("stop"), place="thread")
    body["channel"]["type"] = channel_type
    source = decoded(body).source
    assert (source.chat_type, source.chat_id, source.thread_id, source.parent_chat_id) == (
        "thread",
        THREAD,
        THREAD,
        PARENT,
    )
    assert source.scope_id == GUILD and source.user_id == ADA["id"]


def test_a_thread_without_a_parent_id_keeps_the_parent_unknown() -> None:
    body = interaction(2, slash("stop"), place="thread")
    del body["channel"]["parent_id"]
    source = decoded(body).source
    assert source.chat_type == "thread" and source.thread_id == THREAD
    assert source.parent_chat_id is None


def test_a_guild_channel_is_a_group_and_a_dm_is_a_dm() -> None:
    group = decoded(interaction(2, slash("stop"))).source
    assert (group.platform, group.chat_type, group.chat_id, group.scope_id) == (
        "discord",
        "group",
        CHANNEL,
        GUILD,
    )
    assert group.thread_id is None and group.parent_chat_id is None  # a text channel's category is no parent
    assert group.user_id == ADA["id"] and group.user_name == "Ada Lovelace"
    assert group.chat_name is None and group.chat_topic is None

    dm = decoded(interaction(2, slash("stop"), place="dm")).source
    assert (dm.chat_type, dm.chat_id, dm.scope_id, dm.thread_id) == ("dm", DM_CHANNEL, None, None)
    assert dm.user_id == ADA["id"]


def test_a_channel_given_only_as_an_object_is_enough() -> None:
    body = interaction(3, {"custom_id": "x", "component_type": 2}, place="thread")
    del body["channel_id"]
    source = decoded(body).source
    assert (source.chat_id, source.chat_type, source.thread_id) == (THREAD, "thread", THREAD)


@pytest.mark.parametrize(
    ("nick", "global_name", "username", "shown"),
    [
        ("Nicky", "Global", "user", "Nicky"),
        (None, "Global", "user", "Global"),
        ("", "Global", "user", "Global"),
        (None, None, "user", "user"),
        ("  ", "", "user", "user"),
    ],
)
def test_the_user_name_prefers_nick_then_global_name_then_username(
    nick: str | None, global_name: str | None, username: str, shown: str
) -> None:
    user = {"id": "1000000000000000005", "username": username, "global_name": global_name}
    body = interaction(2, slash("stop"), member={"user": user, "nick": nick})
    assert decoded(body).source.user_name == shown
    dm = interaction(2, slash("stop"), place="dm", user=user)
    assert decoded(dm).source.user_name == (global_name or username)


@pytest.mark.parametrize(
    ("place", "text_lane"),
    [
        ("dm", Source("discord", DM_CHANNEL, "dm", user_id=ADA["id"], user_name="Ada")),
        (
            "guild",
            Source("discord", CHANNEL, "group", user_id=ADA["id"], scope_id=GUILD, chat_name="général"),
        ),
        (
            "thread",
            Source(
                "discord",
                THREAD,
                "thread",
                user_id=ADA["id"],
                thread_id=THREAD,
                parent_chat_id=PARENT,
                scope_id=GUILD,
            ),
        ),
    ],
)
@pytest.mark.parametrize("kind", ["command", "button", "modal"])
def test_an_interaction_keys_as_the_text_lane_does_for_the_same_chat(
    place: str, text_lane: Source, kind: str
) -> None:
    data: dict[str, Any] = {
        "command": slash("new"),
        "button": {"custom_id": "b", "component_type": 2},
        "modal": {"custom_id": "m", "components": []},
    }[kind]
    body = interaction({"command": 2, "button": 3, "modal": 5}[kind], data, place=place)
    source = canonical_source(decoded(body).source)
    expected = canonical_source(text_lane)
    key = session_key(source, IsolationPolicy(), None)
    assert key == session_key(expected, IsolationPolicy(), None)
    assert (
        key
        == {
            "dm": f"agent:main:discord:dm:{DM_CHANNEL}",
            "guild": f"agent:main:discord:group:{CHANNEL}:{ADA['id']}",
            "thread": f"agent:main:discord:thread:{THREAD}:{THREAD}",
        }[place]
    )
    for policy in (IsolationPolicy(False, False), IsolationPolicy(True, True)):
        assert session_key(source, policy, "ops") == session_key(expected, policy, "ops")


# -- rejections -----------------------------------------------------------------------------------


def test_a_ping_is_answered_by_the_connector_not_decoded() -> None:
    result = rejected(raw({"id": INTERACTION, "type": 1, "application_id": "1", "token": "t", "version": 1}))
    assert "ping" in result.reason and "connector" in result.reason
    assert result.action_id == INTERACTION


def test_autocomplete_is_rejected_with_its_reason() -> None:
    data = slash("skill", [{"type": 3, "name": "target", "value": "dep", "focused": True}])
    result = rejected(raw(interaction(4, data)))
    assert "autocomplete" in result.reason and "not answered by the gateway" in result.reason
    assert result.action_id == INTERACTION


def _with(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``body`` with the value at a dotted ``path`` replaced (``...`` deletes it)."""
    copy: dict[str, Any] = json.loads(json.dumps(body))
    node: Any = copy
    *parents, last = path.split(".")
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    slot: int | str = int(last) if isinstance(node, list) else last
    if value is ...:
        del node[slot]
    else:
        node[slot] = value
    return copy


LONE_SURROGATE = (
    b'{"id": "1", "type": 2, "data": {"name": "\\ud800", "type": 1}, "channel_id": "c", "user": {"id": "u"}}'
)
SLASH = interaction(2, slash("skill", [{"type": 3, "name": "target", "value": "deploy"}]))
MODAL = interaction(5, {"custom_id": "m", "components": _legacy_modal()})
SELECT = component("flavour", 3, values=["vanille"])


@pytest.mark.parametrize(
    ("body", "fragment", "action_id"),
    [
        (b"{not json", "not JSON", None),
        (b'{"id": "1", "type": 2, "name": "\xff\xfe"}', "not valid UTF-8", None),
        (b"[1, 2, 3]", "JSON object", None),
        (b'"just a string"', "JSON object", None),
        (b'{"id": "1", "type": NaN}', "not JSON", None),
        (b"[" * 5000 + b"]" * 5000, "nested too deeply", None),
        (LONE_SURROGATE, "UTF-8", "1"),
        (raw(_with(SLASH, "id", ...)), "interaction.id", None),
        (raw(_with(SLASH, "id", 1300000000000000001)), "interaction.id", None),
        (raw(_with(SLASH, "type", ...)), "interaction.type is missing", INTERACTION),
        (raw(_with(SLASH, "type", "2")), "interaction.type must be an integer", INTERACTION),
        (raw(_with(SLASH, "type", 9)), "unsupported interaction type 9", INTERACTION),
        (raw(_with(_with(SLASH, "channel_id", ...), "channel", ...)), "no channel", INTERACTION),
        (raw(_with(SLASH, "channel_id", 42)), "channel_id must be a non-empty string", INTERACTION),
        (raw(_with(SLASH, "channel", "general")), "interaction.channel must be an object", INTERACTION),
        (raw(_with(SLASH, "channel_id", "other")), "disagree", INTERACTION),
        (raw(_with(SLASH, "member", ...)), "no user", INTERACTION),
        (raw(_with(SLASH, "member.user.id", None)), "id is missing", INTERACTION),
        (raw(_with(SLASH, "data", ...)), "interaction.data must be an object", INTERACTION),
        (raw(_with(SLASH, "data.type", 4)), "application command type 4", INTERACTION),
        (raw(_with(SLASH, "data.name", "")), "data.name must be a non-empty string", INTERACTION),
        (
            raw(_with(SLASH, "data.options", {"target": "deploy"})),
            "data.options must be an array",
            INTERACTION,
        ),
        (raw(_with(SLASH, "data.options.0.value", {"x": 1})), "value must be a string", INTERACTION),
        (raw(_with(SLASH, "data.options.0.type", "3")), "type must be an integer", INTERACTION),
        (raw(_with(SELECT, "data.values", "vanille")), "data.values must be an array", INTERACTION),
        (raw(_with(SELECT, "data.values", [1])), "data.values[0] must be a string", INTERACTION),
        (raw(_with(SELECT, "data.component_type", 4)), "unsupported component type 4", INTERACTION),
        (raw(_with(SELECT, "data.custom_id", ...)), "data.custom_id is missing", INTERACTION),
        (
            raw(_with(MODAL, "data.components.0.components.0.custom_id", None)),
            "custom_id is missing",
            INTERACTION,
        ),
        (raw(_with(MODAL, "data.components.1", "row")), "must be an object", INTERACTION),
        (raw(_with(MODAL, "data.components.0.components.0.value", ["a"])), "value must be", INTERACTION),
    ],
)
def test_a_malformed_body_is_unsupported_with_its_reason(
    body: bytes, fragment: str, action_id: str | None
) -> None:
    result = rejected(body)
    assert fragment in result.reason
    assert result.action_id == action_id


def test_a_message_context_menu_without_its_resolved_message_is_rejected() -> None:
    data = {"id": "1", "name": "Summarize", "type": 3, "target_id": "42", "resolved": {"messages": {}}}
    result = rejected(raw(interaction(2, data)))
    assert "resolved.messages" in result.reason and result.action_id == INTERACTION


def test_sizes_are_guarded() -> None:
    padding = "x" * MAX_BODY_BYTES
    assert "limit is" in rejected(raw(interaction(3, {"custom_id": padding, "component_type": 2}))).reason

    long_value = "é" * (MAX_TEXT_CHARS + 1)  # fits the body limit, overflows the text limit
    body = raw(
        interaction(5, {"custom_id": "m", "components": [{"type": 4, "custom_id": "f", "value": long_value}]})
    )
    assert len(body) <= MAX_BODY_BYTES
    result = rejected(body)
    assert "characters" in result.reason and result.action_id == INTERACTION


def test_a_non_bytes_body_is_unsupported() -> None:
    result = decode_interaction("{}", received_at=RECEIVED_AT)  # type: ignore[arg-type]
    assert isinstance(result, UnsupportedInteraction) and "bytes" in result.reason


# -- never an exception -----------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)


def _paths(node: Any, prefix: str = "") -> list[str]:
    items = enumerate(node) if isinstance(node, list) else node.items() if isinstance(node, dict) else []
    found = []
    for key, child in items:
        path = f"{prefix}{key}"
        found.append(path)
        found += _paths(child, path + ".")
    return found


SAMPLES = [
    SLASH,
    MODAL,
    SELECT,
    interaction(5, {"custom_id": "m", "components": _label_modal()}, place="thread"),
]


@settings(max_examples=300, deadline=None)
@given(sample=st.sampled_from(SAMPLES), choice=st.integers(min_value=0), value=_json | st.just(...))
def test_a_mutated_interaction_never_raises(sample: dict[str, Any], choice: int, value: Any) -> None:
    paths = _paths(sample)
    body = _with(sample, paths[choice % len(paths)], value)
    result = decode_interaction(raw(body), received_at=RECEIVED_AT)
    assert isinstance(result, Inbound | UnsupportedInteraction)
    if isinstance(result, Inbound):
        json.dumps(result.to_dict(), allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=64) | _json.map(lambda v: json.dumps(v).encode()))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    result = decode_interaction(data, received_at=RECEIVED_AT)
    assert isinstance(result, UnsupportedInteraction)
