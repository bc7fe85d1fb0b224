"""Tool progress as one status line under the reply's preview, edited in place.

A long tool call shows in the chat as the preview's last line (``⚙ shell: make test …``, then
``⚙ shell: done``), through the same preview the reply streams in: a draft on the web chat,
one edited message elsewhere. It is never a new message, and the final replaces the preview.
"""

from __future__ import annotations

from chatgate.agents.base import ToolCall, ToolResult
from chatgate.domain.tool_steps import MAX_FIELD, MAX_STEPS, ToolStep, dumps

SUMMARY_CHARS = 60


def _summary(call: ToolCall) -> str:
    texts = [v for v in call.arguments.values() if isinstance(v, str) and v.strip()]
    first = texts[0].strip().splitlines()[0] if texts else ""
    return first if len(first) <= SUMMARY_CHARS else first[: SUMMARY_CHARS - 1] + "…"


def started_line(call: ToolCall) -> str:
    summary = _summary(call)
    return f"⚙ {call.name}: {summary} …" if summary else f"⚙ {call.name} …"


def _outcome(result: ToolResult) -> str:
    return {"ok": "done", "denied": "declined"}.get(result.status, "failed")


def finished_line(call: ToolCall | None, result: ToolResult) -> str:
    name = call.name if call is not None else "tool"
    return f"⚙ {name}: {_outcome(result)}"


class ToolSteps:
    """The turn's tool calls as steps, recorded with its final (``domain/tool_steps.py``)."""

    def __init__(self) -> None:
        self.steps: list[ToolStep] = []
        self._open: dict[str, ToolStep] = {}

    def started(self, call: ToolCall) -> None:
        if len(self.steps) < MAX_STEPS:
            step = ToolStep(call.name[:MAX_FIELD], _summary(call))  # the name is the model's
            self.steps.append(step)
            self._open[call.call_id] = step

    def finished(self, result: ToolResult) -> None:
        step = self._open.pop(result.call_id, None)
        if step is not None:
            step.outcome = _outcome(result)

    def dumps(self) -> str | None:
        """The record for the final's target, or None when the agent called no tool."""
        return dumps(self.steps) if self.steps else None


def with_status(text: str, status: str) -> str:
    """The preview: the reply so far, then the status line."""
    return f"{text}\n\n{status}" if text.strip() else status
