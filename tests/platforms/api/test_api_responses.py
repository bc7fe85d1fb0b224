"""The Responses API with the official ``openai`` client: continuation, named conversations,
stream events, and a client that disconnects mid-stream fetching the finished answer."""

from __future__ import annotations

import re

import openai
import pytest

from support.api_harness import poll_until
from support.procs import wait_until

SLOW = {"echo": {"chunk_delay_ms": 20, "chunk_chars": 1}}


async def _session(world, response_id: str) -> str:
    exchange = await world.gateway.store.api_exchange("api", response_id.removeprefix("resp_"))
    assert exchange is not None
    return exchange.session_key


async def test_a_response_answers_with_the_turns_final(api):
    world = await api()
    async with world.client() as client:
        response = await client.responses.create(model="chatgate", input="hello responses")
    assert response.status == "completed" and response.output_text == "echo: hello responses"
    assert response.id.startswith("resp_") and response.previous_response_id is None


async def test_previous_response_id_continues_its_session_and_a_strangers_id_is_refused(api):
    world = await api()
    async with world.client() as client:
        first = await client.responses.create(model="chatgate", input="one")
        second = await client.responses.create(model="chatgate", input="two", previous_response_id=first.id)
        third = await client.responses.create(model="chatgate", input="three", previous_response_id=second.id)
        fresh = await client.responses.create(model="chatgate", input="four")
    assert second.previous_response_id == first.id and third.output_text == "echo: three"
    assert (
        await _session(world, first.id) == await _session(world, second.id) == await _session(world, third.id)
    )
    assert await _session(world, fresh.id) != await _session(world, first.id)
    _, other = await world.new_key()
    async with world.client(token=other) as stranger:
        with pytest.raises(openai.BadRequestError) as caught:
            await stranger.responses.create(model="chatgate", input="x", previous_response_id=first.id)
        with pytest.raises(openai.NotFoundError):
            await stranger.responses.retrieve(first.id)
    assert caught.value.body["code"] == "previous_response_not_found"


async def test_a_named_conversation_is_one_session_and_is_carried_by_its_responses(api):
    world = await api()
    async with world.client() as client:
        first = await client.responses.create(
            model="chatgate", input="a", extra_body={"conversation": "notes"}
        )
        second = await client.responses.create(
            model="chatgate", input="b", extra_body={"conversation": {"id": "notes"}}
        )
        after = await client.responses.create(model="chatgate", input="c", previous_response_id=second.id)
        with pytest.raises(openai.BadRequestError):
            await client.responses.create(
                model="chatgate",
                input="d",
                previous_response_id=first.id,
                extra_body={"conversation": "notes"},
            )
    assert (
        await _session(world, first.id) == await _session(world, second.id) == await _session(world, after.id)
    )
    assert await _session(world, first.id) == f"agent:main:api:dm:{world.key_id}/c:notes"
    assert after.conversation is not None and after.conversation.id == "notes"


async def test_a_streamed_response_names_its_events_and_its_deltas_join_to_the_final(api):
    world = await api(agent=SLOW)
    async with world.client() as client:
        stream = await client.responses.create(model="chatgate", input="stream me please", stream=True)
        events = [e async for e in stream]
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1 and "".join(deltas) == "echo: stream me please"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].response.output_text == "echo: stream me please"


async def test_a_client_that_disconnects_mid_stream_fetches_the_finished_answer(api):
    text = "a reply long enough to still be streaming when the client walks away"
    world = await api(agent={"echo": {"chunk_delay_ms": 40, "chunk_chars": 1}})
    async with world.client() as client:
        stream = await client.responses.create(model="chatgate", input=text, stream=True)
        response_id = None
        async for event in stream:
            if event.type == "response.created":
                response_id = event.response.id
            if event.type == "response.output_text.delta":
                break
        await stream.close()  # the client goes away mid-stream
        assert response_id is not None
        early = await client.responses.retrieve(response_id)
        finished: list[openai.types.responses.Response] = []

        async def fetched() -> bool:
            finished.append(await client.responses.retrieve(response_id))
            return finished[-1].status == "completed"

        await poll_until(fetched, "the walked-away response to finish")
    assert early.status in ("in_progress", "completed")
    assert finished[-1].output_text == f"echo: {text}"
    assert world.gateway.adapters["api"].waiters.count == 0  # the walked-away stream let go of its waiter


async def test_a_running_response_says_in_progress(api):
    world = await api(
        agent={"echo": {"chunk_delay_ms": 200, "chunk_chars": 1}}, shutdown={"drain_seconds": 0.5}
    )
    async with world.client() as client:
        stream = await client.responses.create(model="chatgate", input="slow " * 20, stream=True)
        async for event in stream:
            if event.type == "response.created":
                response_id = event.response.id
                break
        await stream.close()
        running = await client.responses.retrieve(response_id)
    # 100+ characters at 200 ms each: the turn cannot have finished by the first fetch.
    assert running.status == "in_progress" and running.output == []
    await wait_until(
        lambda: world.gateway.adapters["api"].waiters.count == 0, 30, "the stream's waiter to close"
    )


async def test_a_turn_that_fails_is_an_http_504_or_a_failed_response_with_its_notice(api):
    # 200 ms per character against a 0.5 s turn timeout: the turn times out, and says so.
    world = await api(agent={"turn_timeout_seconds": 0.5, "echo": {"chunk_delay_ms": 200, "chunk_chars": 1}})
    async with world.client() as client:
        with pytest.raises(openai.APIStatusError) as failed:
            await client.responses.create(model="chatgate", input="this will not finish in time")
        stream = await client.responses.create(model="chatgate", input="nor will this", stream=True)
        events = [e async for e in stream]
        with pytest.raises(openai.APIStatusError) as chat:
            await client.chat.completions.create(
                model="chatgate", messages=[{"role": "user", "content": "nor this"}]
            )
        with pytest.raises(openai.APIError) as streamed:  # mid-stream: the status was sent already
            chunks = await client.chat.completions.create(
                model="chatgate", messages=[{"role": "user", "content": "nor this"}], stream=True
            )
            _ = [c async for c in chunks]
        fetched = await client.responses.retrieve(events[-1].response.id)
    assert failed.value.status_code == chat.value.status_code == 504
    for error in (failed.value, chat.value, streamed.value):
        assert error.code == "model_timeout"
        assert re.search(
            r"Sorry, I did not finish within 0 seconds \(error id err-[0-9a-f]{10}\)\.", error.message
        )
    assert events[-1].type == "response.failed"
    assert fetched.status == "failed" and fetched.error is not None
    assert fetched.error.message == events[-1].response.error.message  # the turn's notice, as recorded
