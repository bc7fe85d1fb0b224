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


def _inbox(world, what: str = "COUNT(*)") -> list[tuple]:
    import sqlite3

    db = sqlite3.connect(world.gateway.store.path, timeout=30)
    try:
        return db.execute(f"SELECT {what} FROM inbox WHERE transport = 'api' ORDER BY seq").fetchall()
    finally:
        db.close()


async def _session_of(world, completion_id: str) -> str:
    exchange = await world.gateway.store.api_exchange("api", completion_id.removeprefix("chatcmpl-"))
    assert exchange is not None
    return exchange.session_key


async def test_a_conversation_is_one_session_by_header_or_user_and_otherwise_each_request_is_its_own(api):
    world = await api()
    ask = [{"role": "user", "content": "hi"}]
    async with world.client() as client:
        by_header = [
            await client.chat.completions.create(
                model="chatgate", messages=ask, extra_headers={"X-Chatgate-Conversation": "project-x"}
            )
            for _ in range(2)
        ]
        by_user = [
            await client.chat.completions.create(model="chatgate", messages=ask, user="ann") for _ in range(2)
        ]
        alone = [await client.chat.completions.create(model="chatgate", messages=ask) for _ in range(2)]
    header_keys = {await _session_of(world, c.id) for c in by_header}
    user_keys = {await _session_of(world, c.id) for c in by_user}
    alone_keys = {await _session_of(world, c.id) for c in alone}
    assert len(header_keys) == 1 and len(user_keys) == 1 and len(alone_keys) == 2
    assert header_keys.isdisjoint(user_keys) and header_keys.isdisjoint(alone_keys)
    assert header_keys == {f"agent:main:api:dm:{world.key_id}/c:project-x"}
    # Another key naming the same conversation gets a session of its own.
    _, other = await world.new_key()
    async with world.client(token=other) as client:
        theirs = await client.chat.completions.create(
            model="chatgate", messages=ask, extra_headers={"X-Chatgate-Conversation": "project-x"}
        )
    assert await _session_of(world, theirs.id) not in header_keys


async def test_a_request_of_its_own_carries_the_earlier_messages_it_was_sent_with(api):
    world = await api()
    history = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "answer"},
        {"role": "user", "content": "second"},
    ]
    async with world.client() as client:
        alone = await client.chat.completions.create(model="chatgate", messages=history)
        named = await client.chat.completions.create(model="chatgate", messages=history, user="bo")
    assert alone.choices[0].message.content == (
        "echo: Earlier in this conversation:\nuser: first\nassistant: answer\n\nuser: second"
    )
    assert named.choices[0].message.content == "echo: second"  # the session keeps its own history


async def test_models_lists_the_configured_model_and_another_model_is_a_404(api):
    """As OpenAI answers a model it does not have: 404 ``model_not_found`` (profiles: test_api_models)."""
    world = await api(api={"model": "house-model"})
    async with world.client() as client:
        models = await client.models.list()
        assert [m.id for m in models.data] == ["house-model"]
        with pytest.raises(openai.NotFoundError) as caught:
            await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert caught.value.body["code"] == "model_not_found" and caught.value.body["param"] == "model"
    assert _inbox(world) == [(0,)]  # refused before admission: nothing ran


async def test_a_retry_with_the_same_idempotency_key_runs_once_and_answers_the_same(api):
    world = await api()
    ask = [{"role": "user", "content": "only once"}]
    headers = {"Idempotency-Key": "retry-1"}
    async with world.client() as client:
        first = await client.chat.completions.create(model="chatgate", messages=ask, extra_headers=headers)
        again = await client.chat.completions.create(model="chatgate", messages=ask, extra_headers=headers)
        stream = await client.chat.completions.create(
            model="chatgate", messages=ask, extra_headers=headers, stream=True
        )
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        other = await client.chat.completions.create(
            model="chatgate", messages=ask, extra_headers={"Idempotency-Key": "retry-2"}
        )
    _, stranger_token = await world.new_key()
    async with world.client(token=stranger_token) as stranger:  # the same Idempotency-Key, another key
        theirs = await stranger.chat.completions.create(model="chatgate", messages=ask, extra_headers=headers)
    assert first.id == again.id != other.id
    assert theirs.id not in (first.id, other.id)
    assert (
        first.choices[0].message.content == again.choices[0].message.content == streamed == "echo: only once"
    )
    assert _inbox(world) == [(3,)]  # retry-1 once, retry-2 once, the other key's retry-1 once
    assert _inbox(world, "outcome") == [("ok",), ("ok",), ("ok",)]


