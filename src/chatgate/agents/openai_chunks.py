"""Reading an OpenAI-compatible server's streamed chunks: plain JSON, read defensively.

Chunks stay dicts (the typed SDK models cost CPU per chunk) and come from any server, strict or
lax, so every field is read as possibly missing or of the wrong type.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec


@dataclass
class _CallDraft:
    """A tool call as it streams in: arguments arrive as JSON fragments."""

    call_id: str | None = None
    name: str = ""
    arguments: str = ""


class StreamedCall(msgspec.Struct, frozen=True):
    call_id: str
    name: str
    arguments: str
    """The raw JSON text, sent back to the model exactly as it wrote it."""


class PendingCalls:
    """Assembles streamed ``tool_calls`` deltas by their index."""

    def __init__(self) -> None:
        self._drafts: dict[int, _CallDraft] = {}
        self._last: int | None = None

    def feed(self, chunk: object) -> None:
        # Chunks are the server's JSON, unvalidated: read every field defensively.
        for choice in items_of(field_of(chunk, "choices")):
            for delta in items_of(field_of(field_of(choice, "delta"), "tool_calls")):
                call_id = field_of(delta, "id")
                draft = self._draft_for(field_of(delta, "index"), call_id)
                if isinstance(call_id, str) and call_id and draft.call_id is None:
                    draft.call_id = call_id
                function = field_of(delta, "function")
                name = field_of(function, "name")
                if isinstance(name, str) and name and not draft.name:
                    draft.name = name
                fragment = field_of(function, "arguments")
                if isinstance(fragment, str):
                    draft.arguments += fragment

    def _draft_for(self, index: object, call_id: object) -> _CallDraft:
        if not isinstance(index, int):
            index = self._guess_index(call_id)
        self._last = index
        return self._drafts.setdefault(index, _CallDraft())

    def _guess_index(self, call_id: object) -> int:
        # A server that omits the index: a new id starts a new call, anything else continues.
        last = self._drafts.get(self._last) if self._last is not None else None
        if self._last is None or last is None:
            return 0
        if isinstance(call_id, str) and call_id and call_id != last.call_id:
            return max(self._drafts) + 1
        return self._last

    def calls(self, step: int) -> list[StreamedCall]:
        """The complete calls in index order; a call without an id gets one, stable within the turn."""
        return [
            StreamedCall(draft.call_id or f"call-{step}-{index}", draft.name, draft.arguments)
            for index, draft in sorted(self._drafts.items())
        ]


def chunk_text(chunk: object) -> str:
    # Some servers send chunks with no choices (e.g. a trailing usage chunk),
    # and lax ones omit fields: tolerate both.
    texts = (field_of(field_of(c, "delta"), "content") for c in items_of(field_of(chunk, "choices")))
    return "".join(t for t in texts if isinstance(t, str))


def field_of(value: object, name: str) -> object:
    return value.get(name) if isinstance(value, dict) else None


def items_of(value: object) -> list[object]:
    return value if isinstance(value, list) else []
