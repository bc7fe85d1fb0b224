"""Slack payloads (Events API callbacks, interactive payloads, slash commands) as ``Inbound`` values.

Pure functions over the parsed bodies Bolt hands us. Each result is an ``Inbound``, an
``Undecodable`` with its reason (recorded in the rejected log and acknowledged), or a
``Skipped``: a delivery that is not for the agent by design (the bot's own or another
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

import re
import time
from collections.abc import Collection
from typing import Any

import msgspec

from chatgate.domain.edits import EDIT_OF
from chatgate.domain.inbound import MAX_TEXT_CHARS, Inbound
from chatgate.domain.source import ChatType, Source
from chatgate.engine.ports import Undecodable
from chatgate.platforms.kit.skipped import Skipped
from chatgate.platforms.slack.files import attachments_of

PLATFORM = "slack"
TRANSPORT = "slack"
ASK_COMMAND = "/ask"
"""A prompt for the agent, as its own slash command or `/chatgate ask <prompt>`."""
TEXT_SUBTYPES = frozenset({"thread_broadcast", "file_share", "me_message"})
"""Message subtypes a person wrote; every other subtype is a notice (join, topic, ...)."""
_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")


class IntakeRules(msgspec.Struct, frozen=True):
    """Which channel messages reach the agent (DMs always do, subject to access)."""

    bot_user_id: str
    require_mention: bool = True
    channels: Collection[str] = ()
    """Channel ids the bot answers in; empty: every channel it is in."""
    free_response_channels: Collection[str] = ()
    """Channel ids where every message is for the agent, mention or not."""


Decoded = Inbound | Undecodable | Skipped


def chat_type_of(channel: str, channel_type: str | None = None) -> ChatType:
    """``im`` (a ``D…`` id) is a DM; public and private channels and group DMs are ``group``."""
    if channel_type is not None:
        return "dm" if channel_type == "im" else "group"
    return "dm" if channel.startswith("D") else "group"


def undecodable(reason: str, delivery_id: str | None, body: object) -> Undecodable:
    return Undecodable(TRANSPORT, reason, delivery_id, repr(body)[:300], PLATFORM)


def str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def text_of(value: object) -> str:
    return value if isinstance(value, str) else ""


def dict_of(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def decode_event(body: dict[str, Any], rules: IntakeRules) -> Decoded:
    """An Events API ``event_callback`` body (Socket Mode ``events_api`` or an HTTP event)."""
    event_id = str_or_none(body.get("event_id"))
    event = body.get("event")
    if event_id is None or not isinstance(event, dict):
        return undecodable("event callback without event_id or event", event_id, body)
    kind = event.get("type")
    if kind == "app_mention":
        return Skipped("app_mention: the message event carries the same message")
    if kind != "message":
        return undecodable(f"unsupported event type {kind!r}", event_id, event)
    subtype = event.get("subtype")
    if subtype == "message_changed":
        return _edit(body, event, event_id, rules)
    if subtype == "message_deleted":
        previous = dict_of(event.get("previous_message"))
        if previous.get("bot_id") or previous.get("user") == rules.bot_user_id:
            return Skipped("the bot's own message was deleted")
        deleted = text_of(event.get("deleted_ts"))
        return undecodable(f"message {deleted} deleted (recorded; the agent is not told)", event_id, previous)
    if subtype is not None and subtype not in TEXT_SUBTYPES:
        return Skipped(f"message subtype {subtype!r} is a notice")
    if event.get("bot_id") or event.get("user") == rules.bot_user_id:
        return Skipped("a bot's message")
    return _message(body, event, event_id, rules)


def _message(body: dict[str, Any], event: dict[str, Any], event_id: str, rules: IntakeRules) -> Decoded:
    channel, user, ts = (
        str_or_none(event.get("channel")),
        str_or_none(event.get("user")),
        str_or_none(event.get("ts")),
    )
    if channel is None or user is None or ts is None:
        return undecodable("message without channel, user or ts", event_id, event)
    text = text_of(event.get("text"))
    chat_type = chat_type_of(channel, str_or_none(event.get("channel_type")))
    if chat_type != "dm":
        skip = _channel_skip(channel, text, rules)
        if skip is not None:
            return skip
    if len(text) > MAX_TEXT_CHARS:
        return undecodable(f"text longer than {MAX_TEXT_CHARS} characters", event_id, text[:100])
    source = Source(
        platform=PLATFORM,
        chat_id=channel,
        chat_type=chat_type,
        user_id=user,
        thread_id=str_or_none(event.get("thread_ts")),
        scope_id=str_or_none(body.get("team_id")) or str_or_none(event.get("team")),
    )
    return Inbound(
        transport=TRANSPORT,
        delivery_id=event_id,
        source=source,
        text=strip_mention(text, rules.bot_user_id),
        message_ref=ts,
        received_at=time.time(),
        attachments=attachments_of(event),
        payload={"ts": ts, "files": len(event.get("files") or [])} if event.get("files") else {},
    )


def _edit(body: dict[str, Any], event: dict[str, Any], event_id: str, rules: IntakeRules) -> Decoded:
    """A person's edit of their message: admitted with ``edit_of`` (``domain/edits.py``): it updates
    the message if that still waits, else the agent is told it was edited. The bot's own edits
    (its previews, its finals) are skipped."""
    message, previous = dict_of(event.get("message")), dict_of(event.get("previous_message"))
    if message.get("bot_id") or message.get("user") == rules.bot_user_id:
        return Skipped("an edit of a bot's message")
    channel = str_or_none(event.get("channel"))
    user, ts = str_or_none(message.get("user")), str_or_none(message.get("ts"))
    if channel is None or user is None or ts is None:
        return undecodable("message_changed without channel, message.user or message.ts", event_id, event)
    text, before = text_of(message.get("text")), text_of(previous.get("text"))
    if text == before:
        return Skipped("an edit that did not change the text (an unfurl, a reaction count)")
    chat_type = chat_type_of(channel, str_or_none(event.get("channel_type")))
    if chat_type != "dm" and _channel_skip(channel, text, rules) and _channel_skip(channel, before, rules):
        return Skipped("an edit of a channel message that does not mention the bot")
    if len(text) > MAX_TEXT_CHARS:
        return undecodable(f"edited text longer than {MAX_TEXT_CHARS} characters", event_id, text[:100])
    return Inbound(
        transport=TRANSPORT,
        delivery_id=event_id,
        source=Source(
            platform=PLATFORM,
            chat_id=channel,
            chat_type=chat_type,
            user_id=user,
            thread_id=str_or_none(message.get("thread_ts")),
            scope_id=str_or_none(body.get("team_id")),
        ),
        text=strip_mention(text, rules.bot_user_id),
        message_ref=ts,
        received_at=time.time(),
        payload={EDIT_OF: ts, "previous": before},
    )


def _channel_skip(channel: str, text: str, rules: IntakeRules) -> Skipped | None:
    if rules.channels and channel not in rules.channels:
        return Skipped("a channel this bot is not configured to answer in")
    if channel in rules.free_response_channels or not rules.require_mention:
        return None
    if any(m.group(1) == rules.bot_user_id for m in _MENTION.finditer(text)):
        return None
    return Skipped("a channel message that does not mention the bot")


def strip_mention(text: str, bot_user_id: str) -> str:
    """The text without the bot's own mention (``<@U123>``), so ``@bot /stop`` is ``/stop``."""
    stripped = _MENTION.sub(lambda m: "" if m.group(1) == bot_user_id else m.group(0), text)
    return stripped.strip() if stripped != text else text


