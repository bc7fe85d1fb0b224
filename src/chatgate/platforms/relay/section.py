"""``platforms.relay``: the keys of the relay connector section (docs/relay-protocol.md)."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from chatgate.platforms.kit.section import EnvName, PlatformSection, Section


class FrontedPlatform(Section):
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

    @property
    def name(self) -> str:
        return self.platform.strip().lower()


class RelaySection(PlatformSection):
    url: str | None = None
    """The connector's base URL (``wss://relay.example``, ``http://127.0.0.1:8787``); ``/relay`` is added."""
    gateway_id: str | None = None
    secret_env: EnvName | None = None
    """Name of the environment variable that holds this gateway's relay secret."""
    platforms: list[FrontedPlatform] = [FrontedPlatform(platform="discord")]
    allow_private_urls: bool = False
    """Fetch an attachment URL (``media_urls``) whose host is a private, loopback or link-local
    address. Off: such a file is not fetched and the agent and the user read why."""
    outbound_timeout_seconds: float = Field(20.0, gt=0)
    """An action with no ``outbound_result`` within this long is recorded as ambiguous."""
    handshake_timeout_seconds: float = Field(15.0, gt=0)
    reconnect_initial_seconds: float = Field(1.0, gt=0)
    reconnect_max_seconds: float = Field(30.0, gt=0)
    going_idle_timeout_seconds: float = Field(5.0, ge=0)
    token_ttl_seconds: int = Field(300, ge=30)
