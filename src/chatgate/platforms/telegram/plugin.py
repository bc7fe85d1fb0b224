"""Telegram as a platform plugin: its section, its token, its questions and its build."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from chatgate.domain.errors import ConfigError
from chatgate.engine.ports import PlatformContext
from chatgate.platforms.kit.init import CheckFailed, InitAnswers, Prompter, get_json
from chatgate.platforms.kit.plugin import Credential, Extra, PlatformBuild, Plugin, Secret
from chatgate.platforms.telegram.section import DEFAULT_API_BASE, TelegramSection

TOKEN_FROM = "the token from @BotFather"


class TelegramPlugin(Plugin[TelegramSection]):
    name = "telegram"
    title = "Telegram"
    section = TelegramSection
    extra = Extra("telegram", ("aiohttp",))
    doc = "docs/platforms/telegram.md"
    summary = "a Telegram bot (a token from @BotFather; long polling, no public URL)"

    def secrets(self, section: TelegramSection) -> list[Secret]:
        return [Secret("token_env", section.token_env, TOKEN_FROM)]

    def build(self, section: TelegramSection, ctx: PlatformContext) -> PlatformBuild:
        from chatgate.platforms.telegram.adapter import TelegramAdapter  # the adapter, not yet aiohttp

        token = ctx.secret(section.token_env) or ""
        try:
            adapter = TelegramAdapter(
                section, token, ctx.store, ctx.intake, duplicate_marker=ctx.duplicate_marker
            )
        except ValueError as exc:
            raise ConfigError(f"platforms.telegram.token_env: {exc}") from exc
        return PlatformBuild(adapters=[adapter], credentials=[Credential("telegram", token, "bot token")])

    def live_check(self, section: TelegramSection, environ: Mapping[str, str]) -> str | None:
        return _who_is(section.api_base, environ.get(section.token_env or "", ""))

    # ------------------------------------------------------------ chatgate init

    def init_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--telegram-token-env", help="the environment variable holding the bot token")
        parser.add_argument("--telegram-api-base", help=f"the Bot API address (default {DEFAULT_API_BASE})")

    def init_ask(self, p: Prompter, current: Mapping[str, Any], args: argparse.Namespace) -> InitAnswers:
        p.say("  telegram: talk to @BotFather in Telegram, send /newbot, and keep the token it gives you")
        env = p.env_name(
            args.telegram_token_env,
            "  Environment variable holding the bot token",
            str(current.get("token_env") or "TELEGRAM_BOT_TOKEN"),
        )
        api_base = args.telegram_api_base or str(current.get("api_base") or DEFAULT_API_BASE)
        values: dict[str, Any] = {"token_env": env}
        if api_base != DEFAULT_API_BASE or "api_base" in current:
            values["api_base"] = api_base
        answers = InitAnswers(section=values, secrets=[env])
        p.checked_secret(env, TOKEN_FROM, "Telegram", lambda token: _who_is(api_base, token))
        return answers


def _who_is(api_base: str, token: str) -> str:
    """``getMe``: proves the token before the gateway needs it, and names the bot."""
    url = f"{api_base.rstrip('/')}/bot{token}/getMe"
    body = get_json(url, {}, "the Telegram Bot API", secret=token)
    result = body.get("result") if isinstance(body, dict) and body.get("ok") else None
    if not isinstance(result, dict) or "username" not in result:
        raise CheckFailed("the Telegram Bot API did not accept the token (getMe was not ok)")
    username = str(result["username"])
    return f"the token belongs to @{username}. Chat with it: https://t.me/{username}"


PLUGIN = TelegramPlugin()
