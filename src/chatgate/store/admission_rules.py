"""What admission records beside the event, decided once for both backends.

The backends write admission's statements in their own order (PostgreSQL locks the session
row before it inserts the event, so a session's ``seq``s are commit-ordered; SQLite's one
writer needs no lock); what the transaction records as the reply is this rule.
"""

from __future__ import annotations

from msgspec.structs import replace

from chatgate.domain.approvals import ApprovalResolution
from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.outbox import OutboxDraft


def reply_of(req: AdmitRequest, waiting: int, resolution: ApprovalResolution | None) -> OutboxDraft | None:
    """The command's reply, with the number of waiting messages it cancelled (``{cancelled}``),
    or an approval answer's rendering of how its prompt actually ended."""
    if req.reply is None:
        return None
    reply = req.reply
    if req.cancel_queued:
        reply = replace(reply, text=reply.text.replace("{cancelled}", str(waiting)))
    if resolution is not None and req.answer is not None and req.answer.render is not None:
        reply = replace(reply, text=req.answer.render(resolution))
    return reply
