"""A scriptable OpenAI-compatible server on 127.0.0.1 for testing real clients (the agent's, the SDK).

It runs uvicorn on its own event loop in a background thread, so the test's
event loop holds only client-side tasks and a test can prove that a client
leaves none behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import socket
import threading
import time
import wave
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

API_KEY = "sk-test-SECRET-0123456789abcdef"
KEY_ENV = "FAKE_OPENAI_KEY"
"""The variable a gateway's config names for ``API_KEY`` (``agent_section``); tests set it."""
"""The key the tests' clients send; error messages must never show it."""


@dataclass(frozen=True)
class Reply:
    """Answer with ``text``, streamed as ``chunks`` roughly equal pieces."""

    text: str
    chunks: int = 1
    hang_after_chunks: int | None = None
    """Stream this many chunks, then stall (never send more, never finish)."""
    usage: tuple[int, int] | None = None
    """``(prompt, completion)`` tokens, sent as a last ``usage`` chunk to a client that asks with
    ``stream_options.include_usage`` (as OpenAI does); None sends none, as many servers do."""
    images: tuple[str, ...] = ()
    """Image URLs streamed after the text as ``delta.images`` (OpenRouter's image models' shape)."""


@dataclass(frozen=True)
class Fail:
    """Answer with an HTTP error and an OpenAI-style error body."""

    status: int
    message: str = "something went wrong"
    type: str = "server_error"
    code: str | None = None
    retry_after_ms: int | None = None
    """Sent as ``retry-after-ms`` so retries in tests need not wait long."""


@dataclass(frozen=True)
class Hang:
    """Read the request and never send a response (not even headers)."""


@dataclass(frozen=True)
class ScriptedCall:
    """One tool call the fake model makes; ``arguments`` is raw text (it may be invalid JSON)."""

    name: str
    arguments: str
    call_id: str | None = "call_1"
    """None streams the call without an id, as some lax servers do."""
    pieces: int = 3
    """Stream the arguments as this many fragments, each in a chunk of its own."""


@dataclass(frozen=True)
class CallTools:
    """Answer by calling tools: stream ``text`` first (if any), then each call."""

    calls: tuple[ScriptedCall, ...]
    text: str = ""
    text_chunks: int = 1
    with_index: bool = True
    """False omits ``index`` from the tool-call deltas (seen from some compatible servers)."""
    usage: tuple[int, int] | None = None
    """As ``Reply.usage``."""


@dataclass(frozen=True)
class Answer:
    """Answer with the text ``reply(body)`` computes from the request: a model that reads what
    it was sent (a fake vision model decodes the images it got, for example)."""

    reply: Callable[[dict[str, Any]], str]
    chunks: int = 1


Behaviour = Reply | Fail | Hang | CallTools | Answer


@dataclass(frozen=True)
class RecordedRequest:
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass(frozen=True)
class RecordedTranscription:
    """One ``POST /v1/audio/transcriptions``: its form fields and the audio file it carried."""

    headers: dict[str, str]
    fields: dict[str, str]
    filename: str
    content_type: str
    data: bytes


def describe_wav(data: bytes) -> str:
    """The fake recogniser: what it "hears" is what the file is (a WAV's rate, channels and
    length), so a test sees the gateway sent the decoded audio; anything else is a 400."""
    with wave.open(io.BytesIO(data)) as audio:
        seconds = audio.getnframes() / audio.getframerate()
        return f"a {audio.getframerate()} Hz {audio.getnchannels()}-channel WAV of {seconds:.1f} s"


def split_text(text: str, parts: int) -> list[str]:
    """Split ``text`` into ``parts`` contiguous, non-empty pieces (fewer if it is short)."""
    parts = max(1, min(parts, len(text))) if text else 1
    size, extra = divmod(len(text), parts)
    pieces: list[str] = []
    start = 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


