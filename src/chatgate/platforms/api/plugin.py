"""The OpenAI-compatible API as a platform plugin: bearer keys, routes on the gateway's HTTP app."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from chatgate.domain.access import PlatformAccess
from chatgate.domain.errors import ConfigError
from chatgate.engine.ports import PlatformContext
from chatgate.platforms.api.section import ApiSection
from chatgate.platforms.kit.init import InitAnswers, Prompter
from chatgate.platforms.kit.plugin import CommandTools, CoreView, PlatformBuild, Plugin


class ApiPlugin(Plugin[ApiSection]):
    name = "api"
    title = "the OpenAI-compatible API"
    section = ApiSection
    doc = "docs/api.md"
    summary = "the OpenAI-compatible API at /v1 (bearer keys from `chatgate api-key create`)"
    asks_access = False  # the bearer key is the credential

    def check(self, section: ApiSection, environ: Mapping[str, str], core: CoreView) -> None:
        if section.key_storage == "env" and not (section.key_env and environ.get(section.key_env)):
            raise ConfigError(
                "platforms.api.key_env: with key_storage: env, name an environment variable that holds the"
                f" API key and export it ({section.key_env or 'unset'} is not set); or use key_storage: store"
                " and `chatgate api-key create`"
            )

    def access(self, section: ApiSection, core: CoreView) -> dict[str, PlatformAccess]:
        # The bearer key is the credential: the adapter submits only what a valid key sent.
        return {self.name: PlatformAccess(allow_all=True)}

    def build(self, section: ApiSection, ctx: PlatformContext) -> PlatformBuild:
        from chatgate.platforms.api.adapter import ApiAdapter, ApiSettings  # starlette, the shapes
        from chatgate.platforms.api.routes import api_routes

        settings = ApiSettings(
            model=section.model,
            env_token=ctx.secret(section.key_env) if section.key_storage == "env" else None,
            max_body_bytes=section.max_body_bytes,
            wait_seconds=section.wait_seconds,
            max_waiting=section.max_waiting,
            client_system=section.client_system,
            keys={key: (p.system_prompt, p.client_system) for key, p in section.keys.items()},
            profiles=ctx.profiles.names if len(ctx.profiles.all) > 1 else (),
            allow_private_urls=section.allow_private_urls,
        )
        adapter = ApiAdapter(ctx.store, ctx.intake, settings, ctx.media)
        return PlatformBuild(adapters=[adapter], routes=api_routes(adapter))

    guide = ("chatgate api-key create      a bearer key for the OpenAI-compatible API (docs/api.md)",)

    def add_commands(
        self, sub: argparse._SubParsersAction[argparse.ArgumentParser], tools: CommandTools
    ) -> None:
        from chatgate.platforms.api import cli  # only when the full command line is built

        cli.add_parser(sub, tools)

    def init_ask(self, p: Prompter, current: Mapping[str, Any], args: argparse.Namespace) -> InitAnswers:
        p.say("  api: OpenAI clients reach the agent at http://<http.host>:<http.port>/v1")
        return InitAnswers(
            section={"key_storage": str(current.get("key_storage") or "store")},
            notes=["API: make a key for each client with `chatgate api-key create --name NAME`"],
        )


PLUGIN = ApiPlugin()
