"""Slack's interactive payloads as ``Inbound`` values: buttons and selects (``block_actions``),
message shortcuts (``message_action``) and modal submissions (``view_submission``).

Each is keyed by its ``trigger_id`` (``ix:<trigger_id>``), which Slack sends again with a
redelivered envelope; a payload of another type, or one that names no conversation to
answer in, is an ``Undecodable`` with its reason, recorded and acknowledged.
"""

from __future__ import annotations

import json
import time
from typing import Any

from chatgate.domain.inbound import MAX_TEXT_CHARS, Inbound, InboundKind
from chatgate.domain.prompts import parse_prompt_token
from chatgate.domain.source import Source
from chatgate.platforms.slack.decode import (
    PLATFORM,
    TRANSPORT,
    Decoded,
    chat_type_of,
    dict_of,
    str_or_none,
    text_of,
    undecodable,
)


def decode_interactive(payload: dict[str, Any]) -> Decoded:
    """A ``block_actions`` payload (a button or a select), a message shortcut, or a modal
    submission that names its conversation; anything else is refused with its reason."""
    kind = payload.get("type")
    trigger = str_or_none(payload.get("trigger_id"))
    if kind == "message_action":
        return decode_message_shortcut(payload)
    if kind == "view_submission":
        return decode_view_submission(payload)
    if kind != "block_actions":
        return undecodable(f"unsupported interactive payload {kind!r}", trigger and f"ix:{trigger}", payload)
    actions = payload.get("actions")
    channel = str_or_none(dict_of(payload.get("channel")).get("id"))
    if trigger is None or not isinstance(actions, list) or len(actions) != 1 or channel is None:
        return undecodable("block_actions without one action, a trigger or a channel", trigger, payload)
    action = dict_of(actions[0])
    message = dict_of(payload.get("message"))
    value, values = _action_values(action)
    item_kind: InboundKind = "button" if action.get("type") == "button" else "select"
    source = _source(payload, channel, str_or_none(message.get("thread_ts")))
    body: dict[str, Any] = {"action_id": action.get("action_id"), "block_id": action.get("block_id"),
                            "value": value, "values": values}  # fmt: skip
    parsed = parse_prompt_token(value) if item_kind == "button" else None
    if parsed is not None:
        body["prompt_response"] = {"prompt_id": parsed[0], "option_id": parsed[1]}
    container = dict_of(payload.get("container"))
    return Inbound(
        transport=TRANSPORT,
        delivery_id=f"ix:{trigger}",
        source=source,
        text=value,
        kind=item_kind,
        action_id=f"{action.get('action_id')}:{action.get('action_ts')}",
        message_ref=str_or_none(container.get("message_ts")) or str_or_none(message.get("ts")),
        received_at=time.time(),
        payload=body,
        observes_labels=False,
    )


def _source(payload: dict[str, Any], channel: str, thread_id: str | None) -> Source:
    """Who acted, and where the answer goes: the same for every interactive payload."""
    user = dict_of(payload.get("user"))
    return Source(
        platform=PLATFORM,
        chat_id=channel,
        chat_type=chat_type_of(channel),
        user_id=str_or_none(user.get("id")),
        user_name=str_or_none(user.get("username")) or str_or_none(user.get("name")),
        thread_id=thread_id,
        scope_id=str_or_none(dict_of(payload.get("team")).get("id")),
    )


def _action_values(action: dict[str, Any]) -> tuple[str, list[str]]:
    """A button's value, or every value a select submitted (single or multi)."""
    if isinstance(action.get("value"), str):
        return action["value"], [action["value"]]
    options = action.get("selected_options")
    if not isinstance(options, list):
        single = action.get("selected_option")
        options = [single] if isinstance(single, dict) else []
    values = [str(o.get("value")) for o in options if isinstance(o, dict)]
    for key in ("selected_user", "selected_channel", "selected_conversation", "selected_date"):
        if str_or_none(action.get(key)):
            values.append(str(action[key]))
    return (values[0] if len(values) == 1 else " ".join(values)), values


