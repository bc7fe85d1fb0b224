"""``platforms.matrix``: the keys of the Matrix section (docs/platforms/matrix.md)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from chatgate.platforms.kit.section import Check, PlatformSection, env_var_name

AutoJoin = Literal["allowed", "anyone", "off"]
TOKEN_PREFIXES = ("syt_", "mat_", "mct_")
"""How Synapse's and MAS's access tokens begin: such a value is a pasted secret, not a variable name
(their underscores would pass the kit's name check)."""


def _not_a_token(value: str) -> str:
    if value.startswith(TOKEN_PREFIXES):
        raise ValueError(
            "this must be the name of an environment variable (like MATRIX_ACCESS_TOKEN), and what"
            " is here is an access token; remove it from the file, export MATRIX_ACCESS_TOKEN=..."
            " and give that variable's name here"
        )
    return value


VarName = Annotated[str, Check(env_var_name), Check(_not_a_token)]
"""A ``*_env`` key that is refused with Matrix's own advice when it holds an access token."""


class MatrixSection(PlatformSection, kw_only=True):
    homeserver: str = ""
    """The homeserver's client-server API base, ``https://matrix.example.org`` (required)."""
    user_id: str = ""
    """The bot's Matrix id, ``@bot:example.org``: required for password login; with a token,
    checked against ``whoami`` when set."""
    access_token_env: VarName | None = None
    """Name of the environment variable that holds the bot's access token."""
    password_env: VarName | None = None
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
    sync_timeout_seconds: Annotated[int, msgspec.Meta(ge=1, le=120)] = 30
    """How long one /sync long poll waits on the homeserver for new events."""
    timeline_limit: Annotated[int, msgspec.Meta(ge=1, le=500)] = 50
    """Events per room in one /sync answer; a longer gap is read back with /messages."""
    max_catch_up_events: Annotated[int, msgspec.Meta(ge=0, le=100_000)] = 5000
    """At most this many events per room are read back after downtime (older ones are recorded
    as skipped, never answered)."""

    def __post_init__(self) -> None:
        if self.enabled and self.password_env and not self.user_id:
            raise ValueError("user_id is required with password_env (the login names the user)")
