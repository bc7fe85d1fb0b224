"""What keeps a turn's previews back until the chat is ready for them, and the notices a turn
shows before its output.

A preview goes straight to the platform; a final goes through the outbox. So a preview must
wait while the chat still has replies on their way (it would land above the earlier turn's
final); a turn run again after its process died first records "the gateway restarted"
(taking over the preview the dead process left) and waits until that notice is shown; and a
turn whose files did not all come through records those notices before the agent runs and
waits until they are shown, so the user reads why before the answer starts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Protocol

from chatgate.domain.errors import LeaseLost
from chatgate.domain.outbound import PREVIEW_KEY
from chatgate.domain.outbox import OutboxDraft, OutboxStatus
from chatgate.domain.source import egress_target
from chatgate.domain.store_roles import TurnJournal
from chatgate.domain.turns import Claim
from chatgate.engine.ports import Adapter, EditablePlatform
from chatgate.engine.replies import reply_draft

RESUME_NOTICE = "The gateway restarted while answering this message; answering it again."
Hold = Callable[[], Awaitable[bool]]


class HoldStore(TurnJournal, Protocol):
    async def outbox_status(self, idem_key: str) -> OutboxStatus | None: ...

    async def undelivered_in_chat(self, platform: str, chat_id: str) -> int: ...


class PreviewHolds:
    def __init__(
        self, store: HoldStore, adapters: dict[str, Adapter], owner: str, on_outbox: Callable[[], None]
    ) -> None:
        self._store = store
        self._adapters = adapters
        self._owner = owner
        self._on_outbox = on_outbox

    async def hold(self, claim: Claim, route: dict[str, str], attempts: int) -> Hold:
        """What keeps this turn's previews back: a resumed turn's notice, else earlier replies."""
        if attempts > 1:
            return await self._resume(claim, route)
        if claim.stale_preview:
            await self._delete_stale(claim)
        source = claim.items[-1].inbound.source
        return self._behind_earlier_replies(source.platform, source.chat_id or "")

    async def _resume(self, claim: Claim, route: dict[str, str]) -> Hold:
        """Record the notice of a resumed turn now, before it shows anything; it takes over the
        preview a dead process left. Returns the hold that keeps previews back until it is shown."""
        last = claim.items[-1]
        source = last.inbound.source
        attempts = max(i.attempts for i in claim.items)
        idem = f"notice:{last.seq}:{attempts}"
        notice = reply_draft(
            source, claim.session_key, "notice", RESUME_NOTICE, idem, last.inbound.message_ref, route
        )
        if claim.stale_preview:
            notice.target[PREVIEW_KEY] = claim.stale_preview
        if not await self._store.record_notices(self._owner, claim.session_key, [notice]):
            raise LeaseLost(f"lease on {claim.session_key} lost before the turn started")
        self._on_outbox()
        return self._until_shown([idem])

    async def shown_first(self, claim: Claim, notices: list[OutboxDraft], hold: Hold) -> Hold:
        """Record ``notices`` now, before the agent runs: they precede the turn's output in the
        chat's order, and its previews wait (``hold`` and then these) until they are shown."""
        if not notices:
            return hold
        if not await self._store.record_notices(self._owner, claim.session_key, notices):
            raise LeaseLost(f"lease on {claim.session_key} lost before the turn started")
        self._on_outbox()
        shown = self._until_shown([n.idem_key for n in notices])

        async def held() -> bool:
            return await hold() or await shown()

        return held

    def _until_shown(self, idems: list[str]) -> Hold:
        async def held() -> bool:
            for idem in idems:
                if await self._store.outbox_status(idem) not in ("sent", "failed", None):
                    return True
            return False

        return held

    def _behind_earlier_replies(self, platform: str, chat_id: str) -> Hold:
        """Previews wait while the chat still has replies on their way to the platform: a preview
        goes straight out, and would otherwise land above the earlier turn's final."""

        async def held() -> bool:
            return await self._store.undelivered_in_chat(platform, chat_id) > 0

        return held

    async def _delete_stale(self, claim: Claim) -> None:
        """A preview a dead process left for items that are gone (cancelled, reset): remove it."""
        source = claim.items[-1].inbound.source
        adapter = self._adapters.get(source.platform)
        if adapter is None or not adapter.capabilities.edit or claim.stale_preview is None:
            return
        platform: EditablePlatform = adapter  # type: ignore[assignment]
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                platform.delete_message(source.chat_id or "", claim.stale_preview, egress_target(source)),
                10.0,
            )
