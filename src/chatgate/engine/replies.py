"""Outbox drafts for a turn's replies: finals split at the platform's limit, notices.

Every draft has a stable idempotency key derived from the inbox item, so a
turn that is recorded twice (a retry after an ambiguous commit) records each
reply once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbound import Inbound
from chatgate.domain.outbound import FAILURE_KEY, PREVIEW_KEY, Capabilities
from chatgate.domain.outbox import OutboxDraft, OutboxKind
from chatgate.domain.source import Source, egress_target
from chatgate.domain.splitting import measure, split_text
from chatgate.domain.tool_steps import STEPS_KEY
from chatgate.domain.turns import Claim, TurnOutcome
from chatgate.domain.usage import USAGE_KEY, Usage

log = logging.getLogger(__name__)


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
    steps: str | None = None,
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
        if index == 0 and steps is not None:
            draft.target[STEPS_KEY] = steps  # the web chat's history shows them with the reply
        drafts.append(draft)
    return drafts


def given_up(
    claim: Claim, attempts: int, caps: Capabilities | None, route: dict[str, str], internal: bool
) -> TurnOutcome:
    """The stuck-loop guard's final: the items brought the process down too often."""
    last, key = claim.items[-1], claim.session_key
    seqs = tuple(i.seq for i in claim.items)
    text = (
        f"Sorry, I could not answer this message: the gateway stopped {attempts - 1} times "
        "while working on it, so I gave up instead of trying forever. Please send it again."
    )
    log.error("giving up on a turn", extra={"session_key": key, "seqs": seqs})
    if internal:  # the parent is told (the store forwards the apology), not the chat
        told = (HistoryEntry("assistant", text),)
        return TurnOutcome(key, claim.session_id, seqs, told, (), "given_up")
    source, reply_to = last.inbound.source, last.inbound.message_ref
    finals = final_drafts(source, key, last.seq, text, reply_to, caps, claim.stale_preview, route=route)
    return TurnOutcome(key, claim.session_id, seqs, (), tuple(finals), "given_up")
