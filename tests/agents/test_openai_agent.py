"""OpenAIAgent against a real local HTTP server (its own aiohttp client; the SDK only checks the fake)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable

import openai
import pytest
from fake_openai_server import API_KEY, Fail, FakeOpenAIServer, Hang, Reply, split_text

from chatgate.agents.base import AgentEvent, AgentFailed, AgentRequest, Final, TextDelta, TurnMessage
from chatgate.agents.openai_agent import OpenAIAgent
from chatgate.domain.history import HistoryEntry

AgentFactory = Callable[..., OpenAIAgent]  # the ``make_agent`` fixture (conftest.py)


def make_request(
    model_input: str = "what is 2+2?",
    *,
    system: str = "You are terse.",
    history: tuple[HistoryEntry, ...] = (),
) -> AgentRequest:
    return AgentRequest(
        system=system,
        history=history,
        messages=(TurnMessage(text=model_input),),
        model_input=model_input,
        session_key="test:session",
    )


async def collect(agent: OpenAIAgent, request: AgentRequest | None = None) -> list[AgentEvent]:
    return [event async for event in agent.stream(request or make_request())]


def only_error(events: list[AgentEvent]) -> AgentFailed:
    assert len(events) == 1, events
    assert isinstance(events[0], AgentFailed), events
    return events[0]


async def test_streams_each_chunk_as_a_delta_in_order_and_final_is_their_concatenation(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    text = "The quick brown fox jumps over the lazy dog."
    server.script(Reply(text, chunks=5))

    events = await collect(make_agent())

    pieces = split_text(text, 5)
    assert len(pieces) == 5
    assert events[:-1] == [TextDelta(p) for p in pieces]
    assert events[-1] == Final(text)


async def test_empty_reply_ends_with_empty_final_and_no_empty_deltas(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(Reply(""))

    assert await collect(make_agent()) == [Final("")]


async def test_request_carries_system_history_user_input_model_and_bearer_key(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    history = (
        HistoryEntry("user", "hi, I am Ada"),
        HistoryEntry("assistant", "Hello Ada."),
        HistoryEntry("user", "remember 7"),
        HistoryEntry("assistant", "Noted."),
    )
    request = make_request("[Ada] what number?", system="Be precise.", history=history)

    events = await collect(make_agent(model="my-model"), request)

    assert isinstance(events[-1], Final)
    assert len(server.requests) == 1
    sent = server.requests[0]
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.body["model"] == "my-model"
    assert sent.body["stream"] is True
    assert sent.body["messages"] == [
        {"role": "system", "content": "Be precise."},
        {"role": "user", "content": "hi, I am Ada"},
        {"role": "assistant", "content": "Hello Ada."},
        {"role": "user", "content": "remember 7"},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "[Ada] what number?"},
    ]


async def test_sampling_options_are_sent_only_when_configured(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    await collect(make_agent())
    await collect(make_agent(temperature=0.25, max_tokens=64))

    unset, configured = (r.body for r in server.requests)
    assert "temperature" not in unset
    assert "max_tokens" not in unset
    assert configured["temperature"] == 0.25
    assert configured["max_tokens"] == 64


async def test_http_500_yields_one_retryable_agent_error_naming_the_status(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(Fail(500, "the model backend exploded"))

    error = only_error(await collect(make_agent(max_retries=0)))

    assert error.retryable is True
    assert error.kind == "failed"  # an HTTP 502 on the API
    assert "500" in error.message
    assert "the model backend exploded" in error.message
    assert len(server.requests) == 1  # max_retries=0 really means one attempt


async def test_http_429_yields_retryable_agent_error(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(Fail(429, "Rate limit reached", type="requests", code="rate_limit_exceeded"))

    error = only_error(await collect(make_agent()))

    assert error.retryable is True
    assert error.kind == "unavailable"
    assert "429" in error.message


async def test_http_401_yields_non_retryable_agent_error(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(Fail(401, "Invalid authentication", type="invalid_request_error"))

    error = only_error(await collect(make_agent(max_retries=2)))

    assert error.retryable is False
    assert "401" in error.message
    assert len(server.requests) == 1  # an auth failure is not transient: not retried


async def test_client_retries_transient_500_within_max_retries_then_streams_normally(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(Fail(500, "blip", retry_after_ms=10), Reply("recovered", chunks=3))

    events = await collect(make_agent(max_retries=1))

    assert events[-1] == Final("recovered")
    assert len(server.requests) == 2


async def test_api_key_never_appears_in_error_message_even_when_server_echoes_it(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(
        Fail(401, f"Incorrect API key provided: {API_KEY}. Bearer {API_KEY}", code="invalid_api_key")
    )

    error = only_error(await collect(make_agent()))

    assert "401" in error.message
    assert API_KEY not in error.message
    assert "sk-test-SECRET" not in error.message  # not even a truncated prefix


async def test_connection_refused_yields_one_retryable_agent_error_without_the_key(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    agent = make_agent()
    server.stop()  # the port now refuses connections

    error = only_error(await collect(agent))

    assert error.retryable is True
    assert error.kind == "unavailable"  # an HTTP 503 on the API, not a timeout
    assert "refused the connection" in error.message
    assert "ssl" not in error.message and "Timeout" not in error.message  # the transport's mislabel
    assert API_KEY not in error.message


async def test_stalled_endpoint_times_out_into_one_retryable_agent_error(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(Hang())
    started = time.monotonic()

    error = only_error(await collect(make_agent(timeout_s=0.5)))

    assert time.monotonic() - started < 4.0
    assert error.retryable is True
    assert error.kind == "timeout"
    assert "timed out" in error.message


async def test_stream_stalling_after_first_delta_times_out_into_agent_error_after_that_delta(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(Reply("abcdef", chunks=3, hang_after_chunks=1))

    events = await collect(make_agent(timeout_s=0.5))

    assert events[0] == TextDelta("ab")
    assert len(events) == 2
    assert isinstance(events[1], AgentFailed)
    assert events[1].retryable is True


async def test_cancelling_consumer_mid_stream_raises_cancelled_closes_http_stream_and_leaves_no_task(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(Reply("first-second-third", chunks=3, hang_after_chunks=1))
    agent = make_agent(timeout_s=60.0)
    tasks_before = asyncio.all_tasks()
    received: list[AgentEvent] = []
    first_delta = asyncio.Event()

    async def consume() -> None:
        async for event in agent.stream(make_request()):
            received.append(event)
            first_delta.set()

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(first_delta.wait(), 5.0)
    consumer.cancel()

    with pytest.raises(asyncio.CancelledError):
        await consumer
    assert received == [TextDelta("first-")]
    # The server runs on another loop, so anything left here would be the client's.
    assert asyncio.all_tasks() == tasks_before
    # The server sees the client hang up: the agent closed the HTTP stream.
    await server.wait_for_disconnect()
    assert server.disconnects == 1


async def test_consumer_abandoning_stream_early_closes_http_stream(
    server: FakeOpenAIServer, make_agent: AgentFactory
) -> None:
    server.script(Reply("one two three", chunks=3, hang_after_chunks=1))
    stream = make_agent(timeout_s=60.0).stream(make_request())
    assert isinstance(stream, AsyncGenerator)  # so consumers can aclose() it
    try:
        first = await anext(stream)
    finally:
        await stream.aclose()

    assert first == TextDelta(split_text("one two three", 3)[0])
    await server.wait_for_disconnect()
    assert server.disconnects == 1


async def test_agent_is_reusable_across_turns(server: FakeOpenAIServer, make_agent: AgentFactory) -> None:
    server.script(Fail(500, "first turn fails"), Reply("second turn works", chunks=2))
    agent = make_agent()

    assert isinstance(only_error(await collect(agent)), AgentFailed)
    assert (await collect(agent))[-1] == Final("second turn works")


def test_empty_api_key_is_rejected_at_construction() -> None:
    with pytest.raises(ValueError, match="api_key"):
        OpenAIAgent(base_url="http://127.0.0.1:1/v1", model="m", api_key="")


async def test_fake_server_also_answers_non_streaming_requests(server: FakeOpenAIServer) -> None:
    server.script(Reply("plain answer"))
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key=API_KEY) as client:
        completion = await client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}]
        )

    assert completion.choices[0].message.content == "plain answer"
    assert "stream" not in server.requests[0].body
