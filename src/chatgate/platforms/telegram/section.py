"""``platforms.telegram``: the keys of the Telegram section (docs/platforms/telegram.md)."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from chatgate.platforms.kit.section import EnvName, PlatformSection

DEFAULT_API_BASE = "https://api.telegram.org"


class TelegramSection(PlatformSection):
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    token_env: EnvName | None = None
    """Name of the environment variable that holds the bot token (required when enabled)."""
    allow_users: list[str] = []
    """Telegram user ids allowed to talk to the agent; everyone else is refused (default deny)."""
    pairing: bool = False
    """Strangers who write in a DM get a one-time code for the operator (``chatgate pairing``)."""
    api_base: str = DEFAULT_API_BASE
    poll_timeout_seconds: int = Field(25, ge=1, le=50)
    drop_pending_updates: bool = False
    """Skip the updates Telegram holds at start-up instead of answering the backlog."""
