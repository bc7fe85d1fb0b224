"""``agent.mcp``: the MCP servers whose tools the agent is offered (docs/agents.md, "MCP tools").

Checked when the config loads, so a mistake names its key before anything starts; the
values of ``env_from`` and ``headers_env`` variables are read at start (``mcp_servers``).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import Annotated, Literal
from urllib.parse import urlsplit

import msgspec

from chatgate.agents.tools.mcp_settings import SERVER_NAME, McpServerSettings
from chatgate.domain.errors import StartupError
from chatgate.platforms.kit.section import Check, EnvName, Section

PolicyName = Literal["ask", "allow", "deny"]


def _command(value: str) -> str:
    if not value.strip():
        raise ValueError("command is empty")
    return value


def _url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{value!r} is not an http:// or https:// URL")
    return value


def _server_names(value: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
    for name in value:
        if not SERVER_NAME.fullmatch(name):
            raise ValueError(
                f"{name[:40]!r} is not a usable server name: a letter, then letters, digits, _ or -"
                " (at most 32; it prefixes the tool names the model sees)"
            )
    return value


class McpServerConfig(Section, kw_only=True):
    """``agent.mcp.servers.<name>``: ``command`` (a stdio server) or ``url`` (streamable HTTP)."""

    command: Annotated[str, Check(_command)] | None = None
    """The program that runs the server (found on PATH), spoken to over its stdin and stdout."""
    args: list[str] = []
    env: dict[str, str] = {}
    """Variables set for the server process (plain values; never secrets: see ``env_from``)."""
    env_from: dict[str, EnvName] = {}
    """Variables for the server process taken from the gateway's: ``SERVER_VAR: GATEWAY_VAR``."""
    cwd: str | None = None
    url: Annotated[str, Check(_url)] | None = None
    """An MCP streamable HTTP endpoint (``http://`` or ``https://``)."""
    headers_env: dict[str, EnvName] = {}
    """HTTP headers whose values are read from the gateway's variables: ``Authorization: MY_TOKEN_VAR``."""
    policy: PolicyName | None = None
    """Every tool of this server: ``ask``, ``allow`` or ``deny``; unset: each tool's own tier
    (read-only → allow; destructive or not said → ask)."""
    tools: dict[str, PolicyName] = {}
    """Per tool, by the server's own name for it, over ``policy``."""
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 60.0
    """A call not answered within this long fails; the model is told so."""
    connect_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=600)] = 30.0
    """Starting or reaching the server and listing its tools, at start and at each restart."""
    output_cap: Annotated[int, msgspec.Meta(ge=256, le=10_000_000)] = 16_000
    """Bytes of a call's result the model reads; the rest is cut with a note saying how much."""

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError("set either command (a stdio server) or url (streamable HTTP), not both")
        if self.url is not None and (self.args or self.env or self.env_from or self.cwd):
            raise ValueError("args, env, env_from and cwd are for a stdio server (command), not a url")
        if self.command is not None and self.headers_env:
            raise ValueError("headers_env is for an HTTP server (url), not a command")


class McpConfig(Section, kw_only=True):
    servers: Annotated[dict[str, McpServerConfig], Check(_server_names)] = {}
    """By name; a server's name prefixes its tools' names (``time`` → ``time__get_current_time``)."""


def mcp_servers(config: McpConfig, environ: Mapping[str, str]) -> list[McpServerSettings]:
    """The servers' settings, with their variables read now; a missing one is a start error."""

    def read(key: str, var: str) -> str:
        if var not in environ:
            raise StartupError(f"{key}: the environment variable {var} is not set")
        return environ[var]

    servers = []
    for name, s in config.servers.items():
        base = f"agent.mcp.servers.{name}"
        env = dict(s.env) | {k: read(f"{base}.env_from.{k}", v) for k, v in s.env_from.items()}
        if (
            s.command is not None
            and shutil.which(s.command, path=env.get("PATH", environ.get("PATH"))) is None
        ):
            raise StartupError(f"{base}.command: {s.command!r} is not a program found on PATH")
        headers = {h: read(f"{base}.headers_env.{h}", v) for h, v in s.headers_env.items()}
        servers.append(
            McpServerSettings(
                name=name,
                command=s.command,
                args=tuple(s.args),
                env=env,
                cwd=s.cwd,
                url=s.url,
                headers=headers,
                policy=s.policy,
                tools=dict(s.tools),
                timeout_s=s.timeout_seconds,
                connect_timeout_s=s.connect_timeout_seconds,
                output_cap=s.output_cap,
            )
        )
    return servers
