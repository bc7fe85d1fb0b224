"""The shell tool with human approval in front of it: one runner per turn.

Validation and execution are ``agents.tools.runner``'s; between the two the broker
decides whether the command runs now, after a human approved it, or not at all.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
from pathlib import Path
from typing import Any, Protocol

import msgspec

from chatgate.agents.base import ToolCall, ToolResult, ToolRunner
from chatgate.agents.tools.attach import (
    ATTACH_TOOL_NAME,
    ATTACH_TOOL_SCHEMA,
    AttachRefused,
    attach_request,
    read_file_async,
)
from chatgate.agents.tools.runner import ShellToolRunner, ToolArgumentError, checked_command
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.media import human_size
from chatgate.domain.outfiles import OutFile
from chatgate.engine.approvals.broker import ApprovalBroker
from chatgate.engine.approvals.policy import ToolContext

log = logging.getLogger(__name__)


class BlobSink(Protocol):
    """What ``attach_file`` needs of the media role: a finished file taken into the blob store."""

    async def put_blob(self, sha: str, path: str) -> None: ...


class AttachSettings(msgspec.Struct, frozen=True):
    """``attach_file``: where its copies stream before the blob store takes them, and its limit."""

    blobs: BlobSink
    scratch: Path
    max_bytes: int


class ShellTools:
    """Builds each turn's tool runner (``TurnRunner(tools=ShellTools(...).for_turn)``)."""

    def __init__(
        self, broker: ApprovalBroker, shell: ShellToolRunner, attach: AttachSettings | None = None
    ) -> None:
        self.broker = broker
        self.shell = shell
        self.attach = attach

    def for_turn(self, ctx: ToolContext) -> ToolRunner:
        return ApprovingShellRunner(self.broker, self.shell, ctx, self.attach)


class ApprovingShellRunner:
    """A ``ToolRunner``: validates a call, asks the broker, runs it or says why not."""

    def __init__(
        self,
        broker: ApprovalBroker,
        shell: ShellToolRunner,
        ctx: ToolContext,
        attach: AttachSettings | None = None,
    ) -> None:
        self._broker = broker
        self._shell = shell
        self._ctx = ctx
        self._attach = attach

    def specs(self) -> tuple[dict[str, Any], ...]:
        return self._shell.specs() + ((ATTACH_TOOL_SCHEMA,) if self._attach is not None else ())

    async def call(self, call: ToolCall) -> ToolResult:
        if call.name == ATTACH_TOOL_NAME and self._attach is not None:
            return await self._attach_file(call, self._attach)
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

    async def _attach_file(self, call: ToolCall, settings: AttachSettings) -> ToolResult:
        """Read a work-directory file into the blob store and add it to this turn's reply.

        It is approved as ``cat -- <path>`` would be: sending a file shows what reading it shows,
        so the rules that guard reading (secrets, dotfiles...) guard attaching the same way.
        """
        try:
            request = attach_request(call)
        except ToolArgumentError as exc:
            return ToolResult(call.call_id, f"not attached: {exc}", "error")
        command = f"cat -- {shlex.quote(request.path)}"
        workdir = self._shell.workdir
        try:
            decision = await self._broker.decide(self._ctx, call.call_id, command, workdir, ATTACH_TOOL_NAME)
        except StoreUnavailable as exc:
            return ToolResult(call.call_id, f"not attached: the approval check failed ({exc})", "denied")
        if not decision.run:
            return ToolResult(call.call_id, decision.reason, "denied")
        try:
            read = await read_file_async(workdir, request.path, settings.max_bytes, settings.scratch)
        except AttachRefused as exc:
            return ToolResult(call.call_id, f"not attached: {exc}", "error")
        try:
            await settings.blobs.put_blob(read.sha, read.scratch)
        except StoreUnavailable as exc:
            await asyncio.to_thread(Path(read.scratch).unlink, missing_ok=True)
            return ToolResult(call.call_id, f"not attached: storage is unavailable ({exc})", "error")
        self._ctx.files.append(OutFile(read.sha, read.name, read.mime, read.size, request.caption))
        log.info("the agent attached a file", extra={"session_key": self._ctx.session_key, "sha": read.sha})
        said = f"attached {read.name} ({read.mime}, {human_size(read.size)}); it is sent after your reply"
        return ToolResult(call.call_id, said)
