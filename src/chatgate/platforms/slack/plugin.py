"""Slack as a platform plugin: its section, its tokens per mode, its questions and its build."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from chatgate.engine.ports import PlatformContext
from chatgate.platforms.kit.init import CheckFailed, InitAnswers, Prompter, get_json
from chatgate.platforms.kit.plugin import Credential, Extra, PlatformBuild, Plugin, Secret
from chatgate.platforms.slack.section import EVENTS_PATH, SlackSection

BOT_TOKEN = "the bot token (xoxb-, OAuth & Permissions)"
APP_TOKEN = "the app-level token (xapp-, Basic Information, scope connections:write)"
SIGNING_SECRET = "the signing secret (Basic Information)"


class SlackPlugin(Plugin[SlackSection]):
    name = "slack"
    title = "Slack"
    section = SlackSection
    # Bolt's async app and slack-sdk's Socket Mode client run on aiohttp.
    extra = Extra("slack", ("slack_bolt", "slack_sdk", "aiohttp"))
    doc = "docs/platforms/slack.md"
    summary = "a Slack app (Socket Mode needs no public URL; or the HTTP Events API)"

    def secrets(self, section: SlackSection) -> list[Secret]:
        per_mode = (
            Secret("app_token_env", section.app_token_env, APP_TOKEN)
            if section.mode == "socket"
            else Secret("signing_secret_env", section.signing_secret_env, SIGNING_SECRET)
        )
        return [Secret("bot_token_env", section.bot_token_env, BOT_TOKEN), per_mode]

    def build(self, section: SlackSection, ctx: PlatformContext) -> PlatformBuild:
        from chatgate.platforms.slack.adapter import SlackAdapter, SlackSettings  # not yet slack_sdk

        socket = section.mode == "socket"
        bot_token = ctx.secret(section.bot_token_env) or ""
        settings = SlackSettings(
            section=section,
            bot_token=bot_token,
            app_token=ctx.secret(section.app_token_env) if socket else None,
            signing_secret=None if socket else ctx.secret(section.signing_secret_env),
            duplicate_marker=ctx.duplicate_marker,
        )
        adapter = SlackAdapter(settings, ctx.intake)
        built = PlatformBuild(adapters=[adapter], credentials=[Credential("slack", bot_token, "bot token")])
        if not socket:
            from starlette.routing import Route  # only here: a Socket Mode start never imports starlette

            built.routes.append(Route(EVENTS_PATH, adapter.http_endpoint, methods=["POST"]))
        return built

    def live_check(self, section: SlackSection, environ: Mapping[str, str]) -> str | None:
        return _auth_test(section.api_base, environ.get(section.bot_token_env or "", ""))

    # ------------------------------------------------------------ chatgate init

    def init_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--slack-mode", help="socket (no public URL) or http (the Events API)")
        parser.add_argument("--slack-bot-token-env", help="the variable holding the bot token (xoxb-)")
        parser.add_argument("--slack-app-token-env", help="the variable holding the app token (xapp-)")
        parser.add_argument("--slack-signing-secret-env", help="the variable holding the signing secret")
        parser.add_argument("--slack-api-base", help="Slack's Web API base (default https://slack.com/api/)")

    def init_ask(self, p: Prompter, current: Mapping[str, Any], args: argparse.Namespace) -> InitAnswers:
        p.say(
            "  slack: create an app from the manifest in docs/platforms/slack.md, install it to your"
            " workspace, and keep its bot token (and, for Socket Mode, an app-level token)"
        )
        mode = p.pick(
            args.slack_mode,
            "  Mode: socket (Socket Mode, no public URL) or http (Slack posts to /slack/events)",
            str(current.get("mode") or "socket"),
            ("socket", "http"),
        )
        bot = p.env_name(
            args.slack_bot_token_env,
            "  Environment variable holding the bot token (xoxb-)",
            str(current.get("bot_token_env") or "SLACK_BOT_TOKEN"),
        )
        values: dict[str, Any] = {"mode": mode, "bot_token_env": bot}
        if mode == "socket":
            values["app_token_env"] = p.env_name(
                args.slack_app_token_env,
                "  Environment variable holding the app-level token (xapp-)",
                str(current.get("app_token_env") or "SLACK_APP_TOKEN"),
            )
        else:
            values["signing_secret_env"] = p.env_name(
                args.slack_signing_secret_env,
                "  Environment variable holding the signing secret",
                str(current.get("signing_secret_env") or "SLACK_SIGNING_SECRET"),
            )
        api_base = args.slack_api_base or str(current.get("api_base") or SlackSection().api_base)
        if api_base != SlackSection().api_base or "api_base" in current:
            values["api_base"] = api_base
        secrets = [v for k, v in values.items() if k.endswith("_env")]
        answers = InitAnswers(section=values, secrets=secrets)
        other = values.get("app_token_env") or values["signing_secret_env"]
        p.checked_secret(bot, "the bot token (xoxb-)", "Slack", lambda token: _auth_test(api_base, token))
        p.secret(other, APP_TOKEN if mode == "socket" else SIGNING_SECRET)  # saved with the config
        return answers


def _auth_test(api_base: str, token: str) -> str:
    """``auth.test``: proves the bot token and names the bot and its workspace."""
    url = api_base.rstrip("/") + "/auth.test"
    # POSTed, as slack-sdk calls every method (Slack's recommended way; a GET is not always served)
    body = get_json(url, {"Authorization": f"Bearer {token}"}, "the Slack Web API", secret=token, body={})
    if not isinstance(body, dict) or not body.get("ok"):
        error = body.get("error") if isinstance(body, dict) else None
        raise CheckFailed(f"Slack did not accept the bot token ({error or 'auth.test was not ok'})")
    return f"the token belongs to the bot {body.get('user') or body.get('user_id')} in {body.get('team')}"


PLUGIN = SlackPlugin()