async def test_concurrent_retries_of_a_running_request_share_its_one_turn(api):
    import asyncio

    world = await api(agent={"echo": {"chunk_delay_ms": 20, "chunk_chars": 1}})
    ask = [{"role": "user", "content": "concurrent"}]
    headers = {"Idempotency-Key": "same"}
    async with world.client() as client:
        answers = await asyncio.gather(
            *(
                client.chat.completions.create(model="chatgate", messages=ask, extra_headers=headers)
                for _ in range(4)
            )
        )
    assert {a.id for a in answers} == {answers[0].id}
    assert {a.choices[0].message.content for a in answers} == {"echo: concurrent"}
    assert _inbox(world) == [(1,)]


async def test_an_idempotency_key_reused_for_another_request_is_a_409_and_runs_nothing(api):
    world = await api()
    headers = {"Idempotency-Key": "k"}
    async with world.client() as client:
        await client.chat.completions.create(
            model="chatgate", messages=[{"role": "user", "content": "a"}], extra_headers=headers
        )
        with pytest.raises(openai.ConflictError) as caught:
            await client.chat.completions.create(
                model="chatgate", messages=[{"role": "user", "content": "b"}], extra_headers=headers
            )
    assert caught.value.body["code"] == "idempotency_key_reused"
    assert _inbox(world) == [(1,)]


async def test_a_revoked_key_is_refused_at_once(api):
    world = await api()
    async with world.client() as client:
        await client.models.list()
        assert await world.gateway.store.revoke_api_key(world.key_id, 1.0)
        with pytest.raises(openai.AuthenticationError) as caught:
            await client.models.list()
    assert "revoked" in caught.value.body["message"]


async def test_a_retrieved_chat_completion_is_the_stored_answer(api):
    world = await api()
    async with world.client() as client:
        done = await client.chat.completions.create(
            model="chatgate", messages=[{"role": "user", "content": "keep"}]
        )
        again = await client.chat.completions.retrieve(done.id)
        _, other = await world.new_key()
        async with world.client(token=other) as stranger:
            with pytest.raises(openai.NotFoundError):
                await stranger.chat.completions.retrieve(done.id)
    assert again.choices[0].message.content == "echo: keep" and again.id == done.id


async def test_a_control_command_is_answered_with_its_reply_and_acts_on_the_conversation(api):
    world = await api()
    named = {"X-Chatgate-Conversation": "cmds"}
    async with world.client() as client:
        await client.chat.completions.create(
            model="chatgate", messages=[{"role": "user", "content": "before"}], extra_headers=named
        )
        before = await world.gateway.store.session_info(f"agent:main:api:dm:{world.key_id}/c:cmds")
        reset = await client.chat.completions.create(
            model="chatgate", messages=[{"role": "user", "content": "/new"}], extra_headers=named
        )
        after = await world.gateway.store.session_info(f"agent:main:api:dm:{world.key_id}/c:cmds")
    assert reset.choices[0].message.content and "echo" not in reset.choices[0].message.content
    assert before is not None and after is not None and before.session_id != after.session_id


async def test_no_answer_within_wait_seconds_is_a_504_and_the_answer_is_fetched_later(api):
    from support.api_harness import poll_until

    # 60 characters at 50 ms each against a 0.5 s wait: the request gives up long before the turn ends.
    world = await api(agent={"echo": {"chunk_delay_ms": 50, "chunk_chars": 1}}, api={"wait_seconds": 0.5})
    text = "an answer that takes longer than the request may wait"
    headers = {"Idempotency-Key": "slow"}
    async with world.client() as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(
                model="chatgate", messages=[{"role": "user", "content": text}], extra_headers=headers
            )
        assert caught.value.status_code == 504 and caught.value.body["code"] == "answer_timeout"
        response_id = caught.value.body["message"].split("GET /v1/responses/")[1].split()[0]

        async def completed() -> bool:
            return (await client.responses.retrieve(response_id)).status == "completed"

        await poll_until(completed, "the turn to finish after its request gave up")
        again = await client.chat.completions.create(
            model="chatgate", messages=[{"role": "user", "content": text}], extra_headers=headers
        )
    assert again.choices[0].message.content == f"echo: {text}"
    assert _inbox(world) == [(1,)]
