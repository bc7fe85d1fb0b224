"""The agent's HTTP client against a real aiohttp server on 127.0.0.1 that answers as a test
scripts it: the SSE framing servers really send, error events mid-stream, and the SDK's retry
rules (``retry-after``, ``x-should-retry``) that the client keeps."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

from chatgate.agents import model_http
from chatgate.agents.base import AgentEvent, AgentFailed, AgentRequest, Final, TextDelta, TurnMessage
from chatgate.agents.model_http import (
    MAX_RETRY_AFTER,
    ModelCallError,
    ModelEndpoint,
    ModelStatusError,
    ModelStreamError,
    ModelTimeout,
)
from chatgate.agents.openai_agent import OpenAIAgent
from chatgate.agents.sse import Event, EventTooLarge, SseDecoder

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

FRAMES = (
    b": keep-alive\r\n"
    b'data: {"choices": [{"delta": {"content": "Hel"}}]}\r\n\n'  # CRLF, then an LF blank line
    b"event: note\n"
    b"data: first line\n"
    b"data: second line\n\n"
    b'data:{"choices": [{"delta": {"content": "lo"}}]}\r\r'
    b"data: [DONE]\n\n"
)
WHOLE = [
    Event(None, b'{"choices": [{"delta": {"content": "Hel"}}]}'),
    Event("note", b"first line\nsecond line"),
    Event(None, b'{"choices": [{"delta": {"content": "lo"}}]}'),
    Event(None, b"[DONE]"),
]


def test_the_decoder_finds_the_same_events_wherever_the_reads_split_the_stream() -> None:
    assert SseDecoder().feed(FRAMES) == WHOLE
    for size in range(1, len(FRAMES) + 1):
        decoder = SseDecoder()
        events = [e for i in range(0, len(FRAMES), size) for e in decoder.feed(FRAMES[i : i + size])]
        assert events == WHOLE, size
    rng = random.Random(7)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(FRAMES)), 12))
        decoder = SseDecoder()
        pieces = [FRAMES[a:b] for a, b in zip([0, *cuts], [*cuts, len(FRAMES)], strict=True)]
        assert [e for piece in pieces for e in decoder.feed(piece)] == WHOLE, cuts


def test_a_byte_order_mark_opening_the_stream_is_not_part_of_the_first_field() -> None:
    assert SseDecoder().feed(b"\xef\xbb\xbf" + FRAMES) == WHOLE


def test_an_event_that_never_ends_is_refused_at_the_bound() -> None:
    decoder = SseDecoder(max_event_bytes=1000)
    decoder.feed(b"data: " + b"x" * 900 + b"\n")
    with pytest.raises(EventTooLarge):
        for _ in range(10):
            decoder.feed(b"y" * 50)  # one line that never ends


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    runners: list[web.AppRunner] = []

    async def start(handler: Handler) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        return f"http://127.0.0.1:{port}/v1"

    yield start
    for runner in runners:
        await runner.cleanup()


async def sse(req: web.Request, *writes: bytes) -> web.StreamResponse:
    """An event-stream answer made of ``writes``, each its own write to the socket."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(req)
    for data in writes:
        await response.write(data)
    return response


async def agent_events(base_url: str, max_retries: int = 0) -> list[AgentEvent]:
    """Every event of one turn of an ``OpenAIAgent`` aimed at ``base_url``."""
    request = AgentRequest(
        system="s", history=(), messages=(TurnMessage(text="hi"),), model_input="hi", session_key="t:s"
    )
    agent = OpenAIAgent(base_url=base_url, model="m", api_key="sk-test", max_retries=max_retries)
    try:
        return [event async for event in agent.stream(request)]
    finally:
        await agent.aclose()


async def refusal(base_url: str, max_retries: int) -> ModelStatusError:
    """The error a streamed call to ``base_url`` ends with (it must end with one)."""
    endpoint = ModelEndpoint(base_url, "sk-test", timeout_s=5.0, max_retries=max_retries)
    try:
        with pytest.raises(ModelStatusError) as raised:
            await endpoint.stream("/chat/completions", {"model": "m"})
    finally:
        await endpoint.aclose()
    return raised.value


