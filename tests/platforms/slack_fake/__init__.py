"""A fake Slack on 127.0.0.1: the Web API over HTTP and a Socket Mode server, one port.

slack-sdk's ``AsyncWebClient(base_url=fake.api_base)`` and Bolt talk to it unmodified.
See ``webapi.py`` (methods, 429 and failures on demand, the call log, what each channel
shows) and ``socket_mode.py`` (envelopes, acks, redelivery).
"""

from slack_fake.payloads import (
    APP_TOKEN,
    BOT_TOKEN,
    BOT_USER,
    SIGNING_SECRET,
    TEAM,
    block_action,
    delete_event,
    edit_event,
    message_event,
    slash_command,
)
from slack_fake.socket_mode import Envelope, SocketModeServer
from slack_fake.webapi import FakeSlack, Posted

__all__ = [
    "APP_TOKEN",
    "BOT_TOKEN",
    "BOT_USER",
    "SIGNING_SECRET",
    "TEAM",
    "Envelope",
    "FakeSlack",
    "Posted",
    "SocketModeServer",
    "block_action",
    "delete_event",
    "edit_event",
    "message_event",
    "slash_command",
]
