"""Discord as a platform plugin: its section, its token, its questions and its build."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from chatgate.domain.access import PlatformAccess
from chatgate.engine.ports import PlatformContext
from chatgate.platforms.discord.endpoint import DEFAULT_API_BASE
from chatgate.platforms.discord.section import DiscordSection
from chatgate.platforms.kit.init import CheckFailed, InitAnswers, Prompter, get_json
from chatgate.platforms.kit.plugin import CoreView, Credential, Extra, PlatformBuild, Plugin, Secret

TOKEN_FROM = "the bot token from the Discord developer portal"
PERMISSIONS = 274877975552
"""View Channels, Send Messages (and in threads), Read Message History (docs/platforms/discord.md)."""
MESSAGE_CONTENT_FLAGS = (1 << 18) | (1 << 19)
"""An application's flags when its Message Content intent is on (verified, or under 100 servers)."""


class DiscordPlugin(Plugin[DiscordSection]):
    name = "discord"
    title = "Discord"
    section = DiscordSection
    extra = Extra("discord", ("discord",))
    doc = "docs/platforms/discord.md"
    summary = "a Discord bot (a token from the developer portal; the gateway connection, no public URL)"

    def secrets(self, section: DiscordSection) -> list[Secret]:
        return [Secret("token_env", section.token_env, TOKEN_FROM)]

    def access(self, section: DiscordSection, core: CoreView) -> dict[str, PlatformAccess]:
        # With allow_roles the adapter decides (a member's roles are only on the Discord event).
        return {
            self.name: PlatformAccess(
                allow_all=section.allow_all or bool(section.allow_roles),
                allow_users=frozenset(section.allow_users),
                pairing=section.pairing,
            )
        }

    def build(self, section: DiscordSection, ctx: PlatformContext) -> PlatformBuild:
        from chatgate.platforms.discord.adapter import DiscordAdapter  # discord.py loads at start

        token = ctx.secret(section.token_env) or ""
        adapter = DiscordAdapter(section, token, ctx.store, ctx.intake, duplicate_marker=ctx.duplicate_marker)
        return PlatformBuild(adapters=[adapter], credentials=[Credential("discord", token, "bot token")])

    def live_check(self, section: DiscordSection, environ: Mapping[str, str]) -> str | None:
        return _who_is(section.api_base, environ.get(section.token_env or "", ""))

    # ------------------------------------------------------------ chatgate init

    def init_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--discord-token-env", help="the environment variable holding the bot token")
        parser.add_argument("--discord-api-base", help=f"Discord's REST base (default {DEFAULT_API_BASE})")

    def init_ask(self, p: Prompter, current: Mapping[str, Any], args: argparse.Namespace) -> InitAnswers:
        p.say(
            "  discord: in the developer portal, New Application, Bot tab: Reset Token, and turn on"
            " the Message Content Intent (docs/platforms/discord.md)"
        )
        env = p.env_name(
            args.discord_token_env,
            "  Environment variable holding the bot token",
            str(current.get("token_env") or "DISCORD_BOT_TOKEN"),
        )
        api_base = args.discord_api_base or str(current.get("api_base") or DEFAULT_API_BASE)
        values: dict[str, Any] = {"token_env": env}
        if api_base != DEFAULT_API_BASE or "api_base" in current:
            values["api_base"] = api_base
        answers = InitAnswers(section=values, secrets=[env])
        token, found = p.checked_secret(env, "the bot token", "Discord", lambda t: _who_is(api_base, t))
        if token is not None and found is not None:
            answers.notes.extend(_invite(api_base, token))
        return answers


def _who_is(api_base: str, token: str) -> str:
    """``GET /users/@me``: proves the bot token and names the bot."""
    auth = {"Authorization": f"Bot {token}"}
    me = get_json(api_base.rstrip("/") + "/users/@me", auth, "the Discord API", secret=token)
    if not isinstance(me, dict) or not me.get("bot"):
        raise CheckFailed("the Discord API did not accept the token as a bot token")
    return f"the token belongs to the bot {me.get('username')} (id {me.get('id')})"


def _invite(api_base: str, token: str) -> list[str]:
    """The invite URL, and a warning when the Message Content intent is off (best effort)."""
    auth = {"Authorization": f"Bot {token}"}
    try:
        app = get_json(
            api_base.rstrip("/") + "/oauth2/applications/@me", auth, "the Discord API", secret=token
        )
    except CheckFailed:
        return []
    if not isinstance(app, dict) or "id" not in app:
        return []
    notes = [
        "Invite the bot to a server: https://discord.com/oauth2/authorize?client_id="
        f"{app['id']}&scope=bot+applications.commands&permissions={PERMISSIONS}"
    ]
    if not int(app.get("flags") or 0) & MESSAGE_CONTENT_FLAGS:
        notes.append(
            "Discord: turn on the Message Content Intent (developer portal, Bot tab), or guild"
            " messages reach the bot without their text"
        )
    return notes


PLUGIN = DiscordPlugin()
