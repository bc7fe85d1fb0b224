"""Where discord.py talks to: the one place that points it at ``api_base``.

discord.py has no setting for its endpoints: every REST route (webhooks and interaction
callbacks included) is built on the class attribute ``discord.http.Route.BASE``, and a
plain ``Client`` dials ``DiscordWebSocket.DEFAULT_GATEWAY`` (also after an INVALID_SESSION)
without asking ``GET /gateway/bot``. ``point_rest`` sets the first from
``platforms.discord.api_base``; ``point_gateway`` sets the second to the URL that
``GET /gateway/bot`` answers (what Discord asks clients to use). Both are process-wide,
which is why one gateway serves one Discord API (docs/platforms/discord.md).
"""

from __future__ import annotations

DEFAULT_API_BASE = "https://discord.com/api/v10"


def point_rest(api_base: str) -> None:
    import discord.http

    discord.http.Route.BASE = api_base.rstrip("/")


def point_gateway(url: str) -> None:
    import yarl
    from discord.gateway import DiscordWebSocket

    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)
