"""Slack payloads (Events API callbacks, interactive payloads, slash commands) as ``Inbound`` values.

Pure functions over the parsed bodies Bolt hands us. Each result is an ``Inbound``, an
``Undecodable`` with its reason (recorded in the rejected log and acknowledged), or a
``Skip``: a delivery that is not for the agent by design (the bot's own or another
bot's message, a channel message that does not mention the bot, a join notice), which is
acknowledged and logged at debug level only.

Identities: ``delivery_id`` is what Slack redelivers, identical on every retry: the
callback's ``event_id`` for events, the interaction's ``trigger_id`` for buttons,
selects and slash commands. ``message_ref`` is the message's ``ts`` (for a button, the
message it is attached to). The source is keyed like the relay contract's Slack source:
``scope_id`` is the workspace (team) id, a DM (``im``, a ``D…`` channel) is ``dm``,
every other conversation ``group``, and ``thread_ts`` is the thread id.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from chatgate.domain.inbound import MAX_TEXT_CHARS, Inbound, InboundKind
from chatgate.domain.prompts import parse_prompt_token
from chatgate.domain.source import ChatType, Source
from chatgate.engine.ports import Undecodable

PLATFORM = "slack"
TRANSPORT = "slack"
TEXT_SUBTYPES = frozenset({"thread_broadcast", "file_share", "me_message"})
"""Message subtypes a person wrote; every other subtype is a notice (join, topic, ...)."""
_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")


@dataclass(frozen=True, slots=True)
class Skip:
    """Not for the agent, by design: acknowledge, log at debug, record nothing."""

    reason: str


@dataclass(frozen=True, slots=True)
class IntakeRules:
    """Which channel messages reach the agent (DMs always do, subject to access)."""

    bot_user_id: str
    require_mention: bool = True
    channels: Collection[str] = ()
    """Channel ids the bot answers in; empty: every channel it is in."""
    free_response_channels: Collection[str] = ()
    """Channel ids where every message is for the agent, mention or not."""


Decoded = Inbound | Undecodable | Skip


def chat_type_of(channel: str, channel_type: str | None = None) -> ChatType:
    """``im`` (a ``D…`` id) is a DM; public and private channels and group DMs are ``group``."""
    if channel_type is not None:
        return "dm" if channel_type == "im" else "group"
    return "dm" if channel.startswith("D") else "group"


def _undecodable(reason: str, delivery_id: str | None, body: object) -> Undecodable:
    return Undecodable(TRANSPORT, reason, delivery_id, repr(body)[:300], PLATFORM)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def decode_event(body: dict[str, Any], rules: IntakeRules) -> Decoded:
    """An Events API ``event_callback`` body (Socket Mode ``events_api`` or an HTTP event)."""
    event_id = _str(body.get("event_id"))
    event = body.get("event")
    if event_id is None or not isinstance(event, dict):
        return _undecodable("event callback without event_id or event", event_id, body)
    kind = event.get("type")
    if kind == "app_mention":
        return Skip("app_mention: the message event carries the same message")
    if kind != "message":
        return _undecodable(f"unsupported event type {kind!r}", event_id, event)
    subtype = event.get("subtype")
    if subtype in ("message_changed", "message_deleted"):
        return _undecodable(f"message {subtype.split('_')[1]}: edits and deletions are not handled yet",
                            event_id, event)  # fmt: skip
    if subtype is not None and subtype not in TEXT_SUBTYPES:
        return Skip(f"message subtype {subtype!r} is a notice")
    if event.get("bot_id") or event.get("user") == rules.bot_user_id:
        return Skip("a bot's message")
    return _message(body, event, event_id, rules)


def _message(body: dict[str, Any], event: dict[str, Any], event_id: str, rules: IntakeRules) -> Decoded:
    channel, user, ts = _str(event.get("channel")), _str(event.get("user")), _str(event.get("ts"))
    if channel is None or user is None or ts is None:
        return _undecodable("message without channel, user or ts", event_id, event)
    text = _text(event.get("text"))
    chat_type = chat_type_of(channel, _str(event.get("channel_type")))
    if chat_type != "dm":
        skip = _channel_skip(channel, text, rules)
        if skip is not None:
            return skip
    if len(text) > MAX_TEXT_CHARS:
        return _undecodable(f"text longer than {MAX_TEXT_CHARS} characters", event_id, text[:100])
    source = Source(
        platform=PLATFORM,
        chat_id=channel,
        chat_type=chat_type,
        user_id=user,
        thread_id=_str(event.get("thread_ts")),
        scope_id=_str(body.get("team_id")) or _str(event.get("team")),
    )
    return Inbound(
        transport=TRANSPORT,
        delivery_id=event_id,
        source=source,
        text=strip_mention(text, rules.bot_user_id),
        message_ref=ts,
        received_at=time.time(),
        payload={"ts": ts, "files": len(event.get("files") or [])} if event.get("files") else {},
    )


def _channel_skip(channel: str, text: str, rules: IntakeRules) -> Skip | None:
    if rules.channels and channel not in rules.channels:
        return Skip("a channel this bot is not configured to answer in")
    if channel in rules.free_response_channels or not rules.require_mention:
        return None
    if any(m.group(1) == rules.bot_user_id for m in _MENTION.finditer(text)):
        return None
    return Skip("a channel message that does not mention the bot")


def strip_mention(text: str, bot_user_id: str) -> str:
    """The text without the bot's own mention (``<@U123>``), so ``@bot /stop`` is ``/stop``."""
    stripped = _MENTION.sub(lambda m: "" if m.group(1) == bot_user_id else m.group(0), text)
    return stripped.strip() if stripped != text else text


