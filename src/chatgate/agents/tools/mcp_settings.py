"""What an MCP server is (how to reach it, what its tools may do) and the pure rules over it.

No SDK here: the config, the owner (``mcp_server``) and the approval runner all read these.
A tool's policy is the operator's (per tool, then per server) or else its tier from the
tool's own MCP annotations: ``readOnlyHint`` → ``allow``; ``destructiveHint`` or nothing
known → ``ask`` (fail closed: a tool that says nothing about itself is treated as dangerous).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

Policy = Literal["ask", "allow", "deny"]
POLICIES: tuple[Policy, ...] = ("ask", "allow", "deny")

SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
"""A server's name prefixes its tools' names, so it must be valid in an OpenAI function name."""

_FUNCTION_NAME_MAX = 64
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")


class McpServerSettings(msgspec.Struct, frozen=True):
    """One configured server: ``command`` (stdio) or ``url`` (streamable HTTP), not both."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = msgspec.field(default_factory=dict)
    """The server process's environment on top of the SDK's safe defaults (PATH, HOME...)."""
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)
    """HTTP headers (their values were read from environment variables at start)."""
    policy: Policy | None = None
    """Every tool of this server, unless ``tools`` names it; None: each tool's own tier."""
    tools: Mapping[str, Policy] = msgspec.field(default_factory=dict)
    """Per tool (by the server's own name for it), over ``policy``."""
    timeout_s: float = 60.0
    """A call not answered within this long fails (the model is told so)."""
    connect_timeout_s: float = 30.0
    """Starting (or reaching) the server and listing its tools."""
    output_cap: int = 16_000
    """Bytes of a result the model reads; the rest is cut with a note saying how much."""
    restart_backoff_s: tuple[float, float] = (0.5, 30.0)
    """First and longest wait between restarts of a server that failed."""
    ping_interval_s: float = 15.0
    """How often an idle connection is pinged, so a server that died between calls is restarted
    before the next call needs it."""

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"


def annotation_tier(annotations: Mapping[str, Any] | None) -> Policy:
    """The default policy from a tool's MCP annotations: read-only runs, everything else asks."""
    if not annotations:
        return "ask"
    if annotations.get("readOnlyHint") is True and annotations.get("destructiveHint") is not True:
        return "allow"
    return "ask"


def tool_policy(settings: McpServerSettings, tool: str, annotations: Mapping[str, Any] | None) -> Policy:
    """The operator's word for this tool, else for its server, else the annotations' tier."""
    if tool in settings.tools:
        return settings.tools[tool]
    if settings.policy is not None:
        return settings.policy
    return annotation_tier(annotations)


def function_name(server: str, tool: str) -> str:
    """``<server>__<tool>`` as an OpenAI function name (``^[a-zA-Z0-9_-]{1,64}$``).

    Characters outside that set become ``_``; a name too long keeps its start and ends with a
    short hash of the original, so two long names never collide by truncation."""
    name = _NOT_ALLOWED.sub("_", f"{server}__{tool}")
    if len(name) <= _FUNCTION_NAME_MAX and name == f"{server}__{tool}":
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{name[: _FUNCTION_NAME_MAX - 9]}_{digest}"


def rule_key(exposed: str) -> str:
    """The approval rule key of a tool (``[a-z][a-z0-9_]*``, at most 64): remembered grants
    ("for this session") are kept by it."""
    cleaned = re.sub(r"[^a-z0-9_]", "_", exposed.lower())
    key = f"mcp_{cleaned}"
    if len(key) <= 64 and cleaned == exposed:
        return key
    return f"mcp_{cleaned[:50]}_{hashlib.sha256(exposed.encode()).hexdigest()[:8]}"


def bounded(text: str, cap: int) -> str:
    """At most ``cap`` bytes of ``text`` (UTF-8, never a split character) and a note of the rest."""
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text
    kept = data[:cap].decode("utf-8", errors="ignore")
    return f"{kept}\n[output truncated: {len(data) - cap} more bytes of {len(data)} not shown]"


def shown_call(server: str, tool: str, arguments: Mapping[str, Any]) -> str:
    """What an approval prompt shows of a call: server, tool and its arguments as JSON."""
    args = json.dumps(dict(arguments), ensure_ascii=False, sort_keys=True)
    return f"MCP server: {server}\nTool: {tool}\nArguments: {args}"
