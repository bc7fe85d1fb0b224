"""Optional installs: which pip extra a configured feature needs, checked when the config loads.

``pip install chatgate`` brings what the defaults run on (the web chat and the echo agent);
Telegram, Slack and the OpenAI agent are extras. A config that enables one without its package
is refused at start-up (and by ``chatgate config check`` and ``chatgate init``) with the
command to run, rather than failing with an ImportError at the first message. The
package each extra provides is named here, in one place.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chatgate.app.config.model import GatewayConfig

EXTRA_MODULES: dict[str, str] = {
    "telegram": "aiohttp",
    "openai": "openai",
    "schedules": "cronsim",
    "slack": "slack_bolt",
    "discord": "discord",
    "postgres": "asyncpg",
}
"""extra name -> the top-level module it installs."""


def missing(extra: str) -> bool:
    return importlib.util.find_spec(EXTRA_MODULES[extra]) is None


def install_hint(extra: str, what: str) -> str:
    module = EXTRA_MODULES[extra]
    return f"{what} needs `pip install 'chatgate[{extra}]'` (the {module} package is not installed)"


def check_extras(config: GatewayConfig) -> str | None:
    """The first enabled feature whose extra is not installed, as the error to show; else None."""
    if config.platforms.telegram.enabled and missing("telegram"):
        return "platforms.telegram.enabled: " + install_hint("telegram", "Telegram")
    if config.platforms.slack.enabled and (missing("slack") or missing("telegram")):
        return "platforms.slack.enabled: " + install_hint("slack", "Slack")
    if config.platforms.discord.enabled and missing("discord"):
        return "platforms.discord.enabled: " + install_hint("discord", "Discord")
    if config.agent.kind == "openai" and missing("openai"):
        return "agent.kind: " + install_hint("openai", "the openai agent")
    if config.store.backend == "postgres" and missing("postgres"):
        return "store.url: " + install_hint("postgres", "the PostgreSQL store")
    return None
