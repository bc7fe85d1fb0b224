"""``usage`` (issue 28): the model's own token counts, non-streaming, in the last chunk of a stream
asked for with ``stream_options.include_usage``, and on ``/v1/responses``; an estimate, marked
``"estimated": true``, only where the model reported none. The unmodified ``openai`` client talks
to a real gateway whose agent talks to the fake model server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_openai import ChatOpenAI

from agents.fake_openai_server import API_KEY, FakeOpenAIServer, Reply, running
from chatgate.domain.usage import estimate_tokens


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with running() as srv:
        yield srv


def _agent(model: FakeOpenAIServer) -> dict[str, object]:
    return {"kind": "openai", "openai": {"base_url": model.base_url, "model": "m", "api_key_env": "FAKE_KEY"}}


async def test_a_completion_reports_the_models_own_usage_and_asks_for_it_upstream(
    api, model: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    model.script(Reply("hello there", usage=(123, 45)))
    world = await api(agent=_agent(model))
    async with world.client() as client:
        done = await client.chat.completions.create(
            model="chatgate", messages=[{"role": "user", "content": "hi"}]
        )
        again = await client.chat.completions.retrieve(done.id)
    assert model.requests[0].body["stream_options"] == {"include_usage": True}
    for answer in (done, again):
        assert answer.usage is not None
        assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (123, 45)
        assert answer.usage.total_tokens == 168
        assert (answer.usage.model_extra or {}).get("estimated") is None


async def test_include_usage_ends_the_stream_with_the_usage_chunk(
    api, model: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    model.script(Reply("streamed answer", chunks=3, usage=(50, 7)))
    world = await api(agent=_agent(model))
    async with world.client() as client:
        stream = await client.chat.completions.create(
            model="chatgate",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streamed answer"
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens) == (50, 7, 57)
    assert all(c.usage is None for c in chunks[:-1])


async def test_a_stream_without_include_usage_has_no_usage_chunk(
    api, model: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    model.script(Reply("plain", usage=(5, 1)))
    world = await api(agent=_agent(model))
    async with world.client() as client:
        stream = await client.chat.completions.create(
            model="chatgate", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        chunks = [chunk async for chunk in stream]
    assert all(c.choices and c.usage is None for c in chunks)


async def test_a_model_that_reports_no_usage_gets_a_marked_estimate(
    api, model: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    answer = "an answer of exactly forty characters.."
    model.script(Reply(answer))  # no usage chunk, as many local servers
    world = await api(agent=_agent(model))
    async with world.client() as client:
        done = await client.chat.completions.create(
            model="chatgate", messages=[{"role": "user", "content": "hi"}]
        )
    assert done.usage is not None and (done.usage.model_extra or {}).get("estimated") is True
    assert done.usage.completion_tokens == estimate_tokens(answer) == 10
    sent = model.requests[0].body["messages"]
    assert done.usage.prompt_tokens == sum(estimate_tokens(m["content"]) for m in sent)


async def test_responses_report_usage_streamed_or_not(
    api, model: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    model.script(Reply("one", usage=(20, 2)), Reply("two", usage=(30, 4)))
    world = await api(agent=_agent(model))
    async with world.client() as client:
        plain = await client.responses.create(model="chatgate", input="hi")
        stream = await client.responses.create(model="chatgate", input="again", stream=True)
        events = [event async for event in stream]
        fetched = await client.responses.retrieve(plain.id)
    completed = [e for e in events if e.type == "response.completed"][-1].response
    for response, counts in ((plain, (20, 2)), (fetched, (20, 2)), (completed, (30, 4))):
        assert response.usage is not None
        assert (response.usage.input_tokens, response.usage.output_tokens) == counts
        assert response.usage.total_tokens == sum(counts)


async def test_langchain_reads_the_usage_invoked_and_streamed(
    api, model: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``langchain-openai`` unmodified: ``usage_metadata`` from a completion, and from the last
    chunk of a stream it asks ``include_usage`` for (``stream_usage=True``)."""
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    model.script(Reply("first", usage=(40, 4)), Reply("second", chunks=2, usage=(60, 6)))
    world = await api(agent=_agent(model))
    chat = ChatOpenAI(
        model="chatgate", base_url=f"{world.base}/v1", api_key=world.token, max_retries=0, stream_usage=True
    )
    invoked = await chat.ainvoke("hi")
    chunks = [chunk async for chunk in chat.astream("again")]
    streamed = sum(chunks[1:], chunks[0])
    assert invoked.usage_metadata is not None and streamed.usage_metadata is not None
    assert (invoked.usage_metadata["input_tokens"], invoked.usage_metadata["output_tokens"]) == (40, 4)
    assert streamed.content == "second"
    assert (streamed.usage_metadata["input_tokens"], streamed.usage_metadata["output_tokens"]) == (60, 6)
