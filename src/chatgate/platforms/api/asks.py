"""From a validated body and its headers to an ``Ask``: the text, the conversation, the ids."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import TypeAdapter, ValidationError

from chatgate.domain.api_keys import ApiKeyRecord
from chatgate.domain.inbound import Attachment
from chatgate.platforms.api.adapter import ApiAdapter
from chatgate.platforms.api.bodies import (
    ChatCompletionRequest,
    ChatMessage,
    InputMessage,
    Name,
    ResponseRequest,
)
from chatgate.platforms.api.errors import ApiError
from chatgate.platforms.api.lane import Ask, chat_for, chat_of, delivery_id_for, meta_of, owned_exchange

CONVERSATION_HEADER = "x-chatgate-conversation"
IDEMPOTENCY_HEADER = "idempotency-key"
_NAME: TypeAdapter[str] = TypeAdapter(Name)


def _header(headers: Mapping[str, str], name: str, shown: str) -> str | None:
    value = headers.get(name)
    if value is None:
        return None
    try:
        return _NAME.validate_python(value)
    except ValidationError as exc:
        raise ApiError(400, "invalid_header", f"{shown}: 1 to 256 printable characters", param=shown) from exc


def check_model(adapter: ApiAdapter, model: str) -> str | None:
    """The profile a request's ``model`` picks: None for the API's own name (the conversation's
    ``/model`` choice), a profile's name for that profile; 404 for anything else, as OpenAI's."""
    settings = adapter.settings
    if model == settings.model:
        return None
    by_name = {name.lower(): name for name in settings.profiles}
    if model.lower() in by_name:
        return by_name[model.lower()]
    served = ", ".join(repr(m) for m in (settings.model, *settings.profiles))
    raise ApiError(
        404,
        "model_not_found",
        f"the model {model[:80]!r} is not served here; use one of {served}"
        " (GET /v1/models lists them; platforms.api.model and agent.profiles set them)",
        param="model",
    )


def _text(messages: Sequence[ChatMessage | InputMessage], own_chat: bool, where: str) -> str:
    """The last user message; a request's own chat has no history, so earlier turns sent with it
    are rendered in front of it (a named conversation's history is the store's)."""
    last = messages[-1]
    if last.role != "user":
        raise ApiError(400, "invalid_request", "the last message must be the user's", param=f"{where}.role")
    text = last.text()
    if not text.strip() and not last.files():
        raise ApiError(400, "invalid_request", "the last user message is empty", param=f"{where}.content")
    earlier = [m for m in messages[:-1] if m.role in ("user", "assistant") and m.text().strip()]
    if not own_chat or not earlier:
        return text
    lines = "\n".join(f"{m.role}: {m.text()}" for m in earlier)
    return f"Earlier in this conversation:\n{lines}\n\nuser: {text}"


def instructions(adapter: ApiAdapter, key: ApiKeyRecord, client: str) -> dict[str, str] | None:
    """The persona rule of this request (``domain/persona.py``): the client's system/developer
    text appended after the persona, in its place, or ignored, by the key's rule or the section's;
    a key with its own persona replaces the gateway's with it (the client's text then follows it)."""
    own, rule = adapter.settings.keys.get(key.key_id, (None, None))
    rule = rule or adapter.settings.client_system
    client = client.strip() if rule != "ignore" else ""
    if own is not None:
        text = client if rule == "replace" and client else f"{own.strip()}\n\n{client}".strip()
        return {"mode": "replace", "text": text}
    if not client:
        return None
    return {"mode": "replace" if rule == "replace" else "append", "text": client}


def _system_text(messages: Sequence[ChatMessage | InputMessage], extra: str | None = None) -> str:
    """The client's system and developer messages (and ``instructions``), in order."""
    parts = [extra] if extra else []
    parts += [m.text() for m in messages if m.role in ("system", "developer") and m.text().strip()]
    return "\n\n".join(p.strip() for p in parts)


async def _files(
    adapter: ApiAdapter, messages: Sequence[ChatMessage | InputMessage], where: str
) -> tuple[Attachment, ...]:
    """The last user message's files, stored (``files.py``); a 400 names a bad part. Files in
    earlier messages are not taken: a named conversation's history has them already."""
    return await adapter.files.take(messages[-1].files(), f"{where}.content")


async def chat_ask(
    adapter: ApiAdapter,
    key: ApiKeyRecord,
    body: ChatCompletionRequest,
    headers: Mapping[str, str],
    request: str,
) -> Ask:
    profile = check_model(adapter, body.model)
    name = _header(headers, CONVERSATION_HEADER, "X-Chatgate-Conversation") or body.user
    delivery_id = delivery_id_for(key.key_id, _header(headers, IDEMPOTENCY_HEADER, "Idempotency-Key"))
    where = f"messages.{len(body.messages) - 1}"
    text = _text(body.messages, name is None, where)
    chat_id = chat_for(key.key_id, name, delivery_id)
    rule = instructions(adapter, key, _system_text(body.messages))
    files = await _files(adapter, body.messages, where)
    return Ask(
        key,
        delivery_id,
        chat_id,
        text,
        "chat",
        body.model,
        conversation=name,
        request=request,
        instructions=rule,
        profile=profile,
        attachments=files,
    )


async def response_ask(
    adapter: ApiAdapter,
    key: ApiKeyRecord,
    body: ResponseRequest,
    headers: Mapping[str, str],
    request: str,
) -> Ask:
    profile = check_model(adapter, body.model)
    named = body.conversation_name()
    if named is not None and body.previous_response_id is not None:
        raise ApiError(
            400,
            "invalid_request",
            "previous_response_id and conversation cannot both be set; a response continues its conversation",
            param="previous_response_id",
        )
    delivery_id = delivery_id_for(key.key_id, _header(headers, IDEMPOTENCY_HEADER, "Idempotency-Key"))
    header = _header(headers, CONVERSATION_HEADER, "X-Chatgate-Conversation")  # checked even when unused
    chat_id: str | None = None
    if body.previous_response_id is not None:
        previous = await owned_exchange(adapter, key, body.previous_response_id)
        if previous is None:
            raise ApiError(
                400,
                "previous_response_not_found",
                f"no response {body.previous_response_id[:60]!r} was made with this API key",
                param="previous_response_id",
            )
        carried = meta_of(previous).get("conversation")
        chat_id, named = chat_of(previous), carried if isinstance(carried, str) else None
    else:
        named = named or header or body.user
    messages = [InputMessage(role="user", content=body.input)] if isinstance(body.input, str) else body.input
    own_chat = chat_id is None and named is None
    where = f"input.{len(messages) - 1}"
    text = _text(messages, own_chat, where)
    chat_id = chat_id or chat_for(key.key_id, named, delivery_id)
    after = body.previous_response_id
    rule = instructions(adapter, key, _system_text(messages, body.instructions))
    files = await _files(adapter, messages, where)
    return Ask(
        key,
        delivery_id,
        chat_id,
        text,
        "responses",
        body.model,
        named,
        after,
        request,
        rule,
        profile=profile,
        attachments=files,
    )