def decode_interactive(payload: dict[str, Any]) -> Decoded:
    """A ``block_actions`` payload (a button or a select), a message shortcut, or a modal
    submission that names its conversation; anything else is refused with its reason."""
    kind = payload.get("type")
    trigger = _str(payload.get("trigger_id"))
    if kind == "message_action":
        return decode_message_shortcut(payload)
    if kind == "view_submission":
        return decode_view_submission(payload)
    if kind != "block_actions":
        return _undecodable(f"unsupported interactive payload {kind!r}", trigger and f"ix:{trigger}", payload)
    actions = payload.get("actions")
    channel = _str(_dict(payload.get("channel")).get("id"))
    user = _dict(payload.get("user"))
    if trigger is None or not isinstance(actions, list) or len(actions) != 1 or channel is None:
        return _undecodable("block_actions without one action, a trigger or a channel", trigger, payload)
    action = _dict(actions[0])
    message = _dict(payload.get("message"))
    value, values = _action_values(action)
    item_kind: InboundKind = "button" if action.get("type") == "button" else "select"
    source = Source(
        platform=PLATFORM,
        chat_id=channel,
        chat_type=chat_type_of(channel),
        user_id=_str(user.get("id")),
        user_name=_str(user.get("username")) or _str(user.get("name")),
        thread_id=_str(message.get("thread_ts")),
        scope_id=_str(_dict(payload.get("team")).get("id")),
    )
    body: dict[str, Any] = {"action_id": action.get("action_id"), "block_id": action.get("block_id"),
                            "value": value, "values": values}  # fmt: skip
    parsed = parse_prompt_token(value) if item_kind == "button" else None
    if parsed is not None:
        body["prompt_response"] = {"prompt_id": parsed[0], "option_id": parsed[1]}
    container = _dict(payload.get("container"))
    return Inbound(
        transport=TRANSPORT,
        delivery_id=f"ix:{trigger}",
        source=source,
        text=value,
        kind=item_kind,
        action_id=f"{action.get('action_id')}:{action.get('action_ts')}",
        message_ref=_str(container.get("message_ts")) or _str(message.get("ts")),
        received_at=time.time(),
        payload=body,
        observes_labels=False,
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
        if _str(action.get(key)):
            values.append(str(action[key]))
    return (values[0] if len(values) == 1 else " ".join(values)), values


def decode_command(payload: dict[str, Any], gateway_command: str = "/chatgate") -> Decoded:
    """A slash command. The gateway's own (``/chatgate stop``) reaches admission as ``/stop``
    (Slack reserves ``/status`` and others, so the controls share one command); any other
    command the app registers reaches the agent as its text (``/deploy now``)."""
    trigger = _str(payload.get("trigger_id"))
    command, channel = _str(payload.get("command")), _str(payload.get("channel_id"))
    if trigger is None or command is None or channel is None:
        return _undecodable("slash command without trigger_id, command or channel", trigger, payload)
    args = _text(payload.get("text"))
    text = "/" + (args.strip() or "help") if command == gateway_command else f"{command} {args}".strip()
    source = Source(
        platform=PLATFORM,
        chat_id=channel,
        chat_type=chat_type_of(channel),
        user_id=_str(payload.get("user_id")),
        user_name=_str(payload.get("user_name")),
        scope_id=_str(payload.get("team_id")),
    )
    return Inbound(
        transport=TRANSPORT,
        delivery_id=f"ix:{trigger}",
        source=source,
        text=text,
        kind="command",
        action_id=trigger,
        received_at=time.time(),
        payload={"command": command, "text": args},
        observes_labels=False,
    )


def decode_message_shortcut(payload: dict[str, Any]) -> Decoded:
    """A message shortcut: the command's name and the target message, quoted in full."""
    trigger = _str(payload.get("trigger_id"))
    channel = _str(_dict(payload.get("channel")).get("id"))
    message, user = _dict(payload.get("message")), _dict(payload.get("user"))
    callback = _str(payload.get("callback_id"))
    target_ts = _str(message.get("ts"))
    if trigger is None or channel is None or callback is None or target_ts is None:
        return _undecodable(
            "message shortcut without trigger_id, channel, callback_id or message", trigger, payload
        )
    content = _text(message.get("text"))
    author = _str(message.get("user")) or _str(message.get("bot_id"))
    target = {"kind": "message", "id": target_ts, "author": {"id": author}, "content": content,
              "files": len(message.get("files") or [])}  # fmt: skip
    text = f"/{callback} on message {target_ts} by {author or '(unknown author)'}:\n{content or '(no text)'}"
    return Inbound(
        transport=TRANSPORT,
        delivery_id=f"ix:{trigger}",
        source=Source(
            platform=PLATFORM,
            chat_id=channel,
            chat_type=chat_type_of(channel),
            user_id=_str(user.get("id")),
            user_name=_str(user.get("username")) or _str(user.get("name")),
            thread_id=_str(message.get("thread_ts")),
            scope_id=_str(_dict(payload.get("team")).get("id")),
        ),
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
    trigger = _str(payload.get("trigger_id")) or _str(_dict(payload.get("view")).get("id"))
    view = _dict(payload.get("view"))
    meta = _metadata(view.get("private_metadata"))
    channel = _str(meta.get("channel"))
    if trigger is None or channel is None:
        return _undecodable("modal submission that names no conversation (private_metadata.channel)",
                            trigger and f"ix:{trigger}", payload)  # fmt: skip
    labels = {
        str(b.get("block_id")): _text(_dict(b.get("label")).get("text"))
        for b in view.get("blocks") or []
        if isinstance(b, dict)
    }
    fields = _view_fields(_dict(_dict(view.get("state")).get("values")), labels)
    user = _dict(payload.get("user"))
    callback = _str(view.get("callback_id")) or "modal"
    lines = [f"{f['label'] or f['block_id'] + '.' + f['action_id']}: {f['value']}" for f in fields]
    return Inbound(
        transport=TRANSPORT,
        delivery_id=f"ix:{trigger}",
        source=Source(
            platform=PLATFORM,
            chat_id=channel,
            chat_type=chat_type_of(channel),
            user_id=_str(user.get("id")),
            user_name=_str(user.get("username")) or _str(user.get("name")),
            thread_id=_str(meta.get("thread_ts")),
            scope_id=_str(_dict(payload.get("team")).get("id")),
        ),
        text="\n".join([f"/{callback} submitted:", *lines])[:MAX_TEXT_CHARS],
        kind="modal",
        action_id=_str(view.get("id")),
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
    return _dict(value)


def _view_fields(values: dict[str, Any], labels: dict[str, str]) -> list[dict[str, Any]]:
    """Every input of a submitted view, in block order, empty optional ones included."""
    fields: list[dict[str, Any]] = []
    for block_id, actions in values.items():
        for action_id, state in _dict(actions).items():
            state = _dict(state)
            value, chosen = _action_values(state)
            plain = state.get("value")
            shown = plain if isinstance(plain, str) else value
            label = labels.get(str(block_id), "")
            ids = {"block_id": str(block_id), "action_id": str(action_id), "label": label}
            fields.append({**ids, "type": _str(state.get("type")), "value": shown, "values": chosen})
    return fields
