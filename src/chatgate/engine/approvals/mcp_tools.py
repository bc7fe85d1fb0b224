"""MCP tools with human approval in front of them: one runner per turn, like the shell's.

The policy of each tool (``agents.tools.mcp_settings.tool_policy``) decides: ``allow`` runs
at once, ``deny`` never runs (the model is told so), ``ask`` waits for a human's answer to a
prompt showing the server, the tool and the arguments. A "for this session" or "always"
answer is remembered per tool.
"""

from __future__ import annotations

import logging
from typing import Any

from chatgate.agents.base import ToolCall, ToolResult, ToolRunner
from chatgate.agents.tools.mcp_hub import McpHub
from chatgate.agents.tools.mcp_server import McpTool
from chatgate.agents.tools.mcp_settings import rule_key, shown_call
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.shell.danger import DangerRule
from chatgate.engine.approvals.broker import ApprovalBroker
from chatgate.engine.approvals.policy import ToolContext
from chatgate.engine.made_files import MadeFiles
from chatgate.engine.media_fetch import MediaFetcher

log = logging.getLogger(__name__)

MCP_TOOL = "mcp"
"""The approval records' ``tool`` for an MCP call (the prompt then says "call this MCP tool")."""


def approval_rule(tool: McpTool) -> DangerRule:
    """Why a human is asked, as the prompt and the grants know it (remembered per tool; a tool
    that says it is destructive at most for the session)."""
    annotations = tool.annotations or {}
    destructive = annotations.get("destructiveHint") is True
    if tool.by_operator:
        why = f"is set to ask in agent.mcp.servers.{tool.server}"
    elif destructive:
        why = "says it may destroy or overwrite things"
    elif annotations:
        why = "says it may change things (not read-only)"
    else:
        why = "says nothing about what it changes"
    description = f"calls {tool.name} on the MCP server {tool.server}, which {why}"
    return DangerRule(rule_key(tool.exposed), description, r"^mcp$", "session" if destructive else "always")


class McpTools:
    """Builds each turn's MCP runner over the hub's tools, with the broker in front."""

    def __init__(self, broker: ApprovalBroker, hub: McpHub, media: MediaFetcher | None = None) -> None:
        self.broker = broker
        self.hub = hub
        self.media = media
        """Where the images a tool returns are taken in (None: they are described, not sent)."""

    def for_turn(self, ctx: ToolContext) -> ToolRunner:
        images = MadeFiles(self.media, ctx.source.platform, ctx.session_key, ctx.files, "tool-file")
        return ApprovingMcpRunner(self.broker, self.hub, ctx, images)


class ApprovingMcpRunner:
    """A ``ToolRunner``: finds the tool, applies its policy (asking when it says so), calls it."""

    def __init__(self, broker: ApprovalBroker, hub: McpHub, ctx: ToolContext, images: MadeFiles) -> None:
        self._broker = broker
        self._hub = hub
        self._ctx = ctx
        self._images = images
        self._specs = tuple(t.spec() for t in hub.tools())
        """Fixed for the turn: a server restarting mid-turn does not change the offer."""

    def specs(self) -> tuple[dict[str, Any], ...]:
        return self._specs

    async def call(self, call: ToolCall) -> ToolResult:
        found = self._hub.find(call.name)
        if found is None:
            return ToolResult(call.call_id, f"not run: there is no MCP tool {call.name!r} now", "error")
        owner, tool = found
        extra = {"tool": tool.exposed, "call_id": call.call_id, "policy": tool.policy}
        if tool.policy == "deny":
            log.info("MCP tool call denied by policy", extra=extra)
            return ToolResult(
                call.call_id, f"not run: the operator's policy denies the MCP tool {tool.exposed!r}", "denied"
            )
        if tool.policy == "ask":
            shown = shown_call(tool.server, tool.name, call.arguments)
            try:
                decision = await self._broker.decide_rule(
                    self._ctx, call.call_id, MCP_TOOL, shown, approval_rule(tool)
                )
            except StoreUnavailable as exc:  # cannot ask, cannot record an answer: fail closed
                log.warning("approval check failed, not calling the MCP tool: %s", exc, extra=extra)
                return ToolResult(
                    call.call_id, f"not run: the approval check could not reach storage ({exc})", "denied"
                )
            if not decision.run:
                return ToolResult(call.call_id, decision.reason, "denied")
        outcome = await owner.call(tool.name, call.arguments)
        log.info("MCP tool called", extra={**extra, "ok": outcome.ok})
        sent = [await self._images.take(f.data, f.kind, f.name) for f in outcome.files]  # to the user
        text = "\n".join([outcome.text, *sent])
        return ToolResult(call.call_id, text, "ok" if outcome.ok else "error")
