"""Optional installs: which pip extra a configured feature needs, checked when the config loads.

``pip install chatgate`` brings what the defaults run on (the web chat and the echo agent);
platforms, the OpenAI agent and PostgreSQL are extras. A config that enables one without
its package is refused at start-up (and by ``chatgate config check`` and ``chatgate init``)
with the command to run, rather than failing with an ImportError at the first message. A
platform names its extra in its plugin; the core's are here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatgate.app import registry
from chatgate.platforms.kit.plugin import Extra

if TYPE_CHECKING:
    from chatgate.app.config.model import GatewayConfig

OPENAI = Extra("openai", ("aiohttp",))
"""The OpenAI-compatible agent and transcription speak HTTP on aiohttp (``agents/model_http.py``)."""
POSTGRES = Extra("postgres", ("asyncpg",))
MCP = Extra("mcp", ("mcp",))


def check_extras(config: GatewayConfig) -> str | None:
    """The first enabled feature whose extra is not installed, as the error to show; else None."""
    for name, _section in config.platforms.enabled():
        plugin = registry.plugin(name)
        if plugin.extra is not None and plugin.extra.missing():
            return f"platforms.{name}.enabled: " + plugin.extra.hint(plugin.title)
    if config.agent.kind == "openai" and OPENAI.missing():
        return "agent.kind: " + OPENAI.hint("the openai agent")
    if config.media.voice.transcription == "openai" and OPENAI.missing():
        return "media.voice.transcription: " + OPENAI.hint("the openai transcription")
    if config.agent.mcp.servers and MCP.missing():
        return "agent.mcp.servers: " + MCP.hint("MCP tools")
    if config.store.backend == "postgres" and POSTGRES.missing():
        return "store.url: " + POSTGRES.hint("the PostgreSQL store")
    return None
