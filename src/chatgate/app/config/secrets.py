"""Start-up checks of what pydantic cannot see: secrets that must exist now, rules across keys.

Each message names the key to fix and what to export; a secret's value is never echoed.
A platform's own rules are its plugin's (``Plugin.check``); these are the core's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import msgspec

from chatgate.app import registry
from chatgate.app.config.background import hook_secret_problem
from chatgate.app.config.model import ConfigError, GatewayConfig
from chatgate.app.netaddr import is_loopback
from chatgate.platforms.kit.plugin import CoreView


class _AnySecret(Mapping[str, str]):
    """An environment in which every variable is set: the checks of everything but presence."""

    def __getitem__(self, name: str) -> str:
        return "(not read here)"

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __contains__(self, name: object) -> bool:
        return True


ANY_SECRET: Mapping[str, str] = _AnySecret()
"""For the commands that read the state, not the platforms: they need no platform's secret."""


def core_view(config: GatewayConfig) -> CoreView:
    """What of the core config a platform's checks and access rules may read."""
    host = config.http.host
    return CoreView(
        http_host=host,
        http_loopback=is_loopback(host),
        send_timeout=config.delivery.send_timeout_seconds,
    )


def check_secrets(config: GatewayConfig, environ: Mapping[str, str]) -> None:
    """Every secret a config names must exist now, not at the first message."""
    if config.agent.kind == "openai" and not environ.get(config.agent.openai.api_key_env):
        raise ConfigError(
            f"agent.openai.api_key_env: environment variable {config.agent.openai.api_key_env}"
            " is not set; export it with your API key (the key never goes in the YAML file)"
        )
    for name, profile in config.agent.profiles.items():
        if not environ.get(profile.api_key_env):
            raise ConfigError(
                f"agent.profiles.{name}.api_key_env: environment variable {profile.api_key_env} is not"
                " set; export it with the profile's API key (any placeholder for a local server)"
            )
    check_platforms(config, environ)
    store = config.store
    if store.url is not None and store.password_env and not environ.get(store.password_env):
        raise ConfigError(
            f"store.password_env: environment variable {store.password_env} is not set; export it"
            " with the PostgreSQL password (or remove the key for trust or .pgpass authentication)"
        )
    if (problem := hook_secret_problem(config.hooks, environ)) is not None:
        raise ConfigError(problem)


def check_platforms(config: GatewayConfig, environ: Mapping[str, str]) -> None:
    """Each enabled platform's own checks, then: a platform name is served by one section only."""
    core = core_view(config)
    served: dict[str, str] = {}
    for name, section in config.platforms.enabled():
        plugin = registry.plugin(name)
        plugin.check(section, environ, core)
        for platform in plugin.platforms(section):
            if platform in served:
                raise ConfigError(
                    f"platforms.{name}: {platform} is already served natively here by"
                    f" platforms.{served[platform]}; a platform is either native or relayed"
                )
            served[platform] = name


def served_platforms(config: GatewayConfig) -> list[str]:
    """The platform names this config serves (``Source.platform`` of what it admits)."""
    return [
        platform
        for name, section in config.platforms.enabled()
        for platform in registry.plugin(name).platforms(section)
    ]


class Needed(msgspec.Struct, frozen=True):
    """A secret the config names: the key naming it, the variable, what it holds."""

    key: str
    env: str | None
    what: str


def needed_secrets(config: GatewayConfig) -> list[Needed]:
    """Every secret this config needs at start (``doctor`` and ``service install`` list the missing)."""
    found: list[Needed] = []
    if config.agent.kind == "openai":
        found.append(Needed("agent.openai.api_key_env", config.agent.openai.api_key_env, "the API key"))
    for name, profile in config.agent.profiles.items():
        found.append(
            Needed(f"agent.profiles.{name}.api_key_env", profile.api_key_env, "the profile's API key")
        )
    for name, section in config.platforms.enabled():
        for secret in registry.plugin(name).secrets(section):
            found.append(Needed(f"platforms.{name}.{secret.key}", secret.env, secret.what))
    if config.store.url is not None and config.store.password_env:
        found.append(Needed("store.password_env", config.store.password_env, "the PostgreSQL password"))
    if config.hooks.enabled:
        for name, route in config.hooks.routes.items():
            found.append(Needed(f"hooks.routes.{name}.secret_env", route.secret_env, "the webhook's secret"))
    return found


def missing_secrets(config: GatewayConfig, environ: Mapping[str, str]) -> list[Needed]:
    """The needed secrets whose variable is unnamed or empty in ``environ``."""
    return [need for need in needed_secrets(config) if not need.env or not environ.get(need.env)]
