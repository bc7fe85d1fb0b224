"""Payload shapes Slack sends (Events API callbacks, block actions, slash commands)."""

from __future__ import annotations

import itertools
import time
from typing import Any

TEAM = "T0FAKE1"
BOT_USER = "U0BOT"
BOT_TOKEN = "xoxb-fake-bot-token-never-logged-5c1e"
APP_TOKEN = "xapp-1-fake-app-token-never-logged-77aa"
SIGNING_SECRET = "fake-signing-secret-0b9d"
_ts = itertools.count(1)
_events = itertools.count(1)


def next_ts() -> str:
    return f"{int(time.time())}.{next(_ts):06d}"


def message_event(
    channel: str,
    user: str,
    text: str,
    *,
    channel_type: str = "im",
    thread_ts: str | None = None,
    ts: str | None = None,
    team: str = TEAM,
    subtype: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An ``event_callback`` body carrying a ``message`` event (its ``event_id`` fresh)."""
    event: dict[str, Any] = {
        "type": "message",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": ts or next_ts(),
        "channel_type": channel_type,
        "team": team,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    if subtype:
        event["subtype"] = subtype
    event.update(extra or {})
    return callback(event, team)


def callback(event: dict[str, Any], team: str = TEAM) -> dict[str, Any]:
    return {
        "token": "verification-token",
        "team_id": team,
        "api_app_id": "A0FAKE",
        "event": event,
        "type": "event_callback",
        "event_id": f"Ev{next(_events):08d}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": team, "user_id": BOT_USER, "is_bot": True}],
    }


def block_action(
    channel: str, user: str, message_ts: str, value: str, *, action_id: str = "approval", team: str = TEAM
) -> dict[str, Any]:
    """A ``block_actions`` payload: a button on message ``message_ts`` was clicked."""
    return {
        "type": "block_actions",
        "team": {"id": team, "domain": "fake"},
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team},
        "api_app_id": "A0FAKE",
        "trigger_id": f"trig.{next(_events)}",
        "channel": {"id": channel, "name": "chan"},
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel},
        "message": {"type": "message", "ts": message_ts, "text": "prompt"},
        "actions": [
            {
                "action_id": action_id,
                "block_id": "b1",
                "type": "button",
                "value": value,
                "action_ts": next_ts(),
            }
        ],
    }


def slash_command(channel: str, user: str, command: str, text: str = "", team: str = TEAM) -> dict[str, Any]:
    return {
        "token": "verification-token",
        "team_id": team,
        "channel_id": channel,
        "channel_name": "directmessage" if channel.startswith("D") else "chan",
        "user_id": user,
        "user_name": user.lower(),
        "command": command,
        "text": text,
        "api_app_id": "A0FAKE",
        "trigger_id": f"trig.{next(_events)}",
        "response_url": "http://127.0.0.1:9/unused",
    }


def edit_event(
    channel: str, user: str, ts: str, text: str, previous: str, *, channel_type: str = "im", team: str = TEAM
) -> dict[str, Any]:
    """A ``message_changed`` callback: ``user`` edited message ``ts`` from ``previous`` to ``text``."""
    event = {
        "type": "message",
        "subtype": "message_changed",
        "channel": channel,
        "channel_type": channel_type,
        "hidden": True,
        "ts": next_ts(),
        "message": {"type": "message", "user": user, "text": text, "ts": ts, "edited": {"user": user}},
        "previous_message": {"type": "message", "user": user, "text": previous, "ts": ts},
    }
    return callback(event, team)


def delete_event(channel: str, user: str, ts: str, text: str, team: str = TEAM) -> dict[str, Any]:
    event = {
        "type": "message",
        "subtype": "message_deleted",
        "channel": channel,
        "hidden": True,
        "ts": next_ts(),
        "deleted_ts": ts,
        "previous_message": {"type": "message", "user": user, "text": text, "ts": ts},
    }
    return callback(event, team)
