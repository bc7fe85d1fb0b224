"""The relay's text lane: a connector-normalized ``inbound`` event as an ``Inbound``.

The event arrives validated (``frames.InboundEvent``: types checked, ids trimmed,
text within the limit); this module gives it its identities. Identity comes from
``event.source`` as the connector resolved it (the contract's ``SessionSource``);
the user name is the display name, else the name, else the handle. The
triggering message id may sit at the root (``message_id``) or in
``source.message_id``: both forms converge on ``message_ref``, and when they
disagree the root wins (it is the event's own id). The dedupe key is that
message id (stable whether the event arrives live or replayed from the
connector's buffer), else the buffer id.
"""

from __future__ import annotations

import uuid
from typing import Any

from chatgate.domain.inbound import Attachment, Inbound, InboundKind
from chatgate.domain.source import Source
from chatgate.platforms.relay.frames import InboundEvent, SessionSource

TRANSPORT = "relay"


def _source(raw: SessionSource) -> Source:
    return Source(
        platform=raw.platform,
        chat_id=raw.chat_id,
        chat_type=raw.chat_type,  # type: ignore[arg-type]  # checked by canonical_source
        user_id=raw.user_id,
        user_name=raw.user_display_name or raw.user_name or raw.user_handle,
        thread_id=raw.thread_id,
        parent_chat_id=raw.parent_chat_id,
        scope_id=raw.scope_id,
        chat_name=raw.chat_name,
        chat_topic=raw.chat_topic,
        user_id_alt=raw.user_id_alt,
    )


def _attachments(event: InboundEvent) -> tuple[Attachment, ...]:
    by_url = {m.url: m for m in event.media}
    out = []
    for url in event.media_urls:
        meta = by_url.get(url)
        if meta is None:
            out.append(Attachment(kind="document", ref=url))
        else:
            out.append(
                Attachment(kind=meta.kind, ref=url, mime=meta.mime, name=meta.filename, size=meta.size)
            )
    return tuple(out)


def to_inbound(event: InboundEvent, buffer_id: str | None, *, received_at: float) -> Inbound:
    source = _source(event.source)
    message_ref = event.message_id or event.source.message_id
    if message_ref:
        delivery_id = f"{source.platform}:{source.chat_id}:{message_ref}"
    elif buffer_id:
        delivery_id = f"buffer:{buffer_id}"
    else:
        delivery_id = f"live:{uuid.uuid4().hex}"  # neither id: nothing will ever redeliver it
    payload: dict[str, Any] = {}
    quoted = event.reply_to
    if quoted is not None:
        payload["reply_to"] = {k: quoted[k] for k in ("text", "author", "is_own") if k in quoted}
    kind: InboundKind = "command" if event.message_type == "command" else "text"
    if event.prompt_response is not None:
        # A press on a prompt's button: an approval answer, never text for the agent (even
        # when the prompt is a sibling gateway's: the connector fans presses out to all).
        payload["prompt_response"] = {k: str(v) for k, v in event.prompt_response.items() if v is not None}
        kind = "button"
        # Two people pressing on one prompt message are two deliveries; a replay is the same one.
        press = f"{source.user_id}:{payload['prompt_response'].get('option_id', '')}"
        delivery_id = f"{delivery_id}:press:{press}"
    fields = event.source.model_fields_set
    return Inbound(
        transport=TRANSPORT,
        delivery_id=delivery_id,
        source=source,
        text=event.text,
        kind=kind,
        message_ref=message_ref,
        reply_to=event.reply_to_message_id,
        received_at=received_at,
        attachments=_attachments(event),
        payload=payload,
        # The contract sends chat_name/chat_topic always (null = none now): present keys are an observation.
        observes_labels="chat_name" in fields or "chat_topic" in fields,
    )
