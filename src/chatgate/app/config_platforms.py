"""The ``platforms`` section: the web chat, Telegram, Discord and the relay connector."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from chatgate.app.config_section import EnvName, Section


class WebChatConfig(Section):
    enabled: bool = True
    allow_all: bool | None = None
    """``None``: allow everyone when bound to loopback, nobody otherwise."""
    allow_users: list[str] = []
    pairing: bool = False
    """Strangers who write in a DM get a one-time code for the operator (``chatgate pairing``)."""
    access_token_env: EnvName | None = None
    max_text_chars: int = Field(16_000, ge=1)
    draft_interval_ms: float = Field(50.0, ge=0)
    allowed_origins: list[str] = []
    """Other origins (``https://chat.example``) whose pages may open /ws; same-origin always may."""
    max_queued_bytes: int = Field(4 * 1024 * 1024, ge=64 * 1024)
    """What one socket may have waiting to be written before a client that does not read is
    closed (and resyncs on reconnect); at least one reply's frame (``max_text_chars``)."""


class TelegramConfig(Section):
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    enabled: bool = False
    token_env: EnvName | None = None
    """Name of the environment variable that holds the bot token (required when enabled)."""
    allow_users: list[str] = []
    """Telegram user ids allowed to talk to the agent; everyone else is refused (default deny)."""
    pairing: bool = False
    """Strangers who write in a DM get a one-time code for the operator (``chatgate pairing``)."""
    api_base: str = "https://api.telegram.org"
    poll_timeout_seconds: int = Field(25, ge=1, le=50)
    drop_pending_updates: bool = False
    """Skip the updates Telegram holds at start-up instead of answering the backlog."""


class RelayPlatformConfig(Section):
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    platform: str
    """The fronted platform's name as the connector's descriptor names it (e.g. ``discord``)."""
    bot_id: str = ""
    """The bot identity sent in ``hello`` (the connector validates ``platform:botId``)."""
    allow_users: list[str] = []
    """User ids of that platform allowed to talk to the agent (default deny)."""
    allow_all: bool = False
    pairing: bool = False
    """Strangers who write in a DM get a one-time code for the operator (``chatgate pairing``)."""


class RelayConfig(Section):
    enabled: bool = False
    url: str | None = None
    """The connector's base URL (``wss://relay.example``, ``http://127.0.0.1:8787``); ``/relay`` is added."""
    gateway_id: str | None = None
    secret_env: EnvName | None = None
    """Name of the environment variable that holds this gateway's relay secret."""
    platforms: list[RelayPlatformConfig] = [RelayPlatformConfig(platform="discord")]
    outbound_timeout_seconds: float = Field(20.0, gt=0)
    """An action with no ``outbound_result`` within this long is recorded as ambiguous."""
    handshake_timeout_seconds: float = Field(15.0, gt=0)
    reconnect_initial_seconds: float = Field(1.0, gt=0)
    reconnect_max_seconds: float = Field(30.0, gt=0)
    going_idle_timeout_seconds: float = Field(5.0, ge=0)
    token_ttl_seconds: int = Field(300, ge=30)


class DiscordConfig(Section):
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    enabled: bool = False
    token_env: EnvName | None = None
    """Name of the environment variable that holds the bot token (required when enabled)."""
    allow_users: list[str] = []
    """Discord user ids allowed to talk to the agent; everyone else is refused (default deny)."""
    allow_roles: list[str] = []
    """Role ids whose members may talk to the agent in a guild, besides ``allow_users``."""
    allow_all: bool = False
    allow_channels: list[str] = []
    """Channel ids (a thread counts as its parent's) the bot answers in; empty: every channel."""
    require_mention: bool = True
    """In a guild, answer only messages that mention the bot or reply to it."""
    free_response_channels: list[str] = []
    """Channel ids where every message is for the bot, mention or not."""
    pairing: bool = False
    """Strangers who write in a DM get a one-time code for the operator (``chatgate pairing``)."""
    catch_up_hours: float = Field(24.0, ge=0, le=24 * 30)
    """After downtime, read back what channels active this recently got meanwhile (0: none)."""
    command_guilds: list[str] = []
    """Guild ids to register the slash commands in (instant); empty: globally."""
    register_commands: bool = True
    api_base: str = "https://discord.com/api/v10"
    """Discord's REST base; tests point it at a fake Discord (the gateway URL comes from it)."""


class PlatformsConfig(Section):
    web: WebChatConfig = WebChatConfig()
    telegram: TelegramConfig = TelegramConfig()
    discord: DiscordConfig = DiscordConfig()
    relay: RelayConfig = RelayConfig()
