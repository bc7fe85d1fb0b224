"""The adapter registry: one entry per ``platforms.<section>`` of the config.

The composition root (``app/gateway.py``) names no platform: it asks each entry
who may talk on its platforms (before the engine is built: admission's
allowlists) and then to build its adapters over the engine's ports. Adding a
platform is one folder under ``platforms/`` and one entry here.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chatgate.app.config import ConfigError, GatewayConfig, secret
from chatgate.app.netaddr import is_loopback
from chatgate.domain.commands import CONTROL_COMMANDS
from chatgate.engine.authz import PlatformAccess
from chatgate.engine.pipeline import Engine
from chatgate.engine.ports import Adapter
from chatgate.store.base import Store

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from chatgate.platforms.webchat.adapter import WebChatAdapter


@dataclass(frozen=True, slots=True)
class Credential:
    """A platform credential one process may use at a time, across state directories."""

    kind: str
    value: str
    what: str
    """What it is, for the error a second process gets ("bot token")."""


@dataclass(slots=True)
class PlatformBuild:
    adapters: list[Adapter] = field(default_factory=list)
    credentials: list[Credential] = field(default_factory=list)
    web_chat: WebChatAdapter | None = None
    """The adapter the HTTP app serves at ``/`` and ``/ws``, if this entry has one."""
    routes: list[BaseRoute] = field(default_factory=list)
    """More routes of the gateway's HTTP app: the OpenAI-compatible API's ``/v1/...``, the
    HTTP endpoints a platform receives its events on (Slack's ``/slack/events``)."""
    preflight: list[Callable[[], Awaitable[str | None]]] = field(default_factory=list)
    """Checks run once the store is open, before anything is served: a problem refuses the
    start-up with its message (accounts with no users)."""


@dataclass(frozen=True, slots=True)
class PlatformEntry:
    section: str
    enabled: Callable[[GatewayConfig], bool]
    access: Callable[[GatewayConfig], dict[str, PlatformAccess]]
    build: Callable[[GatewayConfig, Engine, Store], PlatformBuild]


# ---------------------------------------------------------------- web chat


def _web_access(config: GatewayConfig) -> dict[str, PlatformAccess]:
    web = config.platforms.web
    # With accounts, signing in is the allowlist: the gateway set the user id, not the browser.
    default = web.auth_mode() == "accounts" or is_loopback(config.http.host)
    allow_all = web.allow_all if web.allow_all is not None else default
    users = frozenset(web.allow_users)
    return {"web": PlatformAccess(allow_all=allow_all, allow_users=users, pairing=web.pairing)}


def _build_web(config: GatewayConfig, engine: Engine, store: Store) -> PlatformBuild:
    from chatgate.platforms.webchat.adapter import WebChatAdapter
    from chatgate.platforms.webchat.session_gate import SessionGate

    web = config.platforms.web
    accounts = web.auth_mode() == "accounts"
    origins = frozenset(o.rstrip("/").lower() for o in web.allowed_origins)
    gate = SessionGate(store, origins, web.secure_cookies) if accounts else None
    adapter = WebChatAdapter(
        store,
        engine.intake,
        max_text_chars=web.max_text_chars,
        access_token=secret(os.environ, web.access_token_env),
        max_queued_bytes=web.max_queued_bytes,
        gate=gate,
        session_check_seconds=web.session_check_seconds,
        hello_timeout=config.http.auth_timeout_seconds,
    )
    built = PlatformBuild(adapters=[adapter], web_chat=adapter)
    if gate is not None:
        built.routes.extend(_account_routes(config, store, gate, adapter))
        built.preflight.append(lambda: _someone_can_sign_in(store))
    return built


def _account_routes(config: GatewayConfig, store: Store, gate: Any, adapter: Any) -> list[BaseRoute]:
    from chatgate.platforms.webchat.account_routes import AccountDesk, account_routes
    from chatgate.platforms.webchat.attempts import SignInAttempts
    from chatgate.platforms.webchat.history_routes import HistoryDesk, history_routes

    web = config.platforms.web
    attempts = SignInAttempts(web.sign_in_attempts_per_minute)
    desk = AccountDesk(store, gate, attempts, web.session_hours * 3600, adapter)
    return [*account_routes(desk), *history_routes(HistoryDesk(store, gate))]


async def _someone_can_sign_in(store: Store) -> str | None:
    if any(a.active for a in await store.list_accounts()):
        return None
    return (
        "platforms.web.auth: accounts, but there are no users yet; add one with"
        " `chatgate user add NAME --admin` (it prints a sign-in token), then start again"
    )


# ---------------------------------------------------------------- telegram


def _telegram_access(config: GatewayConfig) -> dict[str, PlatformAccess]:
    telegram = config.platforms.telegram
    return {"telegram": PlatformAccess(allow_users=frozenset(telegram.allow_users), pairing=telegram.pairing)}


def _build_telegram(config: GatewayConfig, engine: Engine, store: Store) -> PlatformBuild:
    from chatgate.platforms.telegram.adapter import TelegramAdapter, TelegramSettings

    cfg = config.platforms.telegram
    token = secret(os.environ, cfg.token_env)
    if not token:
        raise ConfigError(
            f"platforms.telegram.token_env: environment variable {cfg.token_env or '(unset)'} is not"
            " set; export it with the token from @BotFather"
        )
    settings = TelegramSettings(
        token=token,
        api_base=cfg.api_base,
        poll_timeout=cfg.poll_timeout_seconds,
        drop_pending_updates=cfg.drop_pending_updates,
        duplicate_marker=config.delivery.duplicate_marker,
    )
    try:
        adapter = TelegramAdapter(settings, store, engine.intake)
    except ValueError as exc:
        raise ConfigError(f"platforms.telegram.token_env: {exc}") from exc
    return PlatformBuild(adapters=[adapter], credentials=[Credential("telegram", token, "bot token")])


# ---------------------------------------------------------------- slack


SLACK_EVENTS_PATH = "/slack/events"
"""Where Slack posts events, interactions and slash commands in HTTP mode (the app's Request URL)."""


def _slack_access(config: GatewayConfig) -> dict[str, PlatformAccess]:
    slack = config.platforms.slack
    users = frozenset(slack.allow_users)
    return {"slack": PlatformAccess(allow_all=slack.allow_all, allow_users=users, pairing=slack.pairing)}


def _build_slack(config: GatewayConfig, engine: Engine, store: Store) -> PlatformBuild:
    from chatgate.platforms.slack.adapter import SlackAdapter, SlackSettings

    cfg = config.platforms.slack
    bot_token = secret(os.environ, cfg.bot_token_env)
    if not bot_token:
        raise ConfigError(
            f"platforms.slack.bot_token_env: environment variable {cfg.bot_token_env} is not set"
        )
    socket = cfg.mode == "socket"
    settings = SlackSettings(
        bot_token=bot_token,
        app_token=secret(os.environ, cfg.app_token_env) if socket else None,
        signing_secret=None if socket else secret(os.environ, cfg.signing_secret_env),
        api_base=cfg.api_base,
        require_mention=cfg.require_mention,
        channels=tuple(cfg.channels),
        free_response_channels=tuple(cfg.free_response_channels),
        reply_in_thread=cfg.reply_in_thread,
        streaming=cfg.streaming,
        gateway_command=cfg.slash_command,
        duplicate_marker=config.delivery.duplicate_marker,
    )
    adapter = SlackAdapter(settings, engine.intake)
    from starlette.routing import Route  # only here: a Telegram-only start never imports starlette

    routes: list[BaseRoute] = (
        [] if socket else [Route(SLACK_EVENTS_PATH, adapter.http_endpoint, methods=["POST"])]
    )
    credentials = [Credential("slack", bot_token, "bot token")]
    return PlatformBuild(adapters=[adapter], credentials=credentials, routes=routes)


# ---------------------------------------------------------------- discord


def _discord_access(config: GatewayConfig) -> dict[str, PlatformAccess]:
    cfg = config.platforms.discord
    # With allow_roles, the adapter decides (a member's roles are only on the Discord event).
    return {
        "discord": PlatformAccess(
            allow_all=cfg.allow_all or bool(cfg.allow_roles),
            allow_users=frozenset(cfg.allow_users),
            pairing=cfg.pairing,
        )
    }


def _build_discord(config: GatewayConfig, engine: Engine, store: Store) -> PlatformBuild:
    from chatgate.platforms.discord.adapter import DiscordAdapter, DiscordSettings

    cfg = config.platforms.discord
    token = secret(os.environ, cfg.token_env)
    if not token:
        raise ConfigError(
            f"platforms.discord.token_env: environment variable {cfg.token_env or '(unset)'} is not"
            " set; export it with the bot token from the Discord developer portal"
        )
    settings = DiscordSettings(
        token=token,
        api_base=cfg.api_base,
        require_mention=cfg.require_mention,
        free_response_channels=frozenset(cfg.free_response_channels),
        allow_channels=frozenset(cfg.allow_channels),
        allow_users=frozenset(cfg.allow_users),
        allow_roles=frozenset(cfg.allow_roles),
        allow_all=cfg.allow_all,
        catch_up_hours=cfg.catch_up_hours,
        command_guilds=tuple(cfg.command_guilds),
        register_commands=cfg.register_commands,
        duplicate_marker=config.delivery.duplicate_marker,
        status_reactions=cfg.status_reactions,
    )
    adapter = DiscordAdapter(settings, store, engine.intake)
    return PlatformBuild(adapters=[adapter], credentials=[Credential("discord", token, "bot token")])


# ---------------------------------------------------------------- relay connector


def _relay_access(config: GatewayConfig) -> dict[str, PlatformAccess]:
    return {
        fronted.platform.strip().lower(): PlatformAccess(
            allow_all=fronted.allow_all, allow_users=frozenset(fronted.allow_users), pairing=fronted.pairing
        )
        for fronted in config.platforms.relay.platforms
    }


def _build_relay(config: GatewayConfig, engine: Engine, store: Store) -> PlatformBuild:
    from chatgate.platforms.relay.adapter import RelayHub
    from chatgate.platforms.relay.connection import RelaySettings, dial_url

    cfg = config.platforms.relay
    assert cfg.url and cfg.gateway_id
    relay_secret = secret(os.environ, cfg.secret_env)
    if not relay_secret:
        raise ConfigError(f"platforms.relay.secret_env: environment variable {cfg.secret_env} is not set")
    settings = RelaySettings(
        url=cfg.url,
        gateway_id=cfg.gateway_id,
        secret=relay_secret,
        identities=tuple((p.platform.strip().lower(), p.bot_id) for p in cfg.platforms),
        outbound_timeout=cfg.outbound_timeout_seconds,
        handshake_timeout=cfg.handshake_timeout_seconds,
        reconnect_initial=cfg.reconnect_initial_seconds,
        reconnect_max=cfg.reconnect_max_seconds,
        going_idle_timeout=cfg.going_idle_timeout_seconds,
        token_ttl=cfg.token_ttl_seconds,
        # The connector keeps Discord's registered slash commands in step with what we answer.
        command_manifest=tuple({"name": c.name, "description": c.summary} for c in CONTROL_COMMANDS),
    )
    hub = RelayHub(
        settings,
        engine.intake,
        interrupt=engine.admission.interrupt,
        duplicate_marker=config.delivery.duplicate_marker,
        on_bad_frame=lambda reason: engine.metrics.refused.labels("relay", "rejected_frame").inc(),
    )
    # Keyed by the normalized dial target: http://h and ws://h/relay are the same relay identity.
    credential = Credential("relay", f"{dial_url(settings.url)}|{settings.gateway_id}", "relay gateway id")
    return PlatformBuild(adapters=list(hub.platforms.values()), credentials=[credential])


# ---------------------------------------------------------------- the OpenAI-compatible API


def _api_access(config: GatewayConfig) -> dict[str, PlatformAccess]:
    # The bearer key is the credential: the adapter submits only what a valid key sent.
    return {"api": PlatformAccess(allow_all=True)}


def _build_api(config: GatewayConfig, engine: Engine, store: Store) -> PlatformBuild:
    from chatgate.platforms.api.adapter import ApiAdapter, ApiSettings
    from chatgate.platforms.api.routes import api_routes

    cfg = config.platforms.api
    settings = ApiSettings(
        model=cfg.model,
        env_token=secret(os.environ, cfg.key_env) if cfg.key_storage == "env" else None,
        max_body_bytes=cfg.max_body_bytes,
        wait_seconds=cfg.wait_seconds,
        max_waiting=cfg.max_waiting,
    )
    adapter = ApiAdapter(store, engine.intake, settings)
    return PlatformBuild(adapters=[adapter], routes=api_routes(adapter))


REGISTRY: tuple[PlatformEntry, ...] = (
    PlatformEntry("web", lambda c: c.platforms.web.enabled, _web_access, _build_web),
    PlatformEntry("telegram", lambda c: c.platforms.telegram.enabled, _telegram_access, _build_telegram),
    PlatformEntry("slack", lambda c: c.platforms.slack.enabled, _slack_access, _build_slack),
    PlatformEntry("discord", lambda c: c.platforms.discord.enabled, _discord_access, _build_discord),
    PlatformEntry("relay", lambda c: c.platforms.relay.enabled, _relay_access, _build_relay),
    PlatformEntry("api", lambda c: c.platforms.api.enabled, _api_access, _build_api),
)


def enabled_entries(config: GatewayConfig) -> list[PlatformEntry]:
    return [entry for entry in REGISTRY if entry.enabled(config)]


def platform_access(config: GatewayConfig) -> dict[str, PlatformAccess]:
    rules: dict[str, PlatformAccess] = {}
    for entry in enabled_entries(config):
        rules.update(entry.access(config))
    return rules


def build_platforms(config: GatewayConfig, engine: Engine, store: Store) -> PlatformBuild:
    """Every enabled entry's adapters, credentials and web chat, in registry order."""
    built = PlatformBuild()
    for entry in enabled_entries(config):
        part = entry.build(config, engine, store)
        built.adapters.extend(part.adapters)
        built.credentials.extend(part.credentials)
        built.routes.extend(part.routes)
        built.preflight.extend(part.preflight)
        built.web_chat = built.web_chat or part.web_chat
    return built
