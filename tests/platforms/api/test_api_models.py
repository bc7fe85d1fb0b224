"""Model profiles on the API (issue 28): ``/v1/models`` lists the API's own name and each profile;
a request's ``model`` picks a profile for that request (the conversation's ``/model`` choice is
untouched); an unknown model is OpenAI's 404 ``model_not_found``; the history sent is trimmed to
the profile's context length, the system message and the newest turns kept."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from agents.fake_openai_server import API_KEY, FakeOpenAIServer, Reply, running


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with running() as srv:
        yield srv


def _agent(model: FakeOpenAIServer, **default: object) -> dict[str, object]:
    main = {"base_url": model.base_url, "model": "m-main", "api_key_env": "FAKE_KEY", **default}
    fast = {"base_url": model.base_url, "model": "m-fast", "api_key_env": "FAKE_KEY", "context_length": 8192}
    return {"kind": "openai", "openai": main, "profiles": {"fast": fast}}


async def _say(client: openai.AsyncOpenAI, text: str, conversation: str, model: str = "chatgate") -> str:
    done = await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": text}], user=conversation
    )
    return done.choices[0].message.content or ""


async def test_models_lists_the_profiles_and_a_request_picks_one_for_itself(
    api, model: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    model.script(Reply("ok"))
    world = await api(agent=_agent(model))
    async with world.client() as client:
        listed = [m.id for m in (await client.models.list()).data]
        await _say(client, "one", "c1", model="fast")
        await _say(client, "two", "c1")  # the API's own name: the conversation's profile (default)
        response = await client.responses.create(model="FAST", input="three", user="c1")
        with pytest.raises(openai.NotFoundError) as unknown:
            await _say(client, "four", "c1", model="gpt-5")
    assert listed == ["chatgate", "default", "fast"]
    assert [r.body["model"] for r in model.requests] == ["m-fast", "m-main", "m-fast"]
    assert response.model == "FAST"
    assert unknown.value.body["code"] == "model_not_found" and unknown.value.body["param"] == "model"
    assert "'fast'" in unknown.value.message
    assert len(model.requests) == 3  # refused before admission: nothing ran


async def test_model_command_switches_the_conversation_and_status_shows_it(
    api, model: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    model.script(Reply("ok"))
    world = await api(agent=_agent(model))
    async with world.client() as client:
        listing = await _say(client, "/model", "c1")
        switched = await _say(client, "/model fast", "c1")
        await _say(client, "hi", "c1")
        await _say(client, "hi", "c2")
        status = await _say(client, "/status", "c1")
        other = await _say(client, "/status", "c2")
        wrong = await _say(client, "/model nope", "c1")
    assert listing.splitlines()[1:] == ["→ default (m-main)", "- fast (m-fast, 8192 tokens)"]
    assert switched.startswith("Switched this session to fast (m-fast, 8192 tokens) (was default)")
    assert [r.body["model"] for r in model.requests] == ["m-fast", "m-main"]
    assert status.endswith("Model profile: fast (m-fast, 8192 tokens)")
    assert other.endswith("Model profile: default (m-main)")
    assert wrong == "No model profile 'nope'. The profiles: default, fast."


async def test_the_history_is_trimmed_to_the_profiles_context_length_newest_kept(
    api, model: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    # 512 tokens of context, 64 kept for the answer: about 1,300 characters of prompt (0.8 of it).
    model.script(*(Reply(f"answer {i} " + "x" * 200) for i in range(12)))
    world = await api(agent=_agent(model, context_length=512, max_tokens=64))
    async with world.client() as client:
        for i in range(12):
            await _say(client, f"question {i} " + "y" * 200, "c1")
    first, last = model.requests[0].body["messages"], model.requests[-1].body["messages"]
    assert len(first) == 2  # system and the question
    assert last[0] == first[0], "the system message (persona and pinned context) is always sent whole"
    assert last[-1]["content"].startswith("question 11 ")
    history = last[1:-1]
    assert 2 <= len(history) < 22, "trimmed, yet not to nothing"
    assert history[0]["role"] == "user", "never opens with an answer whose question was dropped"
    assert history[-1]["content"].startswith("answer 10 "), "the newest turns are the ones kept"
    assert sum(len(m["content"]) for m in last) // 4 <= 512 * 0.8 - 64