def decode_message_shortcut(payload: dict[str, Any]) -> Decoded:
    """A message shortcut: the command's name and the target message, quoted in full."""
    trigger = str_or_none(payload.get("trigger_id"))
    channel = str_or_none(dict_of(payload.get("channel")).get("id"))
    message = dict_of(payload.get("message"))
    callback = str_or_none(payload.get("callback_id"))
    target_ts = str_or_none(message.get("ts"))
    if trigger is None or channel is None or callback is None or target_ts is None:
        return undecodable(
            "message shortcut without trigger_id, channel, callback_id or message", trigger, payload
        )
    content = text_of(message.get("text"))
    author = str_or_none(message.get("user")) or str_or_none(message.get("bot_id"))
    target = {"kind": "message", "id": target_ts, "author": {"id": author}, "content": content,
              "files": len(message.get("files") or [])}  # fmt: skip
    text = f"/{callback} on message {target_ts} by {author or '(unknown author)'}:\n{content or '(no text)'}"
    return Inbound(
        transport=TRANSPORT,
        delivery_id=f"ix:{trigger}",
        source=_source(payload, channel, str_or_none(message.get("thread_ts"))),
        text=text[:MAX_TEXT_CHARS],
        kind="context_menu",
        action_id=trigger,
        message_ref=target_ts,
        reply_to=target_ts,
        received_at=time.time(),
        payload={"callback_id": callback, "target": target},
        observes_labels=False,
    )


def decode_view_submission(payload: dict[str, Any]) -> Decoded:
    """A modal's submission, every input kept (block, action, type, value or values), when the
    view's ``private_metadata`` names the conversation (``{"channel": ..., "thread_ts": ...}``,
    as whoever opened it set it); a modal with nowhere to answer is refused with that reason."""
    trigger = str_or_none(payload.get("trigger_id")) or str_or_none(dict_of(payload.get("view")).get("id"))
    view = dict_of(payload.get("view"))
    meta = _metadata(view.get("private_metadata"))
    channel = str_or_none(meta.get("channel"))
    if trigger is None or channel is None:
        return undecodable("modal submission that names no conversation (private_metadata.channel)",
                            trigger and f"ix:{trigger}", payload)  # fmt: skip
    labels = {
        str(b.get("block_id")): text_of(dict_of(b.get("label")).get("text"))
        for b in view.get("blocks") or []
        if isinstance(b, dict)
    }
    fields = _view_fields(dict_of(dict_of(view.get("state")).get("values")), labels)
    callback = str_or_none(view.get("callback_id")) or "modal"
    lines = [f"{f['label'] or f['block_id'] + '.' + f['action_id']}: {f['value']}" for f in fields]
    return Inbound(
        transport=TRANSPORT,
        delivery_id=f"ix:{trigger}",
        source=_source(payload, channel, str_or_none(meta.get("thread_ts"))),
        text="\n".join([f"/{callback} submitted:", *lines])[:MAX_TEXT_CHARS],
        kind="modal",
        action_id=str_or_none(view.get("id")),
        received_at=time.time(),
        payload={"callback_id": callback, "view_id": view.get("id"), "fields": fields},
        observes_labels=False,
    )


def _metadata(raw: object) -> dict[str, Any]:
    if not isinstance(raw, str) or not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return dict_of(value)


def _view_fields(values: dict[str, Any], labels: dict[str, str]) -> list[dict[str, Any]]:
    """Every input of a submitted view, in block order, empty optional ones included."""
    fields: list[dict[str, Any]] = []
    for block_id, actions in values.items():
        for action_id, state in dict_of(actions).items():
            state = dict_of(state)
            value, chosen = _action_values(state)
            plain = state.get("value")
            shown = plain if isinstance(plain, str) else value
            label = labels.get(str(block_id), "")
            ids = {"block_id": str(block_id), "action_id": str(action_id), "label": label}
            fields.append({**ids, "type": str_or_none(state.get("type")), "value": shown, "values": chosen})
    return fields
