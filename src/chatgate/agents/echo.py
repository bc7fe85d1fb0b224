"""The offline default agent: replies ``echo: <text>`` and streams it in chunks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from chatgate.agents.base import AgentEvent, AgentRequest, Final, TextDelta


class EchoAgent:
    """Deterministic, offline, and streamed like a real model so previews show."""

    name = "echo"

    def __init__(self, chunk_delay_ms: float = 30.0, chunk_chars: int = 6) -> None:
        if chunk_chars < 1:
            raise ValueError("chunk_chars must be >= 1")
        self._delay = max(chunk_delay_ms, 0.0) / 1000.0
        self._chunk = chunk_chars

    async def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]:
        text = "echo: " + "\n".join(m.text for m in request.messages)
        for start in range(0, len(text), self._chunk):
            if self._delay:
                await asyncio.sleep(self._delay)
            yield TextDelta(text[start : start + self._chunk])
        yield Final(text)

    async def aclose(self) -> None:
        return None
