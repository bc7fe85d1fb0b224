"""The platform registry: a ``platforms:`` section name -> its plugin's import path.

The only module outside ``platforms/`` that names a platform. A plugin is imported the
first time its section is configured or asked for, so a start-up imports only the
platforms its config uses. Adding a platform is its folder, one line here, its pip
extra and its doc page.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any

from chatgate.domain.errors import ConfigError
from chatgate.platforms.kit.plugin import Plugin

PLUGINS: dict[str, str] = {
    "web": "chatgate.platforms.webchat.plugin:PLUGIN",
    "telegram": "chatgate.platforms.telegram.plugin:PLUGIN",
    "slack": "chatgate.platforms.slack.plugin:PLUGIN",
    "discord": "chatgate.platforms.discord.plugin:PLUGIN",
    "relay": "chatgate.platforms.relay.plugin:PLUGIN",
    "api": "chatgate.platforms.api.plugin:PLUGIN",
}
"""Registration order is start order, and the order ``chatgate init`` offers them in."""

ON_BY_DEFAULT: tuple[str, ...] = ("web",)
"""Sections that exist (with their defaults) even when the config does not name them."""

_loaded: dict[str, Plugin[Any]] = {}


def names() -> list[str]:
    return list(PLUGINS)


def plugin(name: str) -> Plugin[Any]:
    """The plugin of section ``name``, imported on first use; ``ConfigError`` for an unknown name."""
    found = _loaded.get(name)
    if found is not None:
        return found
    path = PLUGINS.get(name)
    if path is None:
        raise ConfigError(f"platforms.{name}: {unknown(name)}")
    module, _, attr = path.partition(":")
    loaded = getattr(importlib.import_module(module), attr)
    if not isinstance(loaded, Plugin) or loaded.name != name:
        raise ConfigError(f"platforms.{name}: {path} is not the plugin of {name!r}")
    _loaded[name] = loaded
    return loaded


def unknown(name: str) -> str:
    """Why ``name`` is not a platform, with the nearest one."""
    close = difflib.get_close_matches(name, names(), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown platform {name!r}; {hint}the platforms are {', '.join(names())}"
