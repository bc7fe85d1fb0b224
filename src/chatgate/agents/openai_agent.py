"""An agent backed by any OpenAI-compatible chat completions endpoint.

Failures never escape as exceptions: the engine needs every turn to end with
exactly one ``Final`` or ``AgentError``, and needs to know whether retrying
the turn could help. Only cancellation propagates, because it is the caller's
decision, not the model's failure.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import openai
from openai import AsyncOpenAI, AsyncStream, omit
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionChunk,
    ChatCompletionMessageParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionUserMessageParam,
)

from chatgate.agents.base import AgentError, AgentEvent, AgentRequest, Final, TextDelta

_MAX_REASON_CHARS = 300
_REDACTED = "[redacted]"


class OpenAIAgent:
    """Streams a turn from an OpenAI-compatible server through the official SDK."""

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        if not api_key:
            # The SDK refuses an empty key; local servers accept any placeholder.
            raise ValueError("api_key must be non-empty (use any placeholder for local servers)")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self._model = model
        self._api_key = api_key
        self._temperature = temperature
        self._max_tokens = max_tokens
        self._timeout_s = timeout_s
        self._client = AsyncOpenAI(
            base_url=base_url,
            api_key=api_key,
            timeout=timeout_s,
            max_retries=max_retries,
        )

    async def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]:
        try:
            chunks: AsyncStream[ChatCompletionChunk] = await self._client.chat.completions.create(
                model=self._model,
                messages=_build_messages(request),
                stream=True,
                temperature=omit if self._temperature is None else self._temperature,
                max_tokens=omit if self._max_tokens is None else self._max_tokens,
            )
        except Exception as exc:  # CancelledError is a BaseException and propagates.
            yield self._to_agent_error(exc)
            return

        parts: list[str] = []
        failure: AgentError | None = None
        try:
            while True:
                # Errors are caught around the read only, never around ``yield``,
                # so nothing the consumer throws in is mistaken for a model error.
                try:
                    chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    failure = self._to_agent_error(exc)
                    break
                text = _chunk_text(chunk)
                if text:
                    parts.append(text)
                    yield TextDelta(text)
        finally:
            # Runs on normal end, on error, on cancellation and on early aclose():
            # the HTTP response must not outlive the turn.
            await chunks.close()

        yield failure if failure is not None else Final("".join(parts))

    async def aclose(self) -> None:
        await self._client.close()

    def _to_agent_error(self, exc: Exception) -> AgentError:
        message, retryable = _describe(exc, self._timeout_s)
        # Redact before shortening so a truncated key can never slip through.
        return AgentError(message=_shorten(self._redact(message)), retryable=retryable)

    def _redact(self, text: str) -> str:
        # Servers sometimes echo credentials back in error bodies.
        return text.replace(self._api_key, _REDACTED)


def _build_messages(request: AgentRequest) -> list[ChatCompletionMessageParam]:
    messages: list[ChatCompletionMessageParam] = [
        ChatCompletionSystemMessageParam(role="system", content=request.system)
    ]
    for entry in request.history:
        if entry.role == "assistant":
            messages.append(ChatCompletionAssistantMessageParam(role="assistant", content=entry.content))
        else:
            messages.append(ChatCompletionUserMessageParam(role="user", content=entry.content))
    messages.append(ChatCompletionUserMessageParam(role="user", content=request.model_input))
    return messages


def _chunk_text(chunk: ChatCompletionChunk) -> str:
    # Some servers send chunks with no choices (e.g. a trailing usage chunk).
    # The SDK does not validate chunks, so tolerate fields a lax server omits.
    texts = (getattr(getattr(c, "delta", None), "content", None) for c in chunk.choices or ())
    return "".join(t for t in texts if isinstance(t, str))


def _describe(exc: Exception, timeout_s: float) -> tuple[str, bool]:
    """A short reason for humans and whether retrying the same turn may succeed."""
    if isinstance(exc, openai.APITimeoutError):
        return f"model endpoint timed out (no data for {timeout_s:g}s)", True
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
        return f"could not reach model endpoint ({detail})", True
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        reason = _body_message(exc.body) or exc.response.reason_phrase or "error"
        # 408 is a timeout reported by the server; same remedy as 429/5xx.
        retryable = status in (408, 429) or status >= 500
        return f"HTTP {status} from model endpoint: {reason}", retryable
    if isinstance(exc, openai.APIError):
        # An error event inside an otherwise successful stream; no status to judge by.
        return f"model endpoint reported an error mid-stream: {exc.message}", False
    return f"model call failed ({type(exc).__name__}: {exc})", False


def _body_message(body: object) -> str | None:
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
        inner = body.get("error")
        if isinstance(inner, dict):
            return _body_message(inner)
        if isinstance(inner, str) and inner:
            return inner
    if isinstance(body, str) and body.strip():
        return body.strip()
    return None


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= _MAX_REASON_CHARS:
        return text
    return text[: _MAX_REASON_CHARS - 1] + "…"
