"""An agent built in a worker thread, so that its imports do not delay the platforms.

An agent's client can be slow to import: the OpenAI SDK the OpenAI-compatible agent used
to be built on cost 1-1.4 s of CPU (``openai.types`` defines hundreds of pydantic
models), and done in ``Gateway.__init__`` it delayed the first Telegram poll, and so
every restart's downtime, by that much. Its own client (``model_http.py``) is light, but
any agent's first turn may still wait for its build. ``DeferredAgent`` starts the build
in a thread when the gateway starts (``warm``) and hands a turn to the real agent
once it exists; a turn that starts earlier waits for it. A build that fails ends
every turn with a non-retryable ``AgentFailed`` naming the reason (and is logged once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing

from chatgate.agents.base import Agent, AgentEvent, AgentFailed, AgentRequest

log = logging.getLogger(__name__)


class DeferredAgent:
    def __init__(self, name: str, build: Callable[[], Agent]) -> None:
        self.name = name
        self._build = build
        self._agent: asyncio.Future[Agent] | None = None

    def warm(self) -> None:
        """Start building the agent in a worker thread (call on the gateway's event loop)."""
        if self._agent is None:
            self._agent = asyncio.ensure_future(asyncio.to_thread(self._build))

    async def _ready(self) -> Agent:
        self.warm()
        assert self._agent is not None
        return await asyncio.shield(self._agent)  # a cancelled turn must not cancel the build

    async def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]:
        try:
            agent = await self._ready()
        except Exception as exc:
            log.error("the %s agent could not be set up: %s", self.name, exc)
            yield AgentFailed(f"the {self.name} agent could not be set up: {exc}", retryable=False)
            return
        async with aclosing(agent.stream(request)) as events:  # type: ignore[type-var]
            async for event in events:
                yield event

    async def aclose(self) -> None:
        if self._agent is None:
            return
        with contextlib.suppress(Exception):
            agent = await self._agent
            await agent.aclose()
