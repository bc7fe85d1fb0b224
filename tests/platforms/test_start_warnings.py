"""A correct setup starts without warnings (issue 31, item 8): Bolt's "client prioritized,
token skipped" (it reads SLACK_BOT_TOKEN, the variable our docs name, even when given a
client), its "token skipped" (``authorize`` hands back the client's own token), and
discord.py's "voice will NOT be supported" (the gateway never joins voice)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient

from chatgate.platforms.slack.bolt_app import build_bolt_app


async def test_bolt_built_with_our_client_does_not_warn_about_slack_bot_token(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-from-the-environment")

    async def handler(lane: str, body: dict[str, Any]) -> BoltResponse:
        return BoltResponse(status=200)

    def identity() -> AuthorizeResult:
        return AuthorizeResult(enterprise_id=None, team_id="T1", bot_token="xoxb-ours")

    with caplog.at_level(logging.DEBUG):
        build_bolt_app(AsyncWebClient(token="xoxb-ours"), handler, None, identity)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_the_discord_client_is_built_without_voice_warnings(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import discord
    from chatgate.platforms.discord.adapter import DiscordAdapter

    monkeypatch.setattr(discord.VoiceClient, "warn_nacl", True)
    monkeypatch.setattr(discord.VoiceClient, "warn_dave", True)
    adapter = DiscordAdapter.__new__(DiscordAdapter)  # only the client factory is under test
    monkeypatch.setattr(DiscordAdapter, "_hook_parsers", lambda self, client: None)
    monkeypatch.setattr(DiscordAdapter, "_ready", lambda self, client: _named("on_ready"))
    with caplog.at_level(logging.DEBUG, logger="discord"):
        client = adapter._make_client()
    try:
        assert not [r for r in caplog.records if "voice will NOT" in r.getMessage()]
    finally:
        await client.close()


def _named(name: str) -> Any:
    async def handler(*args: Any) -> None:
        return None

    handler.__name__ = name
    return handler
