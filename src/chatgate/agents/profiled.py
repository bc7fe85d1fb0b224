"""One agent per model profile, as one agent: each turn goes to the profile it names.

The engine picks a turn's profile (the session's ``/model`` choice, or an API request's
``model``) and names it in ``AgentRequest.profile``; an unknown or missing name is the
default profile's (the first), so a choice whose profile left the config still answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing

from chatgate.agents.base import Agent, AgentEvent, AgentRequest


class ProfiledAgent:
    def __init__(self, agents: dict[str, Agent]) -> None:
        if not agents:
            raise ValueError("at least one profile")
        self._agents = agents
        self._default = next(iter(agents.values()))
        self.name = self._default.name

    def for_profile(self, profile: str | None) -> Agent:
        return self._agents.get(profile or "", self._default)

    async def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]:
        async with aclosing(self.for_profile(request.profile).stream(request)) as events:  # type: ignore[type-var]
            async for event in events:
                yield event

    async def aclose(self) -> None:
        await asyncio.gather(*(agent.aclose() for agent in self._agents.values()))
