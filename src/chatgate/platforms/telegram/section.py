"""``platforms.telegram``: the keys of the Telegram section (docs/platforms/telegram.md)."""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec

from chatgate.platforms.kit.section import EnvName, PlatformSection

DEFAULT_API_BASE = "https://api.telegram.org"


class TelegramSection(PlatformSection, kw_only=True):
    numbers_as_text: ClassVar[bool] = True

    token_env: EnvName | None = None
    """Name of the environment variable that holds the bot token (required when enabled)."""
    allow_users: list[str] = []
    """Telegram user ids allowed to talk to the agent; everyone else is refused (default deny)."""
    pairing: bool = False
    """Strangers who write in a DM get a one-time code for the operator (``chatgate pairing``)."""
    api_base: str = DEFAULT_API_BASE
    poll_timeout_seconds: Annotated[int, msgspec.Meta(ge=1, le=50)] = 25
    drop_pending_updates: bool = False
    """Skip the updates Telegram holds at start-up instead of answering the backlog."""
