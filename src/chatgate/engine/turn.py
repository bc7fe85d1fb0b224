"""One agent turn: history, pinned context, agent stream, and its outcome.

The turn does not write anything itself; it returns a ``TurnOutcome`` that the
scheduler commits in one transaction (transcript + inbox done + outbox final).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from chatgate.agents.base import (
    Agent,
    AgentError,
    AgentRequest,
    Final,
    HistoryEntry,
    TextDelta,
    TurnMessage,
)
from chatgate.domain.context import render_session_context, render_turn_input
from chatgate.domain.session_key import IsolationPolicy, is_shared_session
from chatgate.domain.source import Source
from chatgate.engine.ports import Adapter
from chatgate.store.base import Claim, OutboxDraft, Store, TurnOutcome

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TurnSettings:
    history_limit: int = 50
    max_attempts: int = 3
    timeout_seconds: float = 600.0
    draft_interval: float = 0.1


def egress_target(source: Source) -> dict[str, str]:
    """What an adapter needs besides the chat id to route a reply correctly."""
    target = {"thread_id": source.thread_id, "scope_id": source.scope_id, "user_id": source.user_id}
    return {k: v for k, v in target.items() if v}


class TurnRunner:
    def __init__(
        self,
        store: Store,
        agent: Agent,
        adapters: dict[str, Adapter],
        policy_for: Callable[[str], IsolationPolicy],
        settings: TurnSettings = TurnSettings(),
    ) -> None:
        self._store = store
        self._agent = agent
        self._adapters = adapters
        self._policy_for = policy_for
        self.settings = settings

    def _draft(
        self, source: Source, key: str, kind: str, text: str, idem: str, reply_to: str | None
    ) -> OutboxDraft:
        return OutboxDraft(
            idem_key=idem,
            platform=source.platform,
            chat_id=source.chat_id or "",
            session_key=key,
            kind=kind,  # type: ignore[arg-type]
            text=text,
            in_reply_to=reply_to,
            target=egress_target(source),
        )

    async def run(self, claim: Claim) -> TurnOutcome:
        items = claim.items
        last = items[-1]
        source = last.inbound.source
        seqs = tuple(i.seq for i in items)
        attempts = max(i.attempts for i in items)
        reply_to = last.inbound.message_ref
        if attempts > self.settings.max_attempts:
            text = (
                f"Sorry, I could not answer this message: the gateway stopped {attempts - 1} times "
                "while working on it, so I gave up instead of trying forever. Please send it again."
            )
            log.error("giving up on a turn", extra={"session_key": claim.session_key, "seqs": seqs})
            final = self._draft(source, claim.session_key, "final", text, f"final:{last.seq}", reply_to)
            return TurnOutcome(claim.session_key, claim.session_id, seqs, (), (final,), "given_up")

        outbox: list[OutboxDraft] = []
        if attempts > 1:
            notice = "The gateway restarted while answering this message; answering it again."
            outbox.append(
                self._draft(
                    source, claim.session_key, "notice", notice, f"notice:{last.seq}:{attempts}", reply_to
                )
            )
        policy = self._policy_for(source.platform)
        shared = is_shared_session(source, policy)
        labels = await self._store.chat_labels(source.platform, source.scope_id, source.chat_id or "")
        history = await self._store.history(claim.session_id, self.settings.history_limit)
        inputs = [
            render_turn_input(i.inbound.text, sender=i.inbound.source.user_name, shared=shared) for i in items
        ]
        request = AgentRequest(
            system=render_session_context(source, labels, shared=shared),
            history=tuple(history),
            messages=tuple(
                TurnMessage(
                    text=i.inbound.text,
                    sender=i.inbound.source.user_name,
                    message_ref=i.inbound.message_ref,
                    received_at=i.inbound.received_at,
                )
                for i in items
            ),
            model_input="\n".join(inputs),
            session_key=claim.session_key,
        )
        try:
            text, outcome = await asyncio.wait_for(
                self._stream(request, source, reply_to), self.settings.timeout_seconds
            )
        except TimeoutError:
            text = f"Sorry, the agent did not finish within {self.settings.timeout_seconds:.0f} seconds."
            outcome = "timeout"
        outbox.append(self._draft(source, claim.session_key, "final", text, f"final:{last.seq}", reply_to))
        transcript = [HistoryEntry("user", model_input) for model_input in inputs]
        transcript.append(HistoryEntry("assistant", text))
        return TurnOutcome(
            claim.session_key, claim.session_id, seqs, tuple(transcript), tuple(outbox), outcome
        )

    async def _stream(self, request: AgentRequest, source: Source, reply_to: str | None) -> tuple[str, str]:
        adapter = self._adapters.get(source.platform)
        drafts = adapter is not None and adapter.capabilities.drafts
        so_far = ""
        # The first preview waits one interval too: a reply that is done by then needs no draft.
        last_draft = time.monotonic()
        async for event in self._agent.stream(request):
            if isinstance(event, TextDelta):
                so_far += event.text
                now = time.monotonic()
                if drafts and adapter is not None and now - last_draft >= self.settings.draft_interval:
                    last_draft = now
                    try:
                        await adapter.draft(source, reply_to, so_far)
                    except Exception:  # a preview is best effort; the final is durable
                        log.debug("draft failed", exc_info=True)
            elif isinstance(event, Final):
                return event.text, "ok"
            elif isinstance(event, AgentError):
                return f"Sorry, the agent failed: {event.message}", "agent_error"
        return so_far or "Sorry, the agent returned no answer.", "agent_error"
