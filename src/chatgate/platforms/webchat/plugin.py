"""The built-in web chat as a platform plugin: on by default, served by the gateway's HTTP app."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from chatgate.domain.access import PlatformAccess
from chatgate.domain.errors import ConfigError
from chatgate.domain.store_roles import Accounts
from chatgate.engine.ports import PlatformContext
from chatgate.platforms.kit.init import InitAnswers, Prompter
from chatgate.platforms.kit.plugin import CommandTools, CoreView, PlatformBuild, Plugin, Secret
from chatgate.platforms.webchat.section import WebChatSection


class WebChatPlugin(Plugin[WebChatSection]):
    name = "web"
    title = "the web chat"
    section = WebChatSection
    doc = "docs/webchat.md"
    summary = "the built-in chat page, at http://<http.host>:<http.port>/"
    asks_access = False  # on loopback it is this machine's; beyond, accounts or a token decide

    guide = ("chatgate user add NAME       a web chat account and its sign-in token (web.auth: accounts)",)

    def add_commands(
        self, sub: argparse._SubParsersAction[argparse.ArgumentParser], tools: CommandTools
    ) -> None:
        from chatgate.platforms.webchat import cli  # only when the full command line is built

        cli.add_parser(sub, tools)

    def init_ask(self, p: Prompter, current: Mapping[str, Any], args: argparse.Namespace) -> InitAnswers:
        p.say("  web: the built-in chat, at http://127.0.0.1:8765/ once the gateway runs")
        return InitAnswers(section={}, notes=["Then open {http}/ and say hello."])

    def secrets(self, section: WebChatSection) -> list[Secret]:
        if not section.access_token_env:
            return []
        return [Secret("access_token_env", section.access_token_env, "the web chat's shared access token")]

    def check(self, section: WebChatSection, environ: Mapping[str, str], core: CoreView) -> None:
        """Beyond loopback the web chat needs a sign-in: anyone could claim any user id."""
        if section.access_token_env and not environ.get(section.access_token_env):
            raise ConfigError(
                f"platforms.web.access_token_env: environment variable {section.access_token_env} is not set"
            )
        mode = section.auth_mode()
        if mode == "token" and not section.access_token_env:
            raise ConfigError(
                "platforms.web.auth: token needs platforms.web.access_token_env (the variable that holds"
                " the shared token); or use auth: accounts"
            )
        if mode == "accounts" and section.access_token_env:
            raise ConfigError(
                "platforms.web.access_token_env: with platforms.web.auth: accounts people sign in with"
                " their own tokens (chatgate user add); remove access_token_env"
            )
        if mode == "none" and not core.http_loopback:
            raise ConfigError(
                f"platforms.web.auth: the web chat is bound to {core.http_host}, which is not loopback,"
                " and asks nobody to sign in; set platforms.web.auth: accounts (then chatgate user add NAME),"
                " or a shared token in platforms.web.access_token_env, or bind http.host to 127.0.0.1"
            )

    def access(self, section: WebChatSection, core: CoreView) -> dict[str, PlatformAccess]:
        # With accounts, signing in is the allowlist: the gateway set the user id, not the browser.
        default = section.auth_mode() == "accounts" or core.http_loopback
        allow_all = section.allow_all if section.allow_all is not None else default
        users = frozenset(section.allow_users)
        return {self.name: PlatformAccess(allow_all=allow_all, allow_users=users, pairing=section.pairing)}

    def build(self, section: WebChatSection, ctx: PlatformContext) -> PlatformBuild:
        from chatgate.platforms.webchat.adapter import WebChatAdapter  # starlette, the page
        from chatgate.platforms.webchat.model_choice import ModelChoice
        from chatgate.platforms.webchat.routes import page_routes
        from chatgate.platforms.webchat.session_gate import SessionGate
        from chatgate.platforms.webchat.uploads import UploadDesk, UploadSigner, upload_routes

        accounts = section.auth_mode() == "accounts"
        lowered = frozenset(o.lower() for o in section.origins())
        gate = SessionGate(ctx.store, lowered, section.secure_cookies) if accounts else None
        signer = UploadSigner(source=ctx.media) if ctx.media is not None else None
        adapter = WebChatAdapter(
            ctx.store,
            ctx.intake,
            max_text_chars=section.max_text_chars,
            access_token=ctx.secret(section.access_token_env),
            max_queued_bytes=section.max_queued_bytes,
            gate=gate,
            session_check_seconds=section.session_check_seconds,
            draft_interval=section.draft_interval_ms / 1000,
            hello_timeout=ctx.auth_timeout,
            max_conversations=section.max_conversations_per_user,
            uploads=signer,
            models=ModelChoice(ctx.store, ctx.profiles, ctx.session_key_of) if ctx.session_key_of else None,
        )
        from chatgate.platforms.webchat.history_routes import HistoryDesk, history_routes  # starlette
        from chatgate.platforms.webchat.owners import BrowserOwners, ChatOwners, SignedOwners

        built = PlatformBuild(
            adapters=[adapter],
            routes=page_routes(adapter, section.origins(), ctx.http_loopback, section.agent_name),
            allowed_origins=section.origins(),
        )
        owners: ChatOwners = (
            SignedOwners(gate)
            if gate is not None
            else BrowserOwners(ctx.secret(section.access_token_env), lowered, ctx.http_loopback)
        )
        link = signer.file_link if signer is not None else None
        built.routes.extend(history_routes(HistoryDesk(ctx.store, owners, link=link)))
        if ctx.media is not None and signer is not None:
            built.routes.extend(upload_routes(UploadDesk(ctx.store, owners, ctx.media, signer)))
            built.preflight.append(signer.preflight)  # the fleet's shared key, before anything is served
        if gate is not None:
            from chatgate.platforms.webchat.account_routes import AccountDesk, account_routes  # accounts
            from chatgate.platforms.webchat.attempts import SignInAttempts

            attempts = SignInAttempts(section.sign_in_attempts_per_minute)
            desk = AccountDesk(ctx.store, gate, attempts, section.session_hours * 3600, adapter)
            built.routes.extend(account_routes(desk))
            built.preflight.append(lambda: _someone_can_sign_in(ctx.store))
        return built


async def _someone_can_sign_in(store: Accounts) -> str | None:
    if any(a.active for a in await store.list_accounts()):
        return None
    return (
        "platforms.web.auth: accounts, but there are no users yet; add one with"
        " `chatgate user add NAME --admin` (it prints a sign-in token), then start again"
    )


PLUGIN = WebChatPlugin()
