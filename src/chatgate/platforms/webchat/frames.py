"""The frames the gateway sends a browser for outbox rows and approval prompts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chatgate.domain.outbound import FAILURE_KEY
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.outfiles import OutFile
from chatgate.domain.prompts import Prompt
from chatgate.domain.tool_steps import as_json, steps_of


def row_frame(row: OutboxRow, link: Callable[[str, OutFile], str] | None = None) -> dict[str, Any]:
    """A row as the page reads it; a file row names its file and the owner-only ``link`` to it."""
    kind = "notice" if row.kind == "notice" else "final"
    frame: dict[str, Any] = {
        "type": kind, "message_id": row.message_id, "in_reply_to": row.in_reply_to, "text": row.text,
    }  # fmt: skip
    if kind == "final" and row.target.get(FAILURE_KEY):
        frame["failure"] = str(row.target[FAILURE_KEY])  # the gateway's apology: show it as an error
    steps = steps_of(row.target)
    if kind == "final" and steps:
        frame["steps"] = as_json(steps)  # what the agent did, as the history shows it again
    file = OutFile.from_target(row.target)
    if file is not None and link is not None:
        url = link(row.chat_id, file)
        frame["file"] = {"name": file.name, "mime": file.mime, "size": file.size, "url": url}
    return frame


def prompt_frame(prompt: Prompt) -> dict[str, Any]:
    return {
        "type": "prompt",
        "prompt_id": prompt.prompt_id,
        "text": prompt.text,
        "options": [{"id": o.id, "label": o.label} for o in prompt.options],
    }


def resolved_frame(prompt_id: str, outcome: str, text: str) -> dict[str, Any]:
    return {"type": "prompt_resolved", "prompt_id": prompt_id, "outcome": outcome, "text": text}


def held_key(frame: dict[str, Any]) -> str | None:
    """What a frame held during a hello duplicates, if the hello's own sync sent it too."""
    if frame["type"] == "prompt":
        return f"prompt:{frame['prompt_id']}"
    message_id = frame.get("message_id")
    return str(message_id) if message_id is not None else None
