"""Matrix as a platform plugin: its section, its secret, its questions and its build.

Cheap to import: the adapter (and aiohttp) load in ``build`` and the adapter's ``start``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from chatgate.domain.errors import ConfigError
from chatgate.engine.ports import PlatformContext
from chatgate.platforms.kit.init import CheckFailed, InitAnswers, Prompter, get_json
from chatgate.platforms.kit.plugin import (
    CoreView,
    Credential,
    Extra,
    PlatformBuild,
    Plugin,
    Secret,
    require_secret,
)
from chatgate.platforms.matrix.section import MatrixSection

TOKEN_FROM = "the bot account's access token (Element: Settings, Help & About, Access Token)"
PASSWORD_FROM = "the bot account's password"


class MatrixPlugin(Plugin[MatrixSection]):
    name = "matrix"
    title = "Matrix"
    section = MatrixSection
    extra = Extra("matrix", ("aiohttp",))
    doc = "docs/platforms/matrix.md"
    summary = "a Matrix bot account on any homeserver (/sync long polling, no public URL)"

    def secrets(self, section: MatrixSection) -> list[Secret]:
        if section.password_env:
            return [Secret("password_env", section.password_env, PASSWORD_FROM)]
        return [Secret("access_token_env", section.access_token_env, TOKEN_FROM)]

    def check(self, section: MatrixSection, environ: Mapping[str, str], core: CoreView) -> None:
        if not section.homeserver.startswith(("http://", "https://")):
            raise ConfigError(
                "platforms.matrix.homeserver: required when platforms.matrix.enabled is true; the"
                " homeserver's client API address, like https://matrix.example.org"
            )
        for secret in self.secrets(section):
            require_secret(self.name, secret, environ)

    def build(self, section: MatrixSection, ctx: PlatformContext) -> PlatformBuild:
        from chatgate.platforms.matrix.adapter import MatrixAdapter  # the adapter, not yet aiohttp

        secret = ctx.secret(section.password_env or section.access_token_env) or ""
        adapter = MatrixAdapter(section, secret, ctx.store, ctx.intake, duplicate_marker=ctx.duplicate_marker)
        # One process per account: two would sync (and answer) the same events.
        account = section.user_id or secret
        return PlatformBuild(
            adapters=[adapter], credentials=[Credential("matrix", account, "Matrix account")]
        )

    def live_check(self, section: MatrixSection, environ: Mapping[str, str]) -> str | None:
        if section.password_env:
            return None  # a password sign-in would make a new device: the gateway signs in at start
        return _who_am_i(section.homeserver.rstrip("/"), environ.get(section.access_token_env or "", ""))

    # ------------------------------------------------------------ chatgate init

    def init_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--matrix-homeserver", help="the homeserver's address (https://matrix.example.org)"
        )
        parser.add_argument("--matrix-token-env", help="the environment variable holding the access token")
        parser.add_argument("--matrix-user-id", help="the bot's Matrix id (@bot:example.org)")

    def init_ask(self, p: Prompter, current: Mapping[str, Any], args: argparse.Namespace) -> InitAnswers:
        p.say(
            "  matrix: create an account for the bot on your homeserver, sign in once (Element) and"
            " copy its access token (docs/platforms/matrix.md)"
        )
        homeserver = p.until_valid(
            args.matrix_homeserver, "  Homeserver address", str(current.get("homeserver") or ""), _homeserver
        )
        env = p.env_name(
            args.matrix_token_env,
            "  Environment variable holding the access token",
            str(current.get("access_token_env") or "MATRIX_ACCESS_TOKEN"),
        )
        values: dict[str, Any] = {"homeserver": homeserver, "access_token_env": env}
        user = args.matrix_user_id if args.matrix_user_id is not None else str(current.get("user_id") or "")
        if user:
            values["user_id"] = user
        answers = InitAnswers(section=values, secrets=[env])
        _, found = p.checked_secret(env, "the access token", "Matrix", lambda t: _who_am_i(homeserver, t))
        if found is not None and not user:
            values["user_id"] = found.split()[-1]
        return answers


def _homeserver(value: str) -> str:
    value = value.strip().rstrip("/")
    if not value.startswith(("http://", "https://")):
        raise ValueError("the address starts with https:// (or http:// on your own machine)")
    return value


def _who_am_i(homeserver: str, token: str) -> str:
    """``GET /account/whoami``: proves the access token and names the account."""
    auth = {"Authorization": f"Bearer {token}"}
    me = get_json(homeserver + "/_matrix/client/v3/account/whoami", auth, "the homeserver", secret=token)
    user = me.get("user_id") if isinstance(me, dict) else None
    if not isinstance(user, str):
        raise CheckFailed("the homeserver did not name the account (no user_id in whoami)")
    device = me.get("device_id") if isinstance(me, dict) else None
    shown = f" (device {quote(str(device))})" if device else ""
    return f"the token belongs to{shown} {user}"


PLUGIN = MatrixPlugin()
