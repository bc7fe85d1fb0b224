"""The one log line a start leaves: what runs, where its state is, and each platform's state.

An operator reading a log after an incident needs to know which version ran on which
database with which agent and model, and which platforms were up, without the config.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from chatgate import __version__
from chatgate.app.config import GatewayConfig
from chatgate.engine.ports import Adapter


def startup_line(config: GatewayConfig, state_dir: Path, adapters: Mapping[str, Adapter]) -> str:
    sqlite = config.store.sqlite
    database: object = Path(sqlite.path) if sqlite.path else state_dir / "chatgate.db"
    if config.store.url is not None:
        database = f"{config.store.url} (schema {config.store.postgres.schema_})"
    agent: str = config.agent.kind
    if agent == "openai":
        agent += f" (model {config.agent.openai.model} at {config.agent.openai.base_url})"
    platforms = ", ".join(f"{name} ({_state(adapter)})" for name, adapter in sorted(adapters.items()))
    return (
        f"chatgate {__version__} started: state dir {state_dir}, store {config.store.backend}"
        f" {database}, agent {agent}, platforms {platforms or 'none'}"
    )


def _state(adapter: Adapter) -> str:
    state = adapter.state()
    word = "connected" if state.connected else "not connected yet"
    return f"{word}: {state.detail}" if state.detail else word