@dataclass
class FakeOpenAIServer:
    """Each request consumes the next scripted behaviour; the last one repeats."""

    behaviours: list[Behaviour] = field(default_factory=lambda: [Reply("hello")])
    requests: list[RecordedRequest] = field(default_factory=list)
    disconnects: int = 0
    """How many times a client went away while the server was stalled."""
    transcriptions: list[RecordedTranscription] = field(default_factory=list)
    transcribe: Callable[[bytes], str] = describe_wav
    """What ``POST /v1/audio/transcriptions`` answers for an audio file."""
    models: list[str] = field(default_factory=lambda: ["fake-model"])
    refused_params: set[str] = field(default_factory=set)
    """Request fields this server rejects with a 400 naming them, as strict servers do."""
    """What ``GET /v1/models`` lists (to a client that sends ``API_KEY``; others get 401)."""

    port: int = 0
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _release: asyncio.Event | None = None
    _disconnected: threading.Event = field(default_factory=threading.Event)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *behaviours: Behaviour) -> None:
        if not behaviours:
            raise ValueError("script at least one behaviour")
        self.behaviours = list(behaviours)

    async def wait_for_disconnect(self, timeout_s: float = 5.0) -> None:
        """Return once a stalled request has seen its client hang up."""
        if not await asyncio.to_thread(self._disconnected.wait, timeout_s):
            raise TimeoutError("the client never closed the connection")

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        # IPPROTO_TCP, not the default 0: asyncio turns Nagle off only on sockets that say TCP,
        # and with Nagle on, a streamed answer's first chunk waited for the client's delayed
        # ACK after the headers (about 40 ms, in most runs of bench/telegram.py).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app(),
            lifespan="off",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        server = uvicorn.Server(config)
        self._server = server

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._release = asyncio.Event()
            await server.serve(sockets=[sock])

        self._thread = threading.Thread(
            target=asyncio.run, args=(main(),), name="fake-openai-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 5.0
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("fake OpenAI server did not start")
            time.sleep(0.005)

    def stop(self) -> None:
        """Idempotent; after it returns the port refuses connections."""
        if self._server is None or self._thread is None:
            return
        if self._loop is not None and self._release is not None:
            # Let stalled handlers finish so shutdown is prompt.
            self._loop.call_soon_threadsafe(self._release.set)
        self._server.should_exit = True
        self._thread.join(timeout=10)
        if self._thread.is_alive():
            raise RuntimeError("fake OpenAI server did not stop")
        self._server = None
        self._thread = None

    # -- the ASGI app ------------------------------------------------------

    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/v1/audio/transcriptions", self._transcription, methods=["POST"]),
            ]
        )

    async def _models(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {API_KEY}":
            error = {"message": "Incorrect API key provided", "type": "invalid_request_error"}
            return JSONResponse({"error": error}, status_code=401)
        data = [{"id": name, "object": "model", "owned_by": "fake"} for name in self.models]
        return JSONResponse({"object": "list", "data": data})

    async def _transcription(self, request: Request) -> Response:
        """OpenAI's transcription endpoint: a multipart form with ``file`` and ``model``;
        answers ``{"text": ...}`` (the default ``response_format``, json)."""
        if request.headers.get("authorization") != f"Bearer {API_KEY}":
            error = {"message": "Incorrect API key provided", "type": "invalid_request_error"}
            return JSONResponse({"error": error}, status_code=401)
        async with request.form() as form:
            upload = form.get("file")
            if upload is None or isinstance(upload, str):
                error = {"message": "file is required", "type": "invalid_request_error"}
                return JSONResponse({"error": error}, status_code=400)
            data = await upload.read()
            fields = {k: v for k, v in form.items() if isinstance(v, str)}
            filename, content_type = upload.filename or "", upload.content_type or ""
        self.transcriptions.append(
            RecordedTranscription(dict(request.headers), fields, filename, content_type, data)
        )
        try:
            text = self.transcribe(data)
        except (wave.Error, EOFError) as exc:
            error = {"message": f"could not decode the audio: {exc}", "type": "invalid_request_error"}
            return JSONResponse({"error": error}, status_code=400)
        return JSONResponse({"text": text})

    def _next_behaviour(self) -> Behaviour:
        if len(self.behaviours) > 1:
            return self.behaviours.pop(0)
        return self.behaviours[0]

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(RecordedRequest(dict(request.headers), body))
        for name in sorted(self.refused_params & set(body)):
            error = {
                "message": f"Unrecognized request argument supplied: {name}",
                "type": "invalid_request_error",
                "param": name,
                "code": None,
            }
            return JSONResponse({"error": error}, status_code=400)
        behaviour = self._next_behaviour()
        if isinstance(behaviour, Answer):
            behaviour = Reply(behaviour.reply(body), behaviour.chunks)
        if isinstance(behaviour, Fail):
            error = {
                "message": behaviour.message,
                "type": behaviour.type,
                "param": None,
                "code": behaviour.code,
            }
            headers = {}
            if behaviour.retry_after_ms is not None:
                headers["retry-after-ms"] = str(behaviour.retry_after_ms)
            return JSONResponse({"error": error}, status_code=behaviour.status, headers=headers)
        if isinstance(behaviour, Hang):
            await self._stall_until_disconnect(request)
            return Response(status_code=503)
        model = str(body.get("model", "fake-model"))
        if body.get("stream"):
            options = body.get("stream_options")
            asked = isinstance(options, dict) and options.get("include_usage") is True
            return StreamingResponse(
                self._sse(behaviour, model, behaviour.usage if asked else None),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache"},
            )
        if isinstance(behaviour, CallTools):
            return JSONResponse(_completion(behaviour.text, model, behaviour.calls))
        return JSONResponse(_completion(behaviour.text, model))

    async def _stall_until_disconnect(self, request: Request) -> None:
        # After the body is read, the next ASGI message is the disconnect.
        receive = asyncio.ensure_future(request.receive())
        assert self._release is not None
        release = asyncio.ensure_future(self._release.wait())
        done, pending = await asyncio.wait({receive, release}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if receive in done and receive.result().get("type") == "http.disconnect":
            self._note_disconnect()

    def _note_disconnect(self) -> None:
        self.disconnects += 1
        self._disconnected.set()

    async def _sse(
        self, reply: Reply | CallTools, model: str, usage: tuple[int, int] | None
    ) -> AsyncIterator[bytes]:
        created = int(time.time())
        if isinstance(reply, CallTools):
            for frame in _tool_call_events(model, created, reply, usage):
                yield frame
            return
        pieces = split_text(reply.text, reply.chunks)
        for event in _events(model, created, pieces, reply.hang_after_chunks, usage, reply.images):
            if event is None:
                assert self._release is not None
                try:
                    # Starlette cancels this generator when the client disconnects.
                    await self._release.wait()
                except asyncio.CancelledError:
                    self._note_disconnect()
                    raise
                return
            yield event


def _frame(model: str, created: int, delta: dict[str, Any], finish: str | None) -> bytes:
    chunk = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _usage_frame(model: str, created: int, usage: tuple[int, int]) -> bytes:
    """OpenAI's last chunk with ``include_usage``: no choices, the request's token counts."""
    prompt, completion = usage
    chunk = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _events(
    model: str,
    created: int,
    pieces: list[str],
    hang_after: int | None,
    usage: tuple[int, int] | None = None,
    images: tuple[str, ...] = (),
) -> Iterator[bytes | None]:
    """SSE frames of a chat completion stream; ``None`` marks where to stall."""

    def frame(delta: dict[str, Any], finish: str | None) -> bytes:
        return _frame(model, created, delta, finish)

    yield frame({"role": "assistant", "content": ""}, None)
    for i, piece in enumerate(pieces):
        if hang_after is not None and i == hang_after:
            yield None
            return
        yield frame({"content": piece}, None)
    if hang_after is not None and hang_after >= len(pieces):
        yield None
        return
    if images:
        yield frame({"images": [{"type": "image_url", "image_url": {"url": url}} for url in images]}, None)
    yield frame({}, "stop")
    if usage is not None:
        yield _usage_frame(model, created, usage)
    yield b"data: [DONE]\n\n"


def _tool_call_events(
    model: str, created: int, reply: CallTools, usage: tuple[int, int] | None = None
) -> Iterator[bytes]:
    """Text first, then each call: its id, type and name, then its arguments in fragments."""
    yield _frame(model, created, {"role": "assistant", "content": None}, None)
    if reply.text:
        for piece in split_text(reply.text, reply.text_chunks):
            yield _frame(model, created, {"content": piece}, None)
    for index, call in enumerate(reply.calls):
        position = {"index": index} if reply.with_index else {}
        head: dict[str, Any] = {**position, "type": "function", "function": {"name": call.name}}
        if call.call_id is not None:
            head["id"] = call.call_id
        yield _frame(model, created, {"tool_calls": [head]}, None)
        for fragment in split_text(call.arguments, call.pieces):
            if fragment:
                piece = {**position, "function": {"arguments": fragment}}
                yield _frame(model, created, {"tool_calls": [piece]}, None)
    yield _frame(model, created, {}, "tool_calls")
    if usage is not None:
        yield _usage_frame(model, created, usage)
    yield b"data: [DONE]\n\n"


def _completion(text: str, model: str, calls: tuple[ScriptedCall, ...] = ()) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": (text or None) if calls else text}
    if calls:
        message["tool_calls"] = [
            {
                "id": call.call_id or f"call_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for i, call in enumerate(calls)
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


@contextlib.contextmanager
def running() -> Iterator[FakeOpenAIServer]:
    """A started server, stopped on leaving: what each test module's fixture yields."""
    srv = FakeOpenAIServer()
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def agent_section(server: FakeOpenAIServer, **openai: Any) -> dict[str, Any]:
    """A gateway's ``agent`` config for the OpenAI agent against ``server`` (key in ``KEY_ENV``),
    plus any other ``agent.openai`` keys (``vision``, ``image_output``, ...)."""
    section = {"base_url": server.base_url, "model": "m", "api_key_env": KEY_ENV, **openai}
    return {"kind": "openai", "openai": section}
