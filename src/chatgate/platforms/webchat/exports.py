"""A conversation as a file to keep: Markdown to read, JSON to process."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from chatgate.domain.web_chats import HistoryItem

MAX_EXPORT_ITEMS = 5000
"""The newest items an export holds: a bound on what one request makes the gateway read."""

SPEAKERS = {
    "me": "You",
    "bot": "Assistant",
    "notice": "Gateway",
    "failure": "Assistant (failed)",
    "prompt": "Approval",
}


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def as_markdown(title: str | None, items: list[HistoryItem]) -> tuple[str, str]:
    """Each item under a heading that names who wrote it and when; replies kept as written."""
    lines = [f"# {title or 'Conversation'}", ""]
    for item in items:
        heading = f"## {SPEAKERS.get(item.kind, item.kind)} · {_when(item.at)}"
        if item.kind == "prompt" and item.outcome:
            heading += f" · {item.outcome}"
        lines += [heading, "", item.text, ""]
    return "\n".join(lines), "text/markdown; charset=utf-8"


def as_json(chat_id: str, title: str | None, items: list[HistoryItem]) -> tuple[str, str]:
    doc = {
        "id": chat_id,
        "title": title,
        "exported_at": time.time(),
        "items": [
            {
                k: v
                for k, v in {
                    "kind": i.kind,
                    "id": i.id,
                    "text": i.text,
                    "at": i.at,
                    "in_reply_to": i.in_reply_to,
                    "outcome": i.outcome,
                }.items()
                if v is not None
            }
            for i in items
        ],
    }
    return json.dumps(doc, ensure_ascii=False, indent=2), "application/json"
