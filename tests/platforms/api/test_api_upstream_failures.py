"""A model endpoint that fails is an HTTP error with OpenAI's error shape (issue 28, item 1):
502 for an error answer, 503 when it cannot be reached; the message is the short notice with
its error id (never the endpoint's words, host or port) and the apology never enters history."""

from __future__ import annotations

import re
from collections.abc import Iterator

import openai
import pytest

from agents.fake_openai_server import API_KEY, Fail, FakeOpenAIServer, Reply, running

NOTICE = re.compile(r"Sorry, I could not answer: .* \(error id err-[0-9a-f]{10}\)\.")


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with running() as srv:
        yield srv


def _agent(model: FakeOpenAIServer) -> dict[str, object]:
    return {"kind": "openai", "openai": {"base_url": model.base_url, "model": "m", "api_key_env": "FAKE_KEY"}}


async def test_a_500_upstream_is_a_502_and_the_apology_stays_out_of_the_history(
    api, model: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    boom = Fail(500, "backend exploded at 10.1.2.3:8080", retry_after_ms=10)
    model.script(boom, boom, boom, Reply("fine now"))  # the SDK's own 2 retries fail too
    world = await api(agent=_agent(model))
    async with world.client() as client:
        with pytest.raises(openai.APIStatusError) as failed:
            await client.chat.completions.create(
                model="chatgate", messages=[{"role": "user", "content": "hi"}], user="c1"
            )
        answer = await client.chat.completions.create(
            model="chatgate", messages=[{"role": "user", "content": "again"}], user="c1"
        )
    assert failed.value.status_code == 502
    assert failed.value.code == "model_error"
    assert isinstance(failed.value.body, dict) and failed.value.body["type"] == "server_error"
    assert NOTICE.search(failed.value.message), failed.value.message
    assert "10.1.2.3" not in failed.value.message and "exploded" not in failed.value.message
    assert answer.choices[0].finish_reason == "stop" and answer.choices[0].message.content == "fine now"
    second = model.requests[-1].body["messages"]
    assert [m["role"] for m in second[1:]] == ["user", "user"], "no apology as an assistant turn"
    assert not any("Sorry" in str(m.get("content")) for m in second)


async def test_an_unreachable_endpoint_is_a_503_streamed_or_not(
    api, model: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    world = await api(agent=_agent(model))
    model.stop()  # the port now refuses connections
    async with world.client() as client:
        with pytest.raises(openai.APIStatusError) as plain:
            await client.chat.completions.create(
                model="chatgate", messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(openai.APIStatusError) as streamed:
            stream = await client.chat.completions.create(
                model="chatgate", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            _ = [chunk async for chunk in stream]
    for error in (plain.value, streamed.value):
        assert error.status_code == 503 and error.code == "model_unavailable"
        assert NOTICE.search(error.message), error.message
        assert "127.0.0.1" not in error.message and str(model.port) not in error.message
