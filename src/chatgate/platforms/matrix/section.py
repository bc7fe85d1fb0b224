"""``platforms.matrix``: the keys of the Matrix section (docs/platforms/matrix.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from chatgate.platforms.kit.section import EnvName, PlatformSection

AutoJoin = Literal["allowed", "anyone", "off"]
TOKEN_PREFIXES = ("syt_", "mat_", "mct_")
"""How Synapse's and MAS's access tokens begin: such a value is a pasted secret, not a variable name
(their underscores would pass the kit's name check)."""


class MatrixSection(PlatformSection):
    homeserver: str = ""
    """The homeserver's client-server API base, ``https://matrix.example.org`` (required)."""
    user_id: str = ""
    """The bot's Matrix id, ``@bot:example.org``: required for password login; with a token,
    checked against ``whoami`` when set."""
    access_token_env: EnvName | None = None
    """Name of the environment variable that holds the bot's access token."""
    password_env: EnvName | None = None
    """Or: the variable holding the bot's password (a login at each start, on ``device_id``)."""
    device_id: str = "CHATGATE"
    """The device a password login signs in as (the same device at every start)."""
    allow_users: list[str] = []
    """Matrix user ids allowed to talk to the agent (``@ann:example.org``); default deny."""
    allow_all: bool = False
    pairing: bool = False
    """Strangers who write in a DM get a one-time code for the operator (``chatgate pairing``)."""
    require_mention: bool = True
    """In a room with more than two members, answer only messages that mention the bot, reply to
    it, or are a control command (``/approve``)."""
    free_response_rooms: list[str] = []
    """Room ids (``!abc:example.org``) where every message is for the bot, mention or not."""
    auto_join: AutoJoin = "allowed"
    """Invites to accept: from allowed users (``allowed``; anyone when ``allow_all`` or
    ``pairing`` is on), from ``anyone``, or none (``off``: join rooms by hand)."""
    sync_timeout_seconds: int = Field(30, ge=1, le=120)
    """How long one /sync long poll waits on the homeserver for new events."""
    timeline_limit: int = Field(50, ge=1, le=500)
    """Events per room in one /sync answer; a longer gap is read back with /messages."""
    max_catch_up_events: int = Field(5000, ge=0, le=100_000)
    """At most this many events per room are read back after downtime (older ones are recorded
    as skipped, never answered)."""

    @field_validator("access_token_env", "password_env")
    @classmethod
    def _not_a_token(cls, value: str | None) -> str | None:
        if value is not None and value.startswith(TOKEN_PREFIXES):
            raise ValueError(
                "this must be the name of an environment variable (like MATRIX_ACCESS_TOKEN), and what"
                " is here is an access token; remove it from the file, export MATRIX_ACCESS_TOKEN=..."
                " and give that variable's name here"
            )
        return value

    @model_validator(mode="after")
    def _one_credential(self) -> MatrixSection:
        if self.enabled and self.password_env and not self.user_id:
            raise ValueError("user_id is required with password_env (the login names the user)")
        return self
