"""``platforms.relay``: the keys of the relay connector section (docs/relay-protocol.md)."""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec

from chatgate.platforms.kit.section import EnvName, PlatformSection, Section


class FrontedPlatform(Section, kw_only=True):
    numbers_as_text: ClassVar[bool] = True

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


class RelaySection(PlatformSection, kw_only=True):
    url: str | None = None
    """The connector's base URL (``wss://relay.example``, ``http://127.0.0.1:8787``); ``/relay`` is added."""
    gateway_id: str | None = None
    secret_env: EnvName | None = None
    """Name of the environment variable that holds this gateway's relay secret."""
    platforms: list[FrontedPlatform] = msgspec.field(
        default_factory=lambda: [FrontedPlatform(platform="discord")]
    )
    allow_private_urls: bool = False
    """Fetch an attachment URL (``media_urls``) whose host is a private, loopback or link-local
    address. Off: such a file is not fetched and the agent and the user read why."""
    outbound_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 20.0
    """An action with no ``outbound_result`` within this long is recorded as ambiguous."""
    handshake_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 15.0
    reconnect_initial_seconds: Annotated[float, msgspec.Meta(gt=0)] = 1.0
    reconnect_max_seconds: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    going_idle_timeout_seconds: Annotated[float, msgspec.Meta(ge=0)] = 5.0
    token_ttl_seconds: Annotated[int, msgspec.Meta(ge=30)] = 300
