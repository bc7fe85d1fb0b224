"""The relay's ``draft`` lane: a native stream ("the stream is the message") for chats whose
descriptor advertises ``supports_draft_streaming`` and the ``draft`` op (a Slack-shaped chat).

Each turn's stream has a draft id of its own: a per-process random 49-bit seed, then
incremented, so two gateway incarnations never share one and ids stay below 2^53 (the
connector is JavaScript). Frames carry the cumulative text (prefix-stable, no cursor) and
the triggering message's id (``reply_to_message_id``), so frames and the final resolve to
the same turn. The final's edit of the stream's message seals it (``draft`` with
``final``): the draft is marked sealed before the frame leaves, so a straggling frame of
that turn is a no-op and never reopens it; a seal that fails without a definite refusal
reopens it for the delivery retry (the same idempotent frame); a definite refusal is
``Rejected`` and ``deliver_final`` sends the final as a plain message. The map of known
drafts is bounded (oldest dropped first).
"""

from __future__ import annotations

import asyncio
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from chatgate.domain.outbound import Delivered, DeliveryResult, Rejected
from chatgate.platforms.relay.frames import DraftAction

MAX_DRAFTS = 512
Request = Callable[[DraftAction], Awaitable[DeliveryResult]]


@dataclass
class _Draft:
    draft_id: int
    reply_to: str | None
    sealed: bool = False


class RelayDrafts:
    def __init__(self, request: Request) -> None:
        self._request = request
        self._next_id = secrets.randbits(49)
        self._drafts: OrderedDict[str, _Draft] = OrderedDict()

    def _frame(
        self, chat_id: str, draft: _Draft, text: str, metadata: Mapping[str, str], final: bool
    ) -> DraftAction:
        meta = dict(metadata)
        if draft.reply_to:
            meta["reply_to_message_id"] = draft.reply_to
        return DraftAction(chat_id=chat_id, draft_id=draft.draft_id, content=text, final=final, metadata=meta)

    async def start(
        self, chat_id: str, text: str, metadata: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        draft = _Draft(self._next_id, reply_to)
        self._next_id = (self._next_id + 1) % 2**53
        result = await self._request(self._frame(chat_id, draft, text, metadata, final=False))
        if isinstance(result, Delivered) and result.platform_message_id:
            self._drafts[result.platform_message_id] = draft
            while len(self._drafts) > MAX_DRAFTS:
                self._drafts.popitem(last=False)
        return result

    async def append(
        self, chat_id: str, message_id: str, text: str, metadata: Mapping[str, str]
    ) -> DeliveryResult:
        draft = self._drafts.get(message_id)
        if draft is None or draft.sealed:
            return Delivered(message_id)  # sealed or forgotten: a straggler never reopens it
        result = await self._request(self._frame(chat_id, draft, text, metadata, final=False))
        return Delivered(message_id) if isinstance(result, Delivered) else result

    def knows(self, message_id: str) -> bool:
        draft = self._drafts.get(message_id)
        return draft is not None and not draft.sealed

    async def seal(
        self, chat_id: str, message_id: str, text: str, metadata: Mapping[str, str]
    ) -> DeliveryResult:
        """The final (or a stopped turn's text) seals the stream; the caller checked ``knows``."""
        draft = self._drafts[message_id]
        draft.sealed = True  # before the frame leaves: nothing of this turn reopens it meanwhile
        try:
            result = await self._request(self._frame(chat_id, draft, text, metadata, final=True))
        except asyncio.CancelledError:
            draft.sealed = False
            raise
        if isinstance(result, Delivered):
            return Delivered(message_id)
        if not isinstance(result, Rejected):
            draft.sealed = False  # ambiguous or transient: the delivery retry sends the same frame
        return result
