"""``platforms.slack``: the keys of the Slack section (docs/platforms/slack.md)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import msgspec

from chatgate.platforms.kit.section import EnvName, PlatformSection

EVENTS_PATH = "/slack/events"
"""Where Slack posts events, interactions and slash commands in HTTP mode (the app's Request URL)."""


class SlackSection(PlatformSection, kw_only=True):
    numbers_as_text: ClassVar[bool] = True

    mode: Literal["socket", "http"] = "socket"
    """``socket``: Socket Mode, no public URL (needs ``app_token_env``); ``http``: Slack posts
    events to ``/slack/events`` on the gateway's HTTP server (needs ``signing_secret_env``)."""
    bot_token_env: EnvName | None = None
    """Name of the environment variable that holds the bot token (``xoxb-``)."""
    app_token_env: EnvName | None = None
    """Name of the environment variable that holds the app-level token (``xapp-``, Socket Mode)."""
    signing_secret_env: EnvName | None = None
    """Name of the environment variable that holds the app's signing secret (HTTP mode)."""
    allow_users: list[str] = []
    """Slack user ids (``U…``) allowed to talk to the agent; everyone else is refused (default deny)."""
    allow_all: bool = False
    pairing: bool = False
    """Strangers who write in a DM get a one-time code for the operator (``chatgate pairing``)."""
    require_mention: bool = True
    """In channels, answer only messages that mention the bot (DMs are always answered)."""
    channels: list[str] = []
    """Channel ids the bot answers in; empty: every channel it was invited to."""
    free_response_channels: list[str] = []
    """Channel ids where every message is for the agent, mention or not."""
    reply_in_thread: bool = True
    """A reply to a top-level channel message starts a thread on it (DMs reply in place)."""
    streaming: bool = True
    """Stream replies in threads with Slack's native streaming (one message that grows, then is
    sealed with the final) where the workspace has it; otherwise, or when false, edited previews."""
    slash_command: Annotated[str, msgspec.Meta(pattern=r"^/[a-z0-9_-]{1,31}\Z")] = "/chatgate"
    """The app's slash command for the controls: ``/chatgate stop`` is ``/stop``."""
    api_base: Annotated[str, msgspec.Meta(pattern=r"^https?://.+/\Z")] = "https://slack.com/api/"