async def test_an_error_event_after_some_text_fails_the_turn_with_the_servers_message(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    async def handler(req: web.Request) -> web.StreamResponse:
        return await sse(
            req,
            b'data: {"choices": [{"delta": {"content": "partial"}}]}\n\n',
            b'data: {"error": {"message": "the model is overloaded"}}\n\n',
        )

    events = await agent_events(await serve(handler))
    assert events[0] == TextDelta("partial")
    (failure,) = events[1:]
    assert isinstance(failure, AgentFailed)
    assert failure.message == "model endpoint reported an error mid-stream: the model is overloaded"
    assert not failure.retryable


async def test_crlf_framing_and_comments_stream_the_same_text(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    async def handler(req: web.Request) -> web.StreamResponse:
        frames = FRAMES.replace(b"event: note", b"event: ping")
        # Small writes: the client reads them as they come, split anywhere.
        return await sse(req, *(frames[i : i + 7] for i in range(0, len(frames), 7)))

    events = await agent_events(await serve(handler))
    # The named ``ping`` event carries no JSON: the stream fails there, after the first delta.
    assert events[0] == TextDelta("Hel")
    assert isinstance(events[1], AgentFailed) and "not JSON" in events[1].message


async def test_a_retry_after_is_waited_for_then_the_call_streams(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    arrivals: list[float] = []

    async def handler(req: web.Request) -> web.StreamResponse:
        arrivals.append(time.monotonic())
        if len(arrivals) == 1:
            return web.json_response(
                {"error": {"message": "slow down"}}, status=429, headers={"retry-after-ms": "1500"}
            )
        return await sse(req, b'data: {"choices": [{"delta": {"content": "ok"}}]}\n\ndata: [DONE]\n\n')

    events = await agent_events(await serve(handler), max_retries=2)
    assert events == [TextDelta("ok"), Final("ok")]
    assert len(arrivals) == 2
    assert arrivals[1] - arrivals[0] >= 1.45  # the server's 1.5 s; the backoff would be at most 0.5 s


@pytest.mark.parametrize(
    ("status", "headers"),
    [
        (503, {"x-should-retry": "false"}),  # the server says not to
        (429, {"retry-after": str(int(MAX_RETRY_AFTER) + 60)}),  # longer than a turn should wait
        (400, {}),  # not a transient status
    ],
)
async def test_what_the_server_says_not_to_retry_is_asked_once(
    serve: Callable[[Handler], Awaitable[str]], status: int, headers: dict[str, str]
) -> None:
    calls = 0

    async def handler(req: web.Request) -> web.StreamResponse:
        nonlocal calls
        calls += 1
        return web.json_response({"error": {"message": "no"}}, status=status, headers=headers)

    error = await refusal(await serve(handler), max_retries=2)
    assert calls == 1
    assert error.status == status
    assert error.body == {"error": {"message": "no"}}


async def test_x_should_retry_true_retries_even_a_client_error(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    calls = 0

    async def handler(req: web.Request) -> web.StreamResponse:
        nonlocal calls
        calls += 1
        return web.json_response(
            {"error": "busy"}, status=400, headers={"x-should-retry": "true", "retry-after": "0.05"}
        )

    assert (await refusal(await serve(handler), max_retries=2)).status == 400
    assert calls == 3  # the first try and both retries


async def test_a_huge_error_body_is_read_only_up_to_its_bound(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    async def handler(req: web.Request) -> web.StreamResponse:
        return web.Response(status=500, body=b"x" * (5 * 1024 * 1024))

    body = (await refusal(await serve(handler), max_retries=0)).body
    assert isinstance(body, str) and len(body) == 64 * 1024


async def test_a_chunk_that_is_not_json_fails_the_stream(serve: Callable[[Handler], Awaitable[str]]) -> None:
    async def handler(req: web.Request) -> web.StreamResponse:
        return await sse(req, b"data: {not json\n\n")

    endpoint = ModelEndpoint(await serve(handler), "sk-test", timeout_s=5.0, max_retries=0)
    stream = await endpoint.stream("/chat/completions", {"model": "m"})
    try:
        with pytest.raises(ModelStreamError, match="not JSON"):
            await anext(stream)
    finally:
        await stream.close()
        await endpoint.aclose()


async def test_the_environments_proxy_carries_the_calls_and_no_proxy_bypasses_it(
    serve: Callable[[Handler], Awaitable[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    hosts: list[str] = []

    async def proxy(req: web.Request) -> web.StreamResponse:
        hosts.append(req.host)  # a proxy is asked for the endpoint's host, not its own
        return await sse(req, b'data: {"choices": [{"delta": {"content": "via"}}]}\n\ndata: [DONE]\n\n')

    proxy_base = await serve(proxy)
    monkeypatch.setenv("HTTP_PROXY", proxy_base.removesuffix("/v1"))
    monkeypatch.setenv("NO_PROXY", "direct.invalid")
    endpoint = ModelEndpoint("http://model.invalid/v1", "sk-test", timeout_s=5.0, max_retries=0)
    bypassed = ModelEndpoint("http://direct.invalid/v1", "sk-test", timeout_s=5.0, max_retries=0)
    try:
        stream = await endpoint.stream("/chat/completions", {"model": "m"})
        chunks = [chunk async for chunk in stream]
        await stream.close()
        with pytest.raises(ModelCallError):  # straight to a host that does not exist
            await bypassed.stream("/chat/completions", {"model": "m"})
    finally:
        await endpoint.aclose()
        await bypassed.aclose()
    assert chunks == [{"choices": [{"delta": {"content": "via"}}]}]
    assert hosts == ["model.invalid"]


async def test_a_server_that_ignores_stream_and_answers_whole_still_gives_the_reply(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    async def handler(req: web.Request) -> web.StreamResponse:
        assert (await req.json())["stream"] is True
        message = {"role": "assistant", "content": "the whole answer"}
        usage = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return web.json_response({"object": "chat.completion", "choices": [choice], "usage": usage})

    events = await agent_events(await serve(handler))
    assert events[0] == TextDelta("the whole answer")
    (final,) = events[1:]
    assert isinstance(final, Final) and final.text == "the whole answer"
    assert final.usage is not None and (final.usage.prompt_tokens, final.usage.completion_tokens) == (7, 3)


@pytest.mark.parametrize("content_type", ["application/json", "text/event-stream"])
async def test_the_body_not_its_label_says_whether_it_is_a_stream_or_a_whole_answer(
    serve: Callable[[Handler], Awaitable[str]], content_type: str
) -> None:
    whole = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "whole"}}]}'
    streamed = b'data: {"choices": [{"delta": {"content": "streamed"}}]}\n\ndata: [DONE]\n\n'

    async def handler(req: web.Request) -> web.StreamResponse:
        return web.Response(
            body=streamed if req.query.get("as") == "sse" else whole, content_type=content_type
        )

    base = await serve(handler)
    endpoint = ModelEndpoint(base, "sk-test", timeout_s=5.0, max_retries=0)
    try:
        texts = []
        for path in ("/chat/completions?as=sse", "/chat/completions?as=json"):
            stream = await endpoint.stream(path, {"model": "m"})
            texts += [c["choices"][0]["delta"]["content"] async for c in stream]
            await stream.close()
    finally:
        await endpoint.aclose()
    assert texts == ["streamed", "whole"]


async def test_a_turn_cancelled_while_its_answer_ends_gives_its_connection_back(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    async def handler(req: web.Request) -> web.StreamResponse:
        response = await sse(req, b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\ndata: [DONE]\n\n')
        await asyncio.sleep(1.0)  # the body's end comes late: ``close`` waits for it
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response

    endpoint = ModelEndpoint(await serve(handler), "sk-test", timeout_s=5.0, max_retries=0)
    stream = await endpoint.stream("/chat/completions", {"model": "m"})
    assert [c async for c in stream] == [{"choices": [{"delta": {"content": "hi"}}]}]
    closing = asyncio.create_task(stream.close())
    await asyncio.sleep(0.01)  # inside the drain
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    try:
        connector = endpoint._pool().connector
        assert connector is not None and not connector._acquired  # closed, not held until GC
    finally:
        await endpoint.aclose()


async def test_a_call_that_cannot_get_a_connection_in_time_times_out(
    serve: Callable[[Handler], Awaitable[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    release = asyncio.Event()

    async def handler(req: web.Request) -> web.StreamResponse:
        response = await sse(req, b": working\n\n")
        await release.wait()  # holds its connection
        return response

    monkeypatch.setattr(model_http, "MAX_CONNECTIONS", 2)
    endpoint = ModelEndpoint(await serve(handler), "sk-test", timeout_s=0.5, max_retries=0)
    held = [await endpoint.stream("/chat/completions", {"model": "m"}) for _ in range(2)]
    try:
        with pytest.raises(ModelTimeout):
            await endpoint.stream("/chat/completions", {"model": "m"})  # the pool is full
    finally:
        release.set()
        for stream in held:
            await stream.close()
        await endpoint.aclose()


async def test_the_organization_and_project_of_the_environment_are_sent(
    serve: Callable[[Handler], Awaitable[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str | None, str | None]] = []

    async def handler(req: web.Request) -> web.StreamResponse:
        seen.append((req.headers.get("OpenAI-Organization"), req.headers.get("OpenAI-Project")))
        return await sse(req, b"data: [DONE]\n\n")

    monkeypatch.setenv("OPENAI_ORG_ID", "org-1")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-2")
    endpoint = ModelEndpoint(await serve(handler), "sk-test", timeout_s=5.0, max_retries=0)
    try:
        stream = await endpoint.stream("/chat/completions", {"model": "m"})
        assert [c async for c in stream] == []
        await stream.close()
    finally:
        await endpoint.aclose()
    assert seen == [("org-1", "proj-2")]
