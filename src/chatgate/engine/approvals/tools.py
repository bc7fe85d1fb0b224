"""The shell tool with human approval in front of it: one runner per turn.

Validation and execution are ``agents.tools.runner``'s; between the two the broker
decides whether the command runs now, after a human approved it, or not at all.
"""

from __future__ import annotations

import logging
from typing import Any

from chatgate.agents.base import ToolCall, ToolResult, ToolRunner
from chatgate.agents.tools.runner import ShellToolRunner, checked_command
from chatgate.domain.errors import StoreUnavailable
from chatgate.engine.approvals.broker import ApprovalBroker
from chatgate.engine.approvals.policy import ToolContext

log = logging.getLogger(__name__)


class ShellTools:
    """Builds each turn's tool runner (``TurnRunner(tools=ShellTools(...).for_turn)``)."""

    def __init__(self, broker: ApprovalBroker, shell: ShellToolRunner) -> None:
        self.broker = broker
        self.shell = shell

    def for_turn(self, ctx: ToolContext) -> ToolRunner:
        return ApprovingShellRunner(self.broker, self.shell, ctx)


class ApprovingShellRunner:
    """A ``ToolRunner``: validates a call, asks the broker, runs it or says why not."""

    def __init__(self, broker: ApprovalBroker, shell: ShellToolRunner, ctx: ToolContext) -> None:
        self._broker = broker
        self._shell = shell
        self._ctx = ctx

    def specs(self) -> tuple[dict[str, Any], ...]:
        return self._shell.specs()

    async def call(self, call: ToolCall) -> ToolResult:
        command = checked_command(call)
        if isinstance(command, ToolResult):
            return command
        try:
            decision = await self._broker.decide(self._ctx, call.call_id, command, self._shell.workdir)
        except StoreUnavailable as exc:  # cannot ask, cannot record an answer: fail closed
            log.warning("approval check failed, not running the command: %s", exc)
            return ToolResult(
                call.call_id, f"not run: the approval check could not reach storage ({exc})", "denied"
            )
        if not decision.run:
            return ToolResult(call.call_id, decision.reason, "denied")
        return await self._shell.execute(command, call.call_id)
