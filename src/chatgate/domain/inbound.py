"""The one typed event every adapter produces."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from chatgate.domain.source import Source

InboundKind = Literal["text", "command", "button", "select", "modal", "context_menu"]

MAX_TEXT_CHARS = 32_000
"""Longest ``Inbound.text`` admission accepts (characters); decoders refuse longer text early."""


class Attachment(msgspec.Struct, frozen=True):
    kind: str
    ref: str
    mime: str | None = None
    name: str | None = None
    size: int | None = None


class Inbound(msgspec.Struct, frozen=True):
    """A platform event, decoded, with its identities kept apart.

    - ``transport`` + ``delivery_id``: what the transport redelivers; the dedupe key.
    - ``action_id``: an interaction (two clicks are two actions).
    - ``message_ref``: the platform message this event is, or the message a
      component is attached to; ``None`` for a slash command.
    - ``reply_to``: the message the user quoted.

    ``observes_labels`` says whether this event carries the chat's current labels
    (``None``: it does when it names any). A text frame that names none clears
    them; an interaction (whose body has no display labels) never touches them.
    ``reply_route`` names a reply path other than the chat ("interaction": answer
    through the interaction's follow-up), decided by the adapter that decoded it.
    ``replayable``: the platform hands this event back after a restart that lost it
    (Discord's catch-up reads a channel's history after the last admitted message; Telegram
    redelivers every update the adapter has not confirmed, and it confirms only once the
    intake ``settle``s), so a power cut may take its admission (``AdmitRequest.redoable``).
    It is not stored: it only matters while the event is admitted.
    """

    transport: str
    delivery_id: str
    source: Source
    text: str
    kind: InboundKind = "text"
    action_id: str | None = None
    message_ref: str | None = None
    reply_to: str | None = None
    received_at: float = 0.0
    attachments: tuple[Attachment, ...] = ()
    payload: dict[str, Any] = msgspec.field(default_factory=dict)
    observes_labels: bool | None = None
    reply_route: str | None = None
    replayable: bool = False

    def labels_observed(self) -> bool:
        if self.observes_labels is not None:
            return self.observes_labels
        return self.source.chat_name is not None or self.source.chat_topic is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "transport": self.transport,
            "delivery_id": self.delivery_id,
            "source": self.source.to_dict(),
            "text": self.text,
            "kind": self.kind,
            "action_id": self.action_id,
            "message_ref": self.message_ref,
            "reply_to": self.reply_to,
            "received_at": self.received_at,
            "attachments": [
                {"kind": a.kind, "ref": a.ref, "mime": a.mime, "name": a.name, "size": a.size}
                for a in self.attachments
            ],
            "payload": self.payload,
            "observes_labels": self.observes_labels,
            "reply_route": self.reply_route,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Inbound:
        values = dict(data)
        values["source"] = Source.from_dict(values["source"])
        values["attachments"] = tuple(Attachment(**a) for a in values.get("attachments") or ())
        return cls(**values)
