"""The persona (issue 28, item 2): ``agent.system_prompt`` inline or from a file, overridden per
platform or chat, sent before the pinned context in a system message whose bytes are the same
every turn of a session (the model server's prompt cache stays warm)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from langchain_openai import ChatOpenAI

from agents.fake_openai_server import API_KEY, FakeOpenAIServer, Reply, running
from chatgate.domain.api_keys import ApiKeyRecord, hash_token, new_api_key


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with running() as srv:
        yield srv


def _agent(model: FakeOpenAIServer, **persona: object) -> dict[str, object]:
    openai_section = {"base_url": model.base_url, "model": "m", "api_key_env": "FAKE_KEY"}
    return {"kind": "openai", "openai": openai_section, **persona}


async def _ask(client: openai.AsyncOpenAI, text: str, conversation: str) -> str:
    done = await client.chat.completions.create(
        model="chatgate", messages=[{"role": "user", "content": text}], user=conversation
    )
    return done.choices[0].message.content or ""


async def test_the_system_message_of_turn_1_and_turn_10_are_the_same_bytes(
    api, model: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    model.script(*(Reply(f"answer {i}") for i in range(10)))
    world = await api(agent=_agent(model, system_prompt="You are Ada, terse and kind."))
    async with world.client() as client:
        for i in range(10):
            assert await _ask(client, f"question {i}", "c1") == f"answer {i}"
    systems = [r.body["messages"][0] for r in model.requests]
    assert len(systems) == 10 and all(s["role"] == "system" for s in systems)
    first, tenth = (s["content"].encode() for s in (systems[0], systems[9]))
    assert first == tenth
    assert first.startswith(b"You are Ada, terse and kind.\n\n## Conversation\nPlatform: api\n")
    assert len(model.requests[9].body["messages"]) == 1 + 18 + 1  # system, 9 earlier turns, this one


async def test_a_platform_override_wins_and_a_file_persona_is_read(
    api, model: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    persona = tmp_path / "persona.md"
    persona.write_text("You are Bob, from a file.\n", encoding="utf-8")
    model.script(Reply("one"), Reply("two"))
    world = await api(agent=_agent(model, system_prompt_file=str(persona)))
    async with world.client() as client:
        await _ask(client, "hi", "c1")
    await world.gateway.stop()
    world = await api(
        agent=_agent(model, system_prompt="generic", system_prompts={"api": "You are the API."})
    )
    async with world.client() as client:
        await _ask(client, "hi", "c2")
    from_file, overridden = (r.body["messages"][0]["content"] for r in model.requests)
    assert from_file.startswith("You are Bob, from a file.\n\n## Conversation\n")
    assert overridden.startswith("You are the API.\n\n## Conversation\n") and "generic" not in overridden


async def test_a_client_system_message_is_appended_to_the_persona_and_a_key_can_have_its_own(
    api, model: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    model.script(Reply("bonjour"), Reply("plain"), Reply("own"))
    own_id, own_token = new_api_key()
    keys = {own_id: {"system_prompt": "You are the key's own persona.", "client_system": "ignore"}}
    world = await api(agent=_agent(model, system_prompt="You are Ada."), api={"keys": keys})
    await world.gateway.store.create_api_key(ApiKeyRecord(own_id, "own", time.time()), hash_token(own_token))
    chat = ChatOpenAI(model="chatgate", base_url=f"{world.base}/v1", api_key=world.token, max_retries=0)
    answer = await chat.ainvoke([("system", "Always answer in French."), ("human", "hello")])
    async with world.client() as client:
        await client.responses.create(model="chatgate", input="hi", instructions="Be brief.")
    async with world.client(own_token) as client:
        await client.chat.completions.create(
            model="chatgate",
            messages=[{"role": "system", "content": "ignored"}, {"role": "user", "content": "hi"}],
        )
    french, brief, own = (r.body["messages"][0]["content"] for r in model.requests)
    assert answer.content == "bonjour"
    assert french.startswith("You are Ada.\n\nAlways answer in French.\n\n## Conversation\n")
    assert brief.startswith("You are Ada.\n\nBe brief.\n\n## Conversation\n")
    assert own.startswith("You are the key's own persona.\n\n## Conversation\n") and "ignored" not in own
