"""Every configured MCP server, started together and closed together.

The engine asks the hub for the tools to offer (``tools``) and where a call goes (``find``);
whether a call runs is the approval runner's decision (``engine.approvals.mcp_tools``).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Sequence
from typing import Any

from chatgate.agents.tools.mcp_server import McpServerOwner, McpTool
from chatgate.agents.tools.mcp_settings import McpServerSettings

log = logging.getLogger(__name__)

SDK_MODULES = ("mcp", "mcp.types", "mcp.client.stdio", "mcp.client.streamable_http", "httpx2")


def import_sdk() -> None:
    """Import the SDK's modules the owners use (in a thread: they take seconds of CPU)."""
    for name in SDK_MODULES:
        importlib.import_module(name)


class McpHub:
    """The owners of the configured servers (each owns its task and process)."""

    def __init__(self, servers: Sequence[McpServerSettings]) -> None:
        self.owners = {s.name: McpServerOwner(s) for s in servers}

    async def start(self) -> None:
        """Start every server at once; wait (each bounded by its connect timeout) for the listings.

        A server not reached is logged and retried in the background: the gateway starts
        without its tools rather than not at all."""
        if self.owners:
            await asyncio.to_thread(import_sdk)  # ~0.5 s of CPU in imports, off the event loop
        reached = await asyncio.gather(*(o.start() for o in self.owners.values()))
        for owner, ok in zip(self.owners.values(), reached, strict=True):
            if ok:
                self._warn_unknown(owner)

    async def close(self) -> None:
        await asyncio.gather(*(o.close() for o in self.owners.values()))

    def status(self) -> dict[str, dict[str, Any]]:
        return {name: owner.status() for name, owner in self.owners.items()}

    def tools(self) -> tuple[McpTool, ...]:
        """The tools offered now, every server's, in config order; denied ones are not offered."""
        return tuple(t for o in self.owners.values() for t in o.tools() if t.policy != "deny")

    def find(self, exposed: str) -> tuple[McpServerOwner, McpTool] | None:
        """The owner and tool an exposed name stands for, whatever its policy."""
        for owner in self.owners.values():
            for tool in owner.tools():
                if tool.exposed == exposed:
                    return owner, tool
        return None

    def _warn_unknown(self, owner: McpServerOwner) -> None:
        listed = {t.name for t in owner.tools()}
        for name in owner.settings.tools:
            if name not in listed:
                log.warning(
                    "agent.mcp.servers.%s.tools.%s: the server lists no such tool (it has: %s)",
                    owner.name,
                    name,
                    ", ".join(sorted(listed)) or "none",
                )