def decode_command(payload: dict[str, Any], gateway_command: str = "/chatgate") -> Decoded:
    """A slash command. The gateway's own (``/chatgate stop``) reaches admission as ``/stop``
    (Slack reserves ``/status`` and others, so the controls share one command); any other
    command the app registers reaches the agent as its text (``/deploy now``). ``/ask <prompt>``
    (its own command, or ``/chatgate ask <prompt>``) is the prompt alone, a message to the agent."""
    trigger = str_or_none(payload.get("trigger_id"))
    command, channel = str_or_none(payload.get("command")), str_or_none(payload.get("channel_id"))
    if trigger is None or command is None or channel is None:
        return undecodable("slash command without trigger_id, command or channel", trigger, payload)
    args = text_of(payload.get("text"))
    text = "/" + (args.strip() or "help") if command == gateway_command else f"{command} {args}".strip()
    head, _, prompt = text.partition(" ")
    asks = head.lower() == ASK_COMMAND
    if asks and not prompt.strip():
        return undecodable(f"{command} needs a prompt: {command} <what to ask the agent>", trigger, payload)
    source = Source(
        platform=PLATFORM,
        chat_id=channel,
        chat_type=chat_type_of(channel),
        user_id=str_or_none(payload.get("user_id")),
        user_name=str_or_none(payload.get("user_name")),
        scope_id=str_or_none(payload.get("team_id")),
    )
    return Inbound(
        transport=TRANSPORT,
        delivery_id=f"ix:{trigger}",
        source=source,
        text=prompt.strip() if asks else text,
        kind="text" if asks else "command",
        action_id=trigger,
        received_at=time.time(),
        payload={"command": command, "text": args},
        observes_labels=False,
    )
