"""What a gateway is built from: its agent and its store, and the errors a start can end in."""

from __future__ import annotations

import os
from pathlib import Path

from chatgate.agents.base import Agent
from chatgate.agents.deferred import DeferredAgent
from chatgate.agents.echo import EchoAgent
from chatgate.agents.profiled import ProfiledAgent
from chatgate.app.config import GatewayConfig
from chatgate.app.config.model import OpenAIConfig
from chatgate.domain.errors import AddressInUse as AddressInUse
from chatgate.domain.errors import CredentialInUse as CredentialInUse
from chatgate.domain.errors import StartupError as StartupError
from chatgate.domain.profiles import DEFAULT_PROFILE
from chatgate.engine.metrics import GatewayMetrics
from chatgate.store.base import Store
from chatgate.store.sqlite import SqliteStore


def build_agent(config: GatewayConfig) -> Agent:
    if config.agent.kind == "openai":
        named = {DEFAULT_PROFILE: config.agent.openai, **config.agent.profiles}
        keys = {name: _api_key(name, profile) for name, profile in named.items()}

        def build() -> Agent:  # imports the agent and its client: in a thread, after start
            from chatgate.agents.openai_agent import OpenAIAgent  # in a thread, after start

            agents: dict[str, Agent] = {
                name: OpenAIAgent(
                    base_url=oa.base_url,
                    model=oa.model,
                    api_key=keys[name],
                    temperature=oa.temperature,
                    max_tokens=oa.max_tokens,
                    timeout_s=oa.timeout_seconds,
                    vision=oa.vision,
                    stream_usage=oa.stream_usage,
                    image_output=oa.image_output,
                )
                for name, oa in named.items()
            }
            return agents[DEFAULT_PROFILE] if len(agents) == 1 else ProfiledAgent(agents)

        return DeferredAgent("openai", build)
    return EchoAgent(
        chunk_delay_ms=config.agent.echo.chunk_delay_ms, chunk_chars=config.agent.echo.chunk_chars
    )


def _api_key(name: str, profile: OpenAIConfig) -> str:
    api_key = os.environ.get(profile.api_key_env, "")
    if not api_key:
        where = "agent.openai" if name == DEFAULT_PROFILE else f"agent.profiles.{name}"
        raise StartupError(
            f"{where}.api_key_env: environment variable {profile.api_key_env} is not set;"
            " export it (any placeholder for a local server)"
        )
    return api_key


def build_store(config: GatewayConfig, state_dir: Path, metrics: GatewayMetrics) -> Store:
    if config.store.backend == "postgres":
        return build_postgres_store(config)
    sq = config.store.sqlite
    return SqliteStore(
        Path(sq.path) if sq.path else state_dir / "chatgate.db",
        synchronous=sq.synchronous,
        group_commit=sq.group_commit,
        on_commit=metrics.observe_commit,
    )


def build_postgres_store(config: GatewayConfig) -> Store:
    """The fleet's shared store; asyncpg (the ``postgres`` extra) is imported only here."""
    from chatgate.store.postgres import PostgresStore  # asyncpg: only for a PostgreSQL config

    store, pg = config.store, config.store.postgres
    assert store.url is not None  # the config refuses backend postgres without a url
    password = os.environ.get(store.password_env) if store.password_env else None
    return PostgresStore(
        store.url,
        schema=pg.schema_,
        password=password,
        pool_size=pg.pool_size,
        outbox_lease_seconds=pg.outbox_lease_seconds,
        connect_timeout=pg.connect_timeout_seconds,
    )
