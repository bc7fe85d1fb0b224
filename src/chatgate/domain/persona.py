"""The persona: the operator's system prompt, placed before the pinned conversation context.

One prompt for everything (``agent.system_prompt``), overridden per platform (``web``) or per
chat (``telegram:12345``): the most specific wins. The system message is the persona and the
pinned context, both fixed for a session, so its bytes are the same every turn and the model
server's prompt cache stays warm.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from chatgate.domain.source import Source


class Personas(msgspec.Struct, frozen=True):
    default: str = ""
    overrides: Mapping[str, str] = msgspec.field(default_factory=dict)
    """``platform`` or ``platform:chat_id`` to the prompt used there instead of ``default``."""

    def for_source(self, source: Source) -> str:
        chat = f"{source.platform}:{source.chat_id}" if source.chat_id else None
        if chat is not None and chat in self.overrides:
            return self.overrides[chat]
        return self.overrides.get(source.platform, self.default)


def system_message(persona: str, context: str) -> str:
    """The persona, a blank line, then the pinned context (the context alone without one)."""
    persona = persona.strip()
    return f"{persona}\n\n{context}" if persona else context


INSTRUCTIONS_KEY = "instructions"
"""An inbound payload key a platform sets when its client brings its own system prompt (the API's
system/developer messages): ``{"mode": "append" | "replace", "text": ...}``, decided by the
platform's own rule (per API key). The engine applies it to the persona, naming no platform."""


def with_instructions(persona: str, instructions: object) -> str:
    """The persona after a client's instructions: appended after a blank line, or in its place."""
    if not isinstance(instructions, dict):
        return persona
    text, mode = instructions.get("text"), instructions.get("mode")
    if not isinstance(text, str) or not text.strip():
        return persona
    if mode == "replace" or not persona.strip():
        return text.strip()
    return f"{persona.strip()}\n\n{text.strip()}"
