"""The one code path that puts a final on an editable platform.

A final row may carry the streamed preview's message id: then the final edits
that message (removing the cursor), and a new message is sent only when no
editable message exists. A final counts as delivered only when the platform
acknowledged the operation that carried exactly the final text.
"""

from __future__ import annotations

import contextlib

from chatgate.domain.outbound import Delivered, DeliveryResult, Rejected
from chatgate.domain.outbox import OutboxRow
from chatgate.engine.ports import EditablePlatform

PREVIEW_KEY = "preview_message_id"


async def deliver_final(platform: EditablePlatform, row: OutboxRow, duplicate_marker: str) -> DeliveryResult:
    target = {k: str(v) for k, v in row.target.items() if k != PREVIEW_KEY}
    preview = row.target.get(PREVIEW_KEY)
    if preview:
        edited = await platform.edit_message(row.chat_id, str(preview), row.text, target)
        if not isinstance(edited, Rejected):
            # Delivered, or retry/ambiguous: an edit is idempotent, so retrying it is always safe.
            return Delivered(str(preview)) if isinstance(edited, Delivered) else edited
        # The preview cannot be edited (deleted, too old): the final becomes a new message.
    text = row.text
    if row.possibly_duplicate and duplicate_marker:
        text = f"{duplicate_marker}{text}"
    sent = await platform.send_message(row.chat_id, text, target, row.in_reply_to)
    if preview and isinstance(sent, Delivered):
        # The stranded preview still shows a cursor; take it away (best effort).
        with contextlib.suppress(Exception):
            await platform.delete_message(row.chat_id, str(preview), target)
    return sent
