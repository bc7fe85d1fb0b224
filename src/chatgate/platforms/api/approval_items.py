"""Approvals as typed output items of a Responses API ``response``.

OpenAI's Responses API shows a tool call that needs a person as an ``mcp_approval_request``
output item, answered by an ``mcp_approval_response`` input item in the *next* request. A
chatgate turn instead waits for the answer (``POST /v1/approvals/{id}``) and goes on in the same
response, and its prompt is a sentence for a person rather than a tool name and JSON arguments.
Borrowing OpenAI's type would promise a protocol we do not follow, so the item has a type of its
own, ``chatgate_approval_request``: ``in_progress`` while it waits, ``completed`` with its
``outcome`` once answered. Clients that do not know the type skip it; the text never carries it.
"""

from __future__ import annotations

from typing import Any

ITEM_TYPE = "chatgate_approval_request"


def approval_item(approval: dict[str, Any], outcome: str | None = None) -> dict[str, Any]:
    """The output item of one approval (``shapes.approval``'s fields), open or answered."""
    item: dict[str, Any] = {
        "type": ITEM_TYPE,
        "id": f"apr_{approval['prompt_id']}",
        "status": "in_progress" if outcome is None else "completed",
        **approval,
    }
    if outcome is not None:
        item["outcome"] = outcome
    return item


class ApprovalItems:
    """The approval items a streamed response has shown, after its message (output index 0)."""

    def __init__(self) -> None:
        self._items: dict[str, tuple[int, dict[str, Any]]] = {}

    def added(self, approval: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        index = len(self._items) + 1
        item = approval_item(approval)
        self._items[str(approval["prompt_id"])] = (index, item)
        return index, item

    def answered(self, prompt_id: str, outcome: str) -> tuple[int, dict[str, Any]] | None:
        """The item, now completed; None for a prompt this stream never showed."""
        shown = self._items.get(prompt_id)
        if shown is None:
            return None
        index, item = shown
        done = {**item, "status": "completed", "outcome": outcome}
        self._items[prompt_id] = (index, done)
        return index, done

    def output(self) -> list[dict[str, Any]]:
        return [item for _, item in sorted(self._items.values(), key=lambda shown: shown[0])]
