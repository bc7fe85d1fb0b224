"""The ``platforms`` section: web chat, Telegram, Slack, Discord, the relay and the OpenAI API."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from chatgate.app.config.section import EnvName, Section


class WebChatConfig(Section):
    enabled: bool = True
    allow_all: bool | None = None
    """``None``: allow everyone when bound to loopback, nobody otherwise."""
    allow_users: list[str] = []
    pairing: bool = False
    """Strangers who write in a DM get a one-time code for the operator (``chatgate pairing``)."""
    access_token_env: EnvName | None = None
    auth: Literal["none", "token", "accounts"] | None = None
    """``accounts``: people sign in (``chatgate user add``) and see only their own chats;
    ``token``: one shared access token (``access_token_env``); ``none``: loopback only.
    Unset: ``token`` when ``access_token_env`` is set, else ``none``."""
    session_hours: float = Field(168.0, gt=0, le=24 * 366)
    """How long a sign-in lasts in a browser (accounts)."""
    secure_cookies: bool | None = None
    """Mark the session cookie ``Secure``; unset: when the page was requested over https
    (or a proxy in ``http.trusted_proxies`` said so with ``X-Forwarded-Proto: https``)."""
    sign_in_attempts_per_minute: int = Field(10, ge=1, le=10_000)
    """Sign-in attempts per minute, per client address and per account named (accounts)."""
    session_check_seconds: float = Field(5.0, gt=0, le=3600)
    """How often open sockets re-check their session, so a revocation elsewhere (the CLI,
    another process of a fleet) closes them (accounts)."""
    max_text_chars: int = Field(16_000, ge=1)
    draft_interval_ms: float = Field(50.0, ge=0)
    allowed_origins: list[str] = []
    """Other origins (``https://chat.example``) whose pages may open /ws; same-origin always may."""
    max_queued_bytes: int = Field(4 * 1024 * 1024, ge=64 * 1024)
    """What one socket may have waiting to be written before a client that does not read is
    closed (and resyncs on reconnect); at least one reply's frame (``max_text_chars``)."""

    def auth_mode(self) -> Literal["none", "token", "accounts"]:
        if self.auth is not None:
            return self.auth
        return "token" if self.access_token_env else "none"


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


class SlackConfig(Section):
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    enabled: bool = False
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
    slash_command: str = Field("/chatgate", pattern=r"^/[a-z0-9_-]{1,31}$")
    """The app's slash command for the controls: ``/chatgate stop`` is ``/stop``."""
    api_base: str = Field("https://slack.com/api/", pattern=r"^https?://.+/$")


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


class ApiConfig(Section):
    """The OpenAI-compatible API (``/v1/...``) on the gateway's HTTP server (docs/api.md)."""

    enabled: bool = False
    model: str = Field("chatgate", min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:/-]+$")
    """The model name clients ask for (``GET /v1/models`` lists it); any other name is a 400."""
    key_storage: Literal["store", "env"] = "store"
    """``store``: keys made with ``chatgate api-key create`` (hashed in the database);
    ``env``: the one key in ``key_env`` (for a deployment without a shell)."""
    key_env: EnvName | None = None
    """With ``key_storage: env``: the environment variable that holds the accepted key."""
    max_body_bytes: int = Field(1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    """Longest request body read; a longer one is answered 400 (body_too_large) without reading the rest."""
    wait_seconds: float = Field(600.0, gt=0)
    """How long a request waits for its answer before a 504 (the turn keeps running: fetch it with
    ``GET /v1/responses/{id}`` or retry with the same ``Idempotency-Key``)."""
    max_waiting: int = Field(256, ge=1)
    """Requests waiting for an answer at once (each holds a connection); beyond it, 429."""


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
    status_reactions: bool = False
    """React 👀 to a person's message from admission until its answer is delivered."""
    api_base: str = "https://discord.com/api/v10"
    """Discord's REST base; tests point it at a fake Discord (the gateway URL comes from it)."""


class PlatformsConfig(Section):
    web: WebChatConfig = WebChatConfig()
    telegram: TelegramConfig = TelegramConfig()
    slack: SlackConfig = SlackConfig()
    discord: DiscordConfig = DiscordConfig()
    relay: RelayConfig = RelayConfig()
    api: ApiConfig = ApiConfig()
