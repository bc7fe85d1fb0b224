"""The configured platforms, asked through their plugins: who may talk, and their adapters.

The composition root (``app/gateway.py``) names no platform: it asks each enabled section's
plugin (``app/registry.py``) who may talk on its platforms (before the engine is built:
admission's allowlists) and then to build its adapters over the engine's ports.
"""

from __future__ import annotations

import os

from chatgate.app import registry
from chatgate.app.config import GatewayConfig
from chatgate.app.config.secrets import core_view
from chatgate.domain.access import PlatformAccess
from chatgate.engine.pipeline import Engine
from chatgate.engine.ports import PlatformContext, PlatformStores
from chatgate.platforms.kit.plugin import PlatformBuild


def platform_access(config: GatewayConfig) -> dict[str, PlatformAccess]:
    core = core_view(config)
    rules: dict[str, PlatformAccess] = {}
    for name, section in config.platforms.enabled():
        rules.update(registry.plugin(name).access(section, core))
    return rules


def platform_context(config: GatewayConfig, engine: Engine, store: PlatformStores) -> PlatformContext:
    refused = engine.metrics.refused
    return PlatformContext(
        intake=engine.intake,
        store=store,
        interrupt=engine.admission.interrupt,
        count_refused=lambda platform, code: refused.labels(platform, code).inc(),
        environ=os.environ,
        duplicate_marker=config.delivery.duplicate_marker,
        http_loopback=core_view(config).http_loopback,
        auth_timeout=config.http.auth_timeout_seconds,
        profiles=config.agent.model_profiles(),
        media=engine.media,
        session_key_of=engine.admission.key_for_source,
    )


def build_platforms(config: GatewayConfig, engine: Engine, store: PlatformStores) -> PlatformBuild:
    """Every enabled section's adapters, credentials and routes, in registry order."""
    ctx = platform_context(config, engine, store)
    built = PlatformBuild()
    for name, section in config.platforms.enabled():
        built.extend(registry.plugin(name).build(section, ctx))
    return built
