"""The one log line a start leaves: what runs, where its state is, and each platform's state.

An operator reading a log after an incident needs to know which version ran on which
database with which agent and model, and which platforms were up, without the config.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

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
        more = f"; profiles default, {', '.join(config.agent.profiles)}" if config.agent.profiles else ""
        agent += f" (model {config.agent.openai.model} at {config.agent.openai.base_url}{more})"
    platforms = ", ".join(f"{name} ({_state(adapter)})" for name, adapter in sorted(adapters.items()))
    return (
        f"chatgate {__version__} started: state dir {state_dir}, store {config.store.backend}"
        f" {database}, agent {agent}, platforms {platforms or 'none'}"
    )


def _state(adapter: Adapter) -> str:
    state = adapter.state()
    word = "connected" if state.connected else "not connected yet"
    return f"{word}: {state.detail}" if state.detail else word


PROBE_SECONDS = 2.0
"""How long the start waits for the model endpoint to accept a connection before warning."""


async def model_endpoint_problem(config: GatewayConfig) -> str | None:
    """Why the model endpoint does not answer (None when it accepts a connection, or for an
    agent without one): an operator learns at the start, not from the first user's failed turn.
    Only a TCP connection is tried: no request is sent, so no key is spent and nothing is logged
    at the other end."""
    if config.agent.kind != "openai":
        return None
    url = urlsplit(config.agent.openai.base_url)
    if not url.hostname:
        return "the URL names no host"
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        async with asyncio.timeout(PROBE_SECONDS):
            _, writer = await asyncio.open_connection(url.hostname, port)
    except TimeoutError:
        return f"no connection within {PROBE_SECONDS:g} s"
    except OSError as exc:
        if exc.errno == errno.ECONNREFUSED:
            return "connection refused"
        return exc.strerror or type(exc).__name__
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


def endpoint_warning(config: GatewayConfig, problem: str) -> str:
    return (
        f"; WARNING: the model endpoint {config.agent.openai.base_url} does not answer ({problem}):"
        " turns will fail until it does"
    )
