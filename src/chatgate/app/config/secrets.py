"""Start-up checks that every secret a config names exists now, not at the first message.

Each message names the key to fix and what to export; a secret's value is never echoed.
"""

from __future__ import annotations

from typing import Any

from chatgate.app.config.background import hook_secret_problem
from chatgate.app.config.model import ConfigError, GatewayConfig
from chatgate.app.netaddr import is_loopback


def check_secrets(config: GatewayConfig, environ: Any) -> None:
    """Every secret a config names must exist now, not at the first message."""
    if config.agent.kind == "openai" and not environ.get(config.agent.openai.api_key_env):
        raise ConfigError(
            f"agent.openai.api_key_env: environment variable {config.agent.openai.api_key_env}"
            " is not set; export it with your API key (the key never goes in the YAML file)"
        )
    web = config.platforms.web
    if web.access_token_env and not environ.get(web.access_token_env):
        raise ConfigError(
            f"platforms.web.access_token_env: environment variable {web.access_token_env} is not set"
        )
    telegram = config.platforms.telegram
    _check_bot_token("telegram", telegram.enabled, telegram.token_env, environ, "the token from @BotFather")
    check_slack(config, environ)
    discord = config.platforms.discord
    _check_bot_token(
        "discord",
        discord.enabled,
        discord.token_env,
        environ,
        "the bot token from the Discord developer portal",
    )
    check_relay(config, environ)
    api = config.platforms.api
    if api.enabled and api.key_storage == "env" and not (api.key_env and environ.get(api.key_env)):
        raise ConfigError(
            f"platforms.api.key_env: with key_storage: env, name an environment variable that holds the"
            f" API key and export it ({api.key_env or 'unset'} is not set); or use key_storage: store"
            " and `chatgate api-key create`"
        )
    store = config.store
    if store.url is not None and store.password_env and not environ.get(store.password_env):
        raise ConfigError(
            f"store.password_env: environment variable {store.password_env} is not set; export it"
            " with the PostgreSQL password (or remove the key for trust or .pgpass authentication)"
        )
    if (problem := hook_secret_problem(config.hooks, environ)) is not None:
        raise ConfigError(problem)
    check_web_auth(config)


def check_web_auth(config: GatewayConfig) -> None:
    """Beyond loopback the web chat needs a sign-in: anyone could claim any user id."""
    web = config.platforms.web
    mode = web.auth_mode()
    if mode == "token" and not web.access_token_env:
        raise ConfigError(
            "platforms.web.auth: token needs platforms.web.access_token_env (the variable that holds"
            " the shared token); or use auth: accounts"
        )
    if mode == "accounts" and web.access_token_env:
        raise ConfigError(
            "platforms.web.access_token_env: with platforms.web.auth: accounts people sign in with"
            " their own tokens (chatgate user add); remove access_token_env"
        )
    if web.enabled and mode == "none" and not is_loopback(config.http.host):
        raise ConfigError(
            f"platforms.web.auth: the web chat is bound to {config.http.host}, which is not loopback,"
            " and asks nobody to sign in; set platforms.web.auth: accounts (then chatgate user add NAME),"
            " or a shared token in platforms.web.access_token_env, or bind http.host to 127.0.0.1"
        )


def _check_bot_token(platform: str, enabled: bool, token_env: str | None, environ: Any, what: str) -> None:
    if enabled and not token_env:
        raise ConfigError(
            f"platforms.{platform}.token_env: required when platforms.{platform}.enabled is true; name the"
            " environment variable that holds the bot token (the token never goes in the YAML file)"
        )
    if enabled and token_env and not environ.get(token_env):
        raise ConfigError(
            f"platforms.{platform}.token_env: environment variable {token_env} is not set;"
            f" export it with {what}"
        )


def check_slack(config: GatewayConfig, environ: Any) -> None:
    """Socket Mode needs the bot and app tokens, HTTP mode the bot token and signing secret."""
    slack = config.platforms.slack
    if not slack.enabled:
        return
    needed = {
        "bot_token_env": "the bot token (xoxb-, OAuth & Permissions)",
        **(
            {"app_token_env": "the app-level token (xapp-, Basic Information, scope connections:write)"}
            if slack.mode == "socket"
            else {"signing_secret_env": "the signing secret (Basic Information)"}
        ),
    }
    for key, what in needed.items():
        name = getattr(slack, key)
        if not name:
            raise ConfigError(
                f"platforms.slack.{key}: required with mode {slack.mode}; name the environment variable"
                f" that holds {what} (secrets never go in the YAML file)"
            )
        if not environ.get(name):
            raise ConfigError(
                f"platforms.slack.{key}: environment variable {name} is not set; export it with {what}"
            )


def check_relay(config: GatewayConfig, environ: Any) -> None:
    relay = config.platforms.relay
    if not relay.enabled:
        return
    for key in ("url", "gateway_id", "secret_env"):
        if not getattr(relay, key):
            raise ConfigError(f"platforms.relay.{key}: required when platforms.relay.enabled is true")
    assert relay.gateway_id is not None and relay.url is not None
    if ":" in relay.gateway_id:
        raise ConfigError("platforms.relay.gateway_id: must not contain ':' (it is part of the signed token)")
    if not relay.url.startswith(("ws://", "wss://", "http://", "https://")):
        raise ConfigError("platforms.relay.url: must start with ws://, wss://, http:// or https://")
    if not environ.get(relay.secret_env):
        raise ConfigError(
            f"platforms.relay.secret_env: environment variable {relay.secret_env} is not set; export it"
            " with the secret the connector issued when you enrolled this gateway"
        )
    names = [p.platform.strip().lower() for p in relay.platforms]
    if not names:
        raise ConfigError("platforms.relay.platforms: name at least one fronted platform (e.g. discord)")
    for index, name in enumerate(names):
        where = f"platforms.relay.platforms.{index}.platform"
        if not name or names.index(name) != index:
            raise ConfigError(f"{where}: {name or '(empty)'} is empty or listed twice")
        if not relay.platforms[index].bot_id.strip():
            raise ConfigError(
                f"platforms.relay.platforms.{index}.bot_id: required; the bot id the connector knows this"
                " platform's bot by (it validates every hello against platform:botId)"
            )
        native = {
            "telegram": config.platforms.telegram.enabled,
            "slack": config.platforms.slack.enabled,
            "discord": config.platforms.discord.enabled,
        }
        if name == "web" or native.get(name, False):
            raise ConfigError(
                f"{where}: {name} is already served natively here; a platform is either native or relayed"
            )
