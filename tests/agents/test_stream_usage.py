"""Asking for token counts (``stream_options``) without breaking on servers that refuse it."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from fake_openai_server import FakeOpenAIServer, Reply

from chatgate.agents.base import AgentEvent, AgentFailed, AgentRequest, Final, TurnMessage
from chatgate.agents.openai_agent import OpenAIAgent
from chatgate.domain.usage import Usage

AgentFactory = Callable[..., OpenAIAgent]  # the ``make_agent`` fixture (conftest.py)


async def collect(agent: OpenAIAgent) -> list[AgentEvent]:
    request = AgentRequest(
        system="", history=(), messages=(TurnMessage(text="2+2?"),), model_input="2+2?", session_key="t:s"
    )
    return [event async for event in agent.stream(request)]


def only_error(events: list[AgentEvent]) -> AgentFailed:
    assert len(events) == 1 and isinstance(events[0], AgentFailed), events
    return events[0]


async def test_auto_asks_for_usage_and_reads_the_models_own_count(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(Reply("four", usage=(12, 1)))

    events = await collect(make_agent())

    assert events[-1] == Final("four", Usage(12, 1))
    assert server.requests[0].body["stream_options"] == {"include_usage": True}


async def test_auto_asks_again_without_stream_options_when_refused_and_never_asks_again(
    server: FakeOpenAIServer, make_agent: AgentFactory, caplog: pytest.LogCaptureFixture
) -> None:
    server.refused_params = {"stream_options"}
    server.script(Reply("four", usage=(12, 1)))
    agent = make_agent()

    with caplog.at_level(logging.WARNING, logger="chatgate.agents.openai_agent"):
        first = await collect(agent)
        second = await collect(agent)

    assert first[-1] == Final("four") and second[-1] == Final("four")  # no usage: none was asked for
    asked = ["stream_options" in r.body for r in server.requests]
    assert asked == [True, False, False]  # one refusal, then the retry and the next turn without it
    assert sum("refused stream_options" in r.getMessage() for r in caplog.records) == 1


async def test_never_does_not_send_stream_options(server: FakeOpenAIServer, make_agent: AgentFactory) -> None:
    server.script(Reply("four", usage=(12, 1)))

    events = await collect(make_agent(stream_usage="never"))

    assert events[-1] == Final("four")
    assert "stream_options" not in server.requests[0].body


async def test_always_keeps_asking_and_a_refusal_is_the_turns_failure(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.refused_params = {"stream_options"}

    failure = only_error(await collect(make_agent(stream_usage="always")))

    assert "HTTP 400" in failure.message and "stream_options" in failure.message
    assert len(server.requests) == 1


async def test_another_bad_request_is_not_retried(server: FakeOpenAIServer, make_agent: AgentFactory) -> None:
    server.refused_params = {"temperature"}

    failure = only_error(await collect(make_agent(temperature=0.5)))

    assert "temperature" in failure.message
    assert len(server.requests) == 1
    assert server.requests[0].body["stream_options"] == {"include_usage": True}
