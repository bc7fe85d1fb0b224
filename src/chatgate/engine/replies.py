"""Outbox drafts for a turn's replies: finals split at the platform's limit, notices.

Every draft has a stable idempotency key derived from the inbox item, so a
turn that is recorded twice (a retry after an ambiguous commit) records each
reply once.
"""

from __future__ import annotations

from collections.abc import Mapping

from chatgate.domain.inbound import Inbound
from chatgate.domain.outbound import FAILURE_KEY, PREVIEW_KEY, Capabilities
from chatgate.domain.outbox import OutboxDraft, OutboxKind
from chatgate.domain.source import Source, egress_target
from chatgate.domain.splitting import measure, split_text
from chatgate.domain.usage import USAGE_KEY, Usage


def reply_draft(
    source: Source,
    session_key: str,
    kind: OutboxKind,
    text: str,
    idem_key: str,
    reply_to: str | None,
    route: Mapping[str, str] | None = None,
) -> OutboxDraft:
    return OutboxDraft(
        idem_key=idem_key,
        platform=source.platform,
        chat_id=source.chat_id or "",
        session_key=session_key,
        kind=kind,
        text=text,
        in_reply_to=reply_to,
        target={**egress_target(source), **(route or {})},
    )


def command_reply(inbound: Inbound, session_key: str, text: str) -> OutboxDraft:
    """The inline reply to a command, keyed by its delivery so a redelivery replies once."""
    idem = f"cmd:{inbound.transport}:{inbound.delivery_id}"
    return reply_draft(inbound.source, session_key, "command", text, idem, inbound.message_ref)


def final_drafts(
    source: Source,
    session_key: str,
    seq: int,
    text: str,
    reply_to: str | None,
    capabilities: Capabilities | None,
    preview_message_id: str | None,
    reserve: str = "",
    route: Mapping[str, str] | None = None,
    failure: str | None = None,
    usage: Usage | None = None,
) -> list[OutboxDraft]:
    """The final as one row per part, in order; the first part takes over the streamed preview.

    Parts leave room for ``reserve`` (the duplicate marker a resend may prefix), so a
    resent part still fits the platform's limit.
    """
    caps = capabilities or Capabilities()
    room = caps.max_length - (0 if caps.confirms_receipt else measure(reserve, caps.length_unit))
    parts = split_text(text, room, caps.length_unit) or [text]
    drafts = []
    for index, part in enumerate(parts):
        idem = f"final:{seq}" if index == 0 else f"final:{seq}:{index}"
        draft = reply_draft(source, session_key, "final", part, idem, reply_to, route)
        if index == 0 and preview_message_id:
            draft.target[PREVIEW_KEY] = preview_message_id
        if failure:
            draft.target[FAILURE_KEY] = failure
        if index == 0 and usage is not None:
            draft.target[USAGE_KEY] = usage.dumps()  # the API reads it back with the answer
        drafts.append(draft)
    return drafts
