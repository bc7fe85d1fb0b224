"""Fixtures for agents tested against the fake OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from fake_openai_server import API_KEY, FakeOpenAIServer, running

from chatgate.agents.openai_agent import OpenAIAgent

AgentFactory = Callable[..., OpenAIAgent]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with running() as srv:
        yield srv


@pytest.fixture
async def make_agent(server: FakeOpenAIServer) -> AsyncIterator[AgentFactory]:
    """Builds agents aimed at ``server``; every one is closed after the test."""
    agents: list[OpenAIAgent] = []

    def factory(**overrides: Any) -> OpenAIAgent:
        kwargs: dict[str, Any] = {
            "base_url": server.base_url,
            "model": "fake-model",
            "api_key": API_KEY,
            "timeout_s": 5.0,
            "max_retries": 0,
        }
        kwargs.update(overrides)
        agent = OpenAIAgent(**kwargs)
        agents.append(agent)
        return agent

    yield factory
    for agent in agents:
        await agent.aclose()
