"""Raw Discord interaction bodies as ``Inbound`` events, for both lanes that carry them.

The relay forwards the body Discord POSTed (a ``passthrough_forward`` frame); the native
adapter reads the same object from the gateway's INTERACTION_CREATE. Only ``transport``
differs (each lane dedupes its own deliveries).

A relayed interaction must land in the same session as a text message from the same
chat, so its source keys exactly as the text lane's: a guild channel is ``group``, a
DM ``dm``, and a thread (channel type 10, 11 or 12) is ``thread`` with the channel as
both chat and thread and ``channel.parent_id`` as the parent (never guessed).

Identities stay apart: the interaction id is the ``action_id`` (two clicks are two
actions) and the dedupe key; ``message_ref`` is the message a component (or a modal
opened from one) is attached to; a message context-menu command quotes its target
as ``reply_to``. Nothing submitted is lost: ``text`` (what the agent reads) carries
every value, and ``payload`` keeps the structure text flattens. A body has no chat
labels, so the event never touches them, and replies go through the interaction's
follow-up.

A ping or autocomplete (answered by the connector), an unknown type or a malformed
body becomes an ``UnsupportedInteraction`` with its reason; this function never raises on input.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from chatgate.domain.command_options import ASK, command_text
from chatgate.domain.inbound import MAX_TEXT_CHARS, Attachment, Inbound, InboundKind
from chatgate.domain.prompts import parse_prompt_token
from chatgate.platforms.discord_wire.json_reads import (
    Reject,
    array,
    fail,
    first_label,
    need_str,
    obj,
    opt_int,
    opt_obj,
    opt_str,
    show,
    str_array,
)
from chatgate.platforms.discord_wire.resolved import (
    attachment_of,
    resolved_item,
    resolved_name,
    source_of,
    user_name,
)

TRANSPORT = "relay"
"""The default lane (the relay's); the native adapter passes ``transport="discord"``."""
REPLY_ROUTE = "interaction"
MAX_BODY_BYTES = 256 * 1024
SELECT_KINDS = {3: "string", 5: "user", 6: "role", 7: "mentionable", 8: "channel"}
SUBCOMMAND, SUBCOMMAND_GROUP = 1, 2
OPTION_KINDS = {6: "user", 7: "channel", 8: "role", 9: "mentionable", 11: "attachment"}
ACTION_ROW, TEXT_DISPLAY, LABEL, FILE_UPLOAD = 1, 10, 18, 19


class UnsupportedInteraction(msgspec.Struct, frozen=True):
    reason: str
    action_id: str | None
    """The interaction id when it could be read, so the rejection can be recorded."""


class _Decoded(msgspec.Struct):
    kind: InboundKind
    text: str
    payload: dict[str, Any]
    reply_to: str | None = None
    attachments: list[Attachment] = msgspec.field(default_factory=list)


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "(empty)" if value is None or value == "" else str(value)


# -- source -----------------------------------------------------------------------------------


# -- what resolved ids name -------------------------------------------------------------------


# -- application commands (type 2) ------------------------------------------------------------


def _command(data: dict[str, Any]) -> _Decoded:
    command_type = opt_int(data, "type", "data", required=True)
    name = need_str(data, "name", "data")
    resolved = opt_obj(data, "resolved", "data") or {}
    base: dict[str, Any] = {"discord_type": 2, "command_type": command_type, "name": name}
    if command_id := first_label(data, "id"):
        base["command_id"] = command_id
    if command_type == 1:
        return _chat_input(data, name, resolved, base)
    if command_type in (2, 3):
        target_id = need_str(data, "target_id", "data")
        base["target_id"] = target_id
        if command_type == 2:
            return _user_menu(name, target_id, resolved, base)
        return _message_menu(name, target_id, resolved, base)
    fail(f"application command type {command_type} is not supported (1 chat input, 2 user, 3 message)")


def _chat_input(data: dict[str, Any], name: str, resolved: dict[str, Any], base: dict[str, Any]) -> _Decoded:
    path: list[str] = []
    options, where = array(data, "options", "data"), "data.options"
    while True:
        level = [obj(o, f"{where}[{i}]") for i, o in enumerate(options)]
        types = [opt_int(o, "type", f"{where}[{i}]", required=True) for i, o in enumerate(level)]
        nested = [o for o, t in zip(level, types, strict=True) if t in (SUBCOMMAND, SUBCOMMAND_GROUP)]
        if not nested:
            break
        if len(level) != 1 or len(path) == 2:
            fail(f"{where}: a subcommand must be the only option at its level, at most two levels deep")
        path.append(need_str(nested[0], "name", where))
        options, where = array(nested[0], "options", where), f"{where}[0].options"
    values: dict[str, Any] = {}
    names: dict[str, Any] = {}
    attachments: list[Attachment] = []
    for i, option in enumerate(level):
        spot = f"{where}[{i}]"
        key = need_str(option, "name", spot)
        value = option.get("value")
        if isinstance(value, dict | list) or value is None:
            fail(f"{spot}.value must be a string, number or boolean, got {show(value)}")
        if key in values:
            fail(f"{spot}: option {key!r} appears twice")
        values[key] = value
        kind = OPTION_KINDS.get(opt_int(option, "type", spot, required=True) or 0)
        if kind is not None:
            names[key] = {"kind": kind, "id": str(value), "name": resolved_name(resolved, kind, str(value))}
            if kind == "attachment":
                attachments.append(attachment_of(resolved, str(value)))
    payload = {**base, "path": path, "options": values}
    if names:
        payload["resolved"] = names
    return _Decoded(*_command_words(name, path, values), payload, attachments=attachments)


def _command_words(name: str, path: list[str], values: dict[str, Any]) -> tuple[InboundKind, str]:
    """Our own commands read as admission parses them (``/ask prompt:hi`` is the message ``hi``);
    any other command keeps its options as ``key:value`` words for the agent."""
    try:
        text = None if path else command_text(name, values)
    except ValueError as exc:
        fail(str(exc))
    if text is not None:
        return ("text" if name == ASK else "command"), text
    return "command", " ".join(
        ["/" + name, *path, *(f"{key}:{_render(value)}" for key, value in values.items())]
    )


def _user_menu(name: str, target_id: str, resolved: dict[str, Any], base: dict[str, Any]) -> _Decoded:
    user = resolved_item(resolved, "users", target_id)
    display = user_name(resolved, target_id)
    target = {
        "kind": "user",
        "id": target_id,
        "name": display,
        "username": first_label(user, "username"),
        "global_name": first_label(user, "global_name"),
        "nick": first_label(resolved_item(resolved, "members", target_id), "nick"),
    }
    who = f"{display} (id {target_id})" if display else f"(id {target_id})"
    return _Decoded("context_menu", f"/{name} on user {who}", {**base, "target": target})


def _message_menu(name: str, target_id: str, resolved: dict[str, Any], base: dict[str, Any]) -> _Decoded:
    message = resolved_item(resolved, "messages", target_id)
    if message is None:
        fail(f"message context menu without data.resolved.messages[{target_id!r}]")
    content = message.get("content", "")
    if not isinstance(content, str):
        fail(f"data.resolved.messages[{target_id!r}].content must be a string")
    author = message.get("author")
    author_name = first_label(message.get("member"), "nick") or first_label(author, "global_name", "username")
    files = []
    for item in message.get("attachments") or ():
        if isinstance(item, dict):
            keys = ("id", "filename", "url", "content_type", "size")
            files.append({k: v for k in keys if isinstance(v := item.get(k), str | int)})
    target = {
        "kind": "message",
        "id": target_id,
        "author": {"id": first_label(author, "id"), "name": author_name},
        "content": content,
        "attachments": files,
    }
    head = f"/{name} on message {target_id} by {author_name or '(unknown author)'}:"
    text = f"{head}\n{content or '(no text)'}"
    return _Decoded("context_menu", text, {**base, "target": target}, reply_to=target_id)


# -- message components (type 3) --------------------------------------------------------------


def _prompt_response(custom_id: str) -> dict[str, str] | None:
    parsed = parse_prompt_token(custom_id)
    return None if parsed is None else {"prompt_id": parsed[0], "option_id": parsed[1]}


def _names(resolved: dict[str, Any], kind: str, values: list[str]) -> dict[str, str | None]:
    return {value: resolved_name(resolved, kind, value) for value in values}


def _component(data: dict[str, Any]) -> _Decoded:
    custom_id = need_str(data, "custom_id", "data")
    component_type = opt_int(data, "component_type", "data", required=True)
    payload: dict[str, Any] = {"discord_type": 3, "component_type": component_type, "custom_id": custom_id}
    if component_type == 2:
        if (answer := _prompt_response(custom_id)) is not None:
            payload["prompt_response"] = answer
        return _Decoded("button", custom_id, payload)
    kind = SELECT_KINDS.get(component_type or 0)
    if kind is None:
        fail(f"unsupported component type {component_type} (2 button, 3/5/6/7/8 selects)")
    values = str_array(data, "values", "data")
    payload["values"] = values
    if kind != "string":
        payload["resolved"] = _names(opt_obj(data, "resolved", "data") or {}, kind, values)
    return _Decoded("select", f"{custom_id}: {', '.join(values) or '(none)'}", payload)


# -- modal submits (type 5) -------------------------------------------------------------------


def _field(component: dict[str, Any], where: str, label: str | None) -> dict[str, Any] | None:
    field_type = opt_int(component, "type", where, required=True)
    if field_type == TEXT_DISPLAY:
        return None
    found: dict[str, Any] = {"id": need_str(component, "custom_id", where), "type": field_type}
    if label is not None:
        found["label"] = label
    if component.get("values") is not None:
        found["values"] = str_array(component, "values", where)
    else:
        value = component.get("value")
        if isinstance(value, dict | list):
            fail(f"{where}.value must be a string, number or boolean")
        found["value"] = value
    return found


def _modal_fields(data: dict[str, Any]) -> list[dict[str, Any]]:
    fields: list[dict[str, Any]] = []
    for i, raw in enumerate(array(data, "components", "data")):
        where = f"data.components[{i}]"
        top = obj(raw, where)
        top_type = opt_int(top, "type", where, required=True)
        found: list[dict[str, Any] | None] = []
        if top_type == ACTION_ROW:
            for j, child in enumerate(array(top, "components", where)):
                spot = f"{where}.components[{j}]"
                found.append(_field(obj(child, spot), spot, None))
        elif top_type == LABEL:
            spot = f"{where}.component"
            found.append(_field(obj(top.get("component"), spot), spot, first_label(top, "label")))
        elif top.get("custom_id") is not None:
            found = [_field(top, where, None)]
        fields += [f for f in found if f is not None]
    return fields


def _modal(data: dict[str, Any]) -> _Decoded:
    custom_id = need_str(data, "custom_id", "data")
    resolved = opt_obj(data, "resolved", "data") or {}
    fields = _modal_fields(data)
    lines = [custom_id]
    attachments: list[Attachment] = []
    for f in fields:
        if "values" in f:
            kind = SELECT_KINDS.get(f["type"])
            if kind is not None and kind != "string":
                f["resolved"] = _names(resolved, kind, f["values"])
            if f["type"] == FILE_UPLOAD:
                attachments += [attachment_of(resolved, v) for v in f["values"]]
            lines.append(f"{f['id']}: {', '.join(f['values']) or '(empty)'}")
        else:
            lines.append(f"{f['id']}: {_render(f['value'])}")
    payload = {"discord_type": 5, "custom_id": custom_id, "fields": fields}
    return _Decoded("modal", "\n".join(lines), payload, attachments=attachments)


# -- the entry point --------------------------------------------------------------------------


def _decode(body: dict[str, Any], action_id: str | None, received_at: float, transport: str) -> Inbound:
    if action_id is None:
        fail("interaction.id is missing or not a non-empty string")
    kind = opt_int(body, "type", "interaction", required=True)
    if kind == 1:
        fail("ping (interaction type 1) is answered by the connector, never forwarded to the gateway")
    if kind == 4:
        fail("autocomplete (interaction type 4) is not answered by the gateway (the connector answers it)")
    if kind not in (2, 3, 5):
        fail(f"unsupported interaction type {kind} (2 command, 3 component, 5 modal submit)")
    source = source_of(body)
    data = obj(body.get("data"), "interaction.data")
    decoded = _command(data) if kind == 2 else _component(data) if kind == 3 else _modal(data)
    message_ref = None
    if kind != 2 and (message := opt_obj(body, "message", "interaction")) is not None:
        message_ref = opt_str(message, "id", "interaction.message")
    if len(decoded.text) > MAX_TEXT_CHARS:
        fail(f"text is {len(decoded.text)} characters; the limit is {MAX_TEXT_CHARS}")
    inbound = Inbound(
        transport=transport,
        delivery_id=f"discord:interaction:{action_id}",
        source=source,
        text=decoded.text,
        kind=decoded.kind,
        action_id=action_id,
        message_ref=message_ref,
        reply_to=decoded.reply_to,
        received_at=received_at,
        attachments=tuple(decoded.attachments),
        payload=decoded.payload,
        observes_labels=False,
        reply_route=REPLY_ROUTE,
    )
    try:  # what admission stores must encode: no lone surrogates (from \ud800 escapes), no NaN
        json.dumps(inbound.to_dict(), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except ValueError as exc:
        fail(f"interaction cannot be stored as UTF-8 JSON: {exc}")
    return inbound


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_interaction(
    body: bytes, *, received_at: float, transport: str = TRANSPORT
) -> Inbound | UnsupportedInteraction:
    """Decode one interaction body exactly as Discord POSTed it; bad input is ``UnsupportedInteraction``."""
    if not isinstance(body, bytes | bytearray):
        return UnsupportedInteraction(f"body must be bytes, got {type(body).__name__}", None)
    if len(body) > MAX_BODY_BYTES:
        return UnsupportedInteraction(f"body is {len(body)} bytes; the limit is {MAX_BODY_BYTES}", None)
    try:
        raw = bytes(body).decode("utf-8")
    except UnicodeDecodeError as exc:
        return UnsupportedInteraction(f"body is not valid UTF-8 (byte {exc.start})", None)
    try:
        parsed: Any = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        return UnsupportedInteraction("body is not usable JSON: nested too deeply", None)
    except ValueError as exc:
        return UnsupportedInteraction(f"body is not JSON: {exc}", None)
    if not isinstance(parsed, dict):
        return UnsupportedInteraction(f"body must be a JSON object, got {type(parsed).__name__}", None)
    raw_id = parsed.get("id")
    action_id = raw_id if isinstance(raw_id, str) and raw_id.strip() else None
    try:
        return _decode(parsed, action_id, received_at, transport)
    except Reject as exc:
        return UnsupportedInteraction(exc.reason, action_id)
    except RecursionError:  # a value nested near the parser's limit, touched one level deeper
        return UnsupportedInteraction("body is not usable: nested too deeply", action_id)
