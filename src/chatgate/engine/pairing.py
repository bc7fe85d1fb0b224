"""Offering a stranger a pairing code: the store decides the code and when to reply; this
words the reply and records it with the code (one transaction), so a code is never issued
without its message or sent twice for one delivery."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from chatgate.domain.inbound import Inbound
from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.pairing import PairingLimits, PairingRequest
from chatgate.domain.store_roles import Pairing
from chatgate.engine.replies import reply_draft

log = logging.getLogger(__name__)


def pairing_text(request: PairingRequest) -> str:
    seconds = round(request.expires_at - request.created_at)
    minutes = round(seconds / 60)
    lifetime = f"{seconds} seconds" if seconds < 120 else f"{minutes} minutes"
    return (
        "I don't know you yet. To talk to the agent here, send this pairing code to the operator:\n\n"
        f"{request.code}\n\n"
        f"They approve it with: chatgate pairing approve {request.code}\n"
        f"The code expires in {lifetime}."
    )


class PairingOffers:
    def __init__(self, store: Pairing, limits: PairingLimits, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._limits = limits
        self._clock = clock

    async def offer(self, inbound: Inbound, session_key: str) -> tuple[str, bool]:
        """Issue (or repeat) the sender's code; returns the refusal reason and whether it was replied."""
        source = inbound.source
        assert source.user_id is not None

        def notice(request: PairingRequest) -> OutboxDraft:
            idem = f"pairing:{inbound.transport}:{inbound.delivery_id}"
            text = pairing_text(request)
            return reply_draft(source, session_key, "notice", text, idem, inbound.message_ref)

        issue = await self._store.request_pairing(
            source.platform,
            source.user_id,
            source.user_name,
            source.chat_id,
            self._clock(),
            self._limits,
            notice,
        )
        who = f"{source.platform} user {source.user_id!r}"
        if issue.request is None:
            log.warning(
                "pairing: %s gets no code: %d codes are already waiting for approval on %s",
                who,
                self._limits.max_pending,
                source.platform,
            )
            return f"{who} is not paired, and the pending pairing codes are at their limit", False
        if issue.replied:
            log.info(
                "pairing: %s was sent code %s (approve: chatgate pairing approve %s)",
                who,
                issue.request.code,
                issue.request.code,
            )
        return f"{who} is not paired; a pairing code is waiting for the operator's approval", issue.replied
