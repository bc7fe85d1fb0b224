"""The relay's text lane: a connector-normalized ``inbound`` event as an ``Inbound``.

Identity comes from ``event.source`` as the connector resolved it (the contract's
``SessionSource``); the user name is the display name, else the name, else the
handle. The triggering message id may sit at the root (``message_id``) or in
``source.message_id``: both forms converge on ``message_ref``, and when they
disagree the root wins (it is the event's own id). The dedupe key is that
message id (stable whether the event arrives live or replayed from the
connector's buffer), else the buffer id.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from chatgate.domain.inbound import MAX_TEXT_CHARS, Attachment, Inbound, InboundKind
from chatgate.domain.source import Source

TRANSPORT = "relay"
_SOURCE_ID_FIELDS = ("chat_id", "user_id", "thread_id", "parent_chat_id", "scope_id", "user_id_alt")
_SOURCE_TEXT_FIELDS = ("chat_name", "chat_topic", "user_display_name", "user_name", "user_handle")


@dataclass(frozen=True, slots=True)
class Unusable:
    """An event that can never be admitted, and why."""

    reason: str


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise TypeError(type(value).__name__)
    text = str(value).strip()
    return text or None


def _source(raw: dict[str, Any]) -> Source:
    fields: dict[str, str | None] = {}
    for name in (*_SOURCE_ID_FIELDS, *_SOURCE_TEXT_FIELDS):
        try:
            fields[name] = _text(raw.get(name))
        except TypeError as exc:
            raise ValueError(f"source.{name} must be a string, not {exc}") from None
    platform = _text(raw.get("platform"))
    if not platform:
        raise ValueError("source.platform is missing")
    if not fields["chat_id"]:
        raise ValueError("source.chat_id is missing")
    chat_type = raw.get("chat_type") or "dm"
    if not isinstance(chat_type, str):
        raise ValueError("source.chat_type must be a string")
    return Source(
        platform=platform,
        chat_id=fields["chat_id"],
        chat_type=chat_type.strip().lower(),  # type: ignore[arg-type]  # checked by canonical_source
        user_id=fields["user_id"],
        user_name=fields["user_display_name"] or fields["user_name"] or fields["user_handle"],
        thread_id=fields["thread_id"],
        parent_chat_id=fields["parent_chat_id"],
        scope_id=fields["scope_id"],
        chat_name=fields["chat_name"],
        chat_topic=fields["chat_topic"],
        user_id_alt=fields["user_id_alt"],
    )


def _attachments(event: dict[str, Any]) -> tuple[Attachment, ...]:
    urls = event.get("media_urls") or []
    if not isinstance(urls, list):
        raise ValueError("media_urls must be a list")
    raw_media = event.get("media")
    media: list[Any] = raw_media if isinstance(raw_media, list) else []
    by_url = {m.get("url"): m for m in media if isinstance(m, dict) and isinstance(m.get("url"), str)}
    out = []
    for url in urls:
        if not isinstance(url, str) or not url:
            raise ValueError("media_urls must hold non-empty strings")
        meta = by_url.get(url, {})
        size = meta.get("size")
        out.append(
            Attachment(
                kind=str(meta.get("kind") or "document"),
                ref=url,
                mime=meta.get("mime") if isinstance(meta.get("mime"), str) else None,
                name=meta.get("filename") if isinstance(meta.get("filename"), str) else None,
                size=size if isinstance(size, int) and not isinstance(size, bool) else None,
            )
        )
    return tuple(out)


def decode_event(event: Any, buffer_id: str | None, *, received_at: float) -> Inbound | Unusable:
    if not isinstance(event, dict):
        return Unusable("inbound frame without an 'event' object")
    raw_source = event.get("source")
    if not isinstance(raw_source, dict):
        return Unusable("event has no 'source' object")
    text = event.get("text", "")
    if text is None:
        text = ""
    if not isinstance(text, str):
        return Unusable("event.text must be a string")
    if len(text) > MAX_TEXT_CHARS:
        return Unusable(f"text is {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
    try:
        source = _source(raw_source)
        root_id = _text(event.get("message_id"))
        nested_id = _text(raw_source.get("message_id"))
        reply_to = _text(event.get("reply_to_message_id"))
        attachments = _attachments(event)
    except (ValueError, TypeError) as exc:
        return Unusable(str(exc))
    message_ref = root_id or nested_id
    if message_ref:
        delivery_id = f"{source.platform}:{source.chat_id}:{message_ref}"
    elif buffer_id:
        delivery_id = f"buffer:{buffer_id}"
    else:
        delivery_id = f"live:{uuid.uuid4().hex}"  # neither id: nothing will ever redeliver it
    payload: dict[str, Any] = {}
    quoted = event.get("reply_to")
    if isinstance(quoted, dict):
        payload["reply_to"] = {k: quoted[k] for k in ("text", "author", "is_own") if k in quoted}
    kind: InboundKind = "command" if event.get("message_type") == "command" else "text"
    prompt_response = event.get("prompt_response")
    if isinstance(prompt_response, dict):
        # A press on a prompt's button: an approval answer, never text for the agent (even
        # when the prompt is a sibling gateway's: the connector fans presses out to all).
        payload["prompt_response"] = {k: str(v) for k, v in prompt_response.items() if v is not None}
        kind = "button"
        # Two people pressing on one prompt message are two deliveries; a replay is the same one.
        press = f"{source.user_id}:{payload['prompt_response'].get('option_id', '')}"
        delivery_id = f"{delivery_id}:press:{press}"
    return Inbound(
        transport=TRANSPORT,
        delivery_id=delivery_id,
        source=source,
        text=text,
        kind=kind,
        message_ref=message_ref,
        reply_to=reply_to,
        received_at=received_at,
        attachments=attachments,
        payload=payload,
        # The contract sends chat_name/chat_topic always (null = none now): present keys are an observation.
        observes_labels="chat_name" in raw_source or "chat_topic" in raw_source,
    )
