"""Chat completions through the durable pipeline, driven by the official ``openai`` client."""

from __future__ import annotations

import openai
import pytest


async def test_a_chat_completion_is_the_turns_final(api):
    world = await api()
    async with world.client() as client:
        done = await client.chat.completions.create(
            model="chatgate", messages=[{"role": "user", "content": "hello there"}]
        )
    assert done.choices[0].message.content == "echo: hello there"
    assert done.id.startswith("chatcmpl-") and done.object == "chat.completion"


async def test_a_streamed_chat_completion_gives_deltas_that_join_to_the_final(api):
    # One character every 20 ms against 50 ms between drafts: many drafts, however loaded the machine.
    world = await api(agent={"echo": {"chunk_delay_ms": 20, "chunk_chars": 1}})
    async with world.client() as client:
        stream = await client.chat.completions.create(
            model="chatgate",
            messages=[{"role": "user", "content": "a longer message to stream"}],
            stream=True,
        )
        chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "echo: a longer message to stream"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1


async def test_a_wrong_key_is_401_with_an_openai_error(api):
    world = await api()
    async with world.client(token="cg-000000000000-" + "x" * 43) as client:
        with pytest.raises(openai.AuthenticationError) as caught:
            await client.models.list()
    assert caught.value.status_code == 401
    assert caught.value.body["type"] == "authentication_error"
