"""Admission: authorize, canonicalize, key once, commit; control commands inline.

Only when ``admit`` returns has the event been committed, and only then may an
adapter acknowledge it upstream.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from msgspec.structs import replace

from chatgate.domain.commands import parse_command
from chatgate.domain.errors import ScopeConflict, StoreUnavailable
from chatgate.domain.inbound import MAX_TEXT_CHARS, Inbound
from chatgate.domain.inbox import AdmitRequest, AdmitResult
from chatgate.domain.pairing import PairingLimits
from chatgate.domain.session_key import IsolationPolicy, PolicyOverride, resolve_policy, session_key
from chatgate.domain.source import Source, canonical_source
from chatgate.domain.store_roles import ApprovalReads, Inbox, OutboxNotices, Pairing, Transcript
from chatgate.domain.turns import Claim, ClaimTerms
from chatgate.engine.approvals import AnswerIntake, AnswerRefused, ApprovalBroker, prompt_response
from chatgate.engine.authz import Authorizer
from chatgate.engine.commands import COMMAND_TABLE, CommandHandler, ControlCommand
from chatgate.engine.intake import AdmissionRefused
from chatgate.engine.metrics import GatewayMetrics
from chatgate.engine.pairing import PairingOffers
from chatgate.engine.ports import Admitted, AnswerFeedback
from chatgate.engine.replies import command_reply, reply_draft
from chatgate.engine.scope_bindings import ScopeBindings

log = logging.getLogger(__name__)

WAITING_FOR_APPROVAL = (
    "A command is waiting for approval. Answer it first: the buttons, or /approve or /deny."
    " Your message is queued and will be answered after that; it was not taken as an answer."
)


class AdmissionStore(Inbox, Transcript, ApprovalReads, OutboxNotices, Pairing, Protocol):
    """The roles admission uses: it commits to the inbox, reads a session for ``/status``,
    finds a chat's open prompts, records notices outside a turn, and offers pairing codes."""


class SessionSlots(Protocol):
    """The scheduler's offer of a free slot, taken by the admission's own write (``Scheduler.offer``)."""

    def offer(self) -> ClaimTerms | None: ...

    def adopt(self, claim: Claim | None) -> None: ...


class Admission:
    def __init__(
        self,
        store: AdmissionStore,
        authorizer: Authorizer,
        metrics: GatewayMetrics,
        *,
        profile: str | None = None,
        isolation: IsolationPolicy = IsolationPolicy(),
        overrides: Mapping[str, PolicyOverride] | None = None,
        on_queued: Callable[[str], None] = lambda key: None,
        on_reply: Callable[[], None] = lambda: None,
        stop_session: Callable[[str], Awaitable[None]] | None = None,
        approvals: ApprovalBroker | None = None,
        pairing: PairingLimits = PairingLimits(),
        handlers: Mapping[str, CommandHandler] | None = None,
    ) -> None:
        self._store = store
        self._authz = authorizer
        self._metrics = metrics
        self._profile = profile
        self._isolation = isolation
        self._overrides = dict(overrides or {})
        self._on_queued = on_queued
        self._on_reply = on_reply
        self._stop_session = stop_session
        self._desk = AnswerIntake(store, approvals) if approvals is not None else None
        self._approvals = approvals
        self._scopes = ScopeBindings(store)
        self._pairing = PairingOffers(store, pairing)
        self._handlers = dict(handlers or {})
        self._slots: SessionSlots | None = None

    def use_slots(self, slots: SessionSlots) -> None:
        """Claim an idle session in the write that queues its event, when ``slots`` offers room."""
        self._slots = slots

    def add_handler(self, name: str, handler: CommandHandler) -> None:
        """Answer command ``name`` with ``handler`` (a feature built after admission, e.g. schedules)."""
        self._handlers[name] = handler

    def policy_for(self, platform: str) -> IsolationPolicy:
        return resolve_policy(platform, self._isolation, self._overrides)

    async def admit(self, inbound: Inbound) -> Admitted:
        started = time.perf_counter()
        try:
            admitted = await self._admit(inbound)
        except UnicodeEncodeError as exc:
            # Every lane can carry a lone surrogate (a "\ud800" JSON escape): it cannot be stored as
            # UTF-8, so it is refused like any bad input instead of failing the adapter's intake.
            reason = f"not valid Unicode, cannot be stored as UTF-8: {exc}"
            raise self._refuse(inbound.source.platform, "invalid_text", reason) from exc
        self._metrics.admission_seconds.labels(inbound.source.platform).observe(time.perf_counter() - started)
        return admitted

    async def make_durable(self) -> None:
        """``InboundSink.make_durable``: the store's (a relaxed admission may not be on the disk yet)."""
        await self._store.make_durable()

    async def _admit(self, inbound: Inbound) -> Admitted:
        platform = inbound.source.platform
        try:
            source = canonical_source(inbound.source)
        except ValueError as exc:
            raise self._refuse(platform, "invalid_source", str(exc)) from exc
        if not inbound.delivery_id:
            raise self._refuse(platform, "invalid_delivery_id", "delivery_id must not be empty")
        if len(inbound.text) > MAX_TEXT_CHARS:
            raise self._refuse(
                platform,
                "too_large",
                f"text is {len(inbound.text)} characters; the limit is {MAX_TEXT_CHARS}",
            )
        inbound = replace(inbound, source=source)
        denied = await self._authz.authorize(source)
        if denied is not None and self._authz.offers_pairing(source):
            key = session_key(source, self.policy_for(platform), self._profile)
            reason, replied = await self._pairing.offer(inbound, key)
            if replied:
                self._on_reply()
            raise self._refuse(platform, "pairing_required", reason)
        if denied is not None:
            raise self._refuse(platform, "unauthorized", denied)
        try:
            return await self._commit(inbound, await self._key_for(source))
        except ScopeConflict as exc:  # another scope took the contract key just now
            self._scopes.forget(exc.session_key)
        try:
            return await self._commit(inbound, await self._key_for(source))
        except ScopeConflict as exc:  # an unscoped event for a scoped session: whose is it?
            reason = "the chat's session belongs to a workspace and this event names none"
            raise self._refuse(platform, "scope_conflict", reason) from exc

    async def _key_for(self, source: Source) -> str:
        """The contract's key, unless a session under it already belongs to another scope."""
        policy = self.policy_for(source.platform)
        key = session_key(source, policy, self._profile)
        if source.scope_id and await self._scopes.bound_elsewhere(key, source.scope_id):
            scoped = session_key(source, policy, self._profile, scoped=True)
            log.warning(
                "a channel id of this scope is already a session of another scope; keyed with its scope",
                extra={"platform": source.platform, "session_key": scoped},
            )
            return scoped
        return key

    async def _commit(self, inbound: Inbound, key: str) -> Admitted:
        platform = inbound.source.platform
        try:
            answer = prompt_response(inbound)
        except ValueError as exc:
            raise self._refuse(platform, "invalid_answer", str(exc)) from exc
        if answer is not None:
            return await self._answer_button(inbound, key, *answer)
        command = parse_command(inbound.text) if inbound.kind in ("text", "command") else None
        if command is not None:
            entry = COMMAND_TABLE[command.name]
            if entry.answers_approval and self._desk is not None:
                result, feedback = await self._desk.command(inbound, key, command)
                return self._admitted_inline(inbound, result, feedback)
            handler = self._handlers.get(command.name)
            text = await handler(inbound, key, command.args) if handler is not None else None
            return await self._control(inbound, key, entry, text)
        request = AdmitRequest(inbound=inbound, session_key=key, redoable=inbound.replayable)
        result = await self._admit_queued(request)
        if result.new:
            self._metrics.admitted.labels(platform).inc()
            if result.claim is None:
                self._on_queued(key)
            if self._approvals is not None and self._approvals.waits_in(key):
                await self._tell_if_waiting_for_approval(inbound, key)
        else:
            self._metrics.duplicates.labels(platform).inc()
        return Admitted(new=result.new, seq=result.seq, session_key=result.session_key)

    async def _admit_queued(self, request: AdmitRequest) -> AdmitResult:
        """The store's admission, claiming the session too when the scheduler has room.

        The claim is handed to the scheduler as soon as the write is over, whoever still awaits
        it: an intake cancelled meanwhile must not leave a session leased with no worker."""
        slots = self._slots
        terms = slots.offer() if slots is not None else None
        if slots is None or terms is None:
            return await self._store.admit(request)
        write = asyncio.ensure_future(self._store.admit(replace(request, claim=terms)))

        def adopt(done: asyncio.Future[AdmitResult]) -> None:
            failed = done.cancelled() or done.exception() is not None
            slots.adopt(None if failed else done.result().claim)

        write.add_done_callback(adopt)
        return await asyncio.shield(write)

    async def admit_internal(
        self, inbound: Inbound, key: str | None = None, *, check_sender: bool = False
    ) -> Admitted:
        """Admit an event the gateway itself produced (a schedule's firing, a webhook, a task).

        It was authorized where it came from (the operator's config, a signed request, a
        user's command), so only ``check_sender`` asks the authorizer again (fails closed: a
        user whose access was revoked wakes nobody). ``key`` names the session outright;
        without it the key is derived from the source like any event's. Never a command.
        """
        try:
            source = canonical_source(inbound.source)
        except ValueError as exc:
            raise self._refuse(inbound.source.platform, "invalid_source", str(exc)) from exc
        if not inbound.delivery_id or len(inbound.text) > MAX_TEXT_CHARS:
            raise self._refuse(source.platform, "invalid_event", "empty delivery id or text too long")
        inbound = replace(inbound, source=source)
        if check_sender and (denied := await self._authz.authorize(source)) is not None:
            raise self._refuse(source.platform, "unauthorized", denied)
        key = key or await self._key_for(source)
        try:
            result = await self._store.admit(AdmitRequest(inbound=inbound, session_key=key))
        except UnicodeEncodeError as exc:  # a lone surrogate (a JSON escape) cannot be stored as UTF-8
            raise self._refuse(source.platform, "invalid_text", f"not valid Unicode: {exc}") from exc
        if result.new:
            self._metrics.admitted.labels(source.platform).inc()
            self._on_queued(key)
        return Admitted(new=result.new, seq=result.seq, session_key=result.session_key)

    def key_for_source(self, source: Source) -> str:
        """The session key an event from ``source`` gets (the contract key; see ``_key_for``)."""
        return session_key(canonical_source(source), self.policy_for(source.platform), self._profile)

    async def _tell_if_waiting_for_approval(self, inbound: Inbound, key: str) -> None:
        """Words are not an answer: say so at once, instead of leaving the sender to wait for a timeout.

        Best effort and idempotent (keyed by the delivery): the message itself is committed already.
        """
        try:
            waiting = [
                a
                for a in await self._store.open_approvals(
                    inbound.source.platform, inbound.source.chat_id or ""
                )
                if a.session_key == key
            ]
            if not waiting:
                return
            idem = f"awaiting-approval:{inbound.transport}:{inbound.delivery_id}"
            notice = reply_draft(
                inbound.source, key, "notice", WAITING_FOR_APPROVAL, idem, inbound.message_ref
            )
            await self._store.enqueue_outbox([notice])
        except StoreUnavailable as exc:
            log.info("could not tell %s that an approval is waiting: %s", key, exc)
            return
        self._on_reply()

    async def interrupt(self, session_key: str, reason: str) -> int:
        """Stop a session's running turn from outside a chat (a relay's ``interrupt_inbound``).

        Its items are cancelled (else the scheduler would run them again); waiting messages stay.
        """
        cancelled = await self._store.cancel_running(session_key, f"cancelled by {reason}")
        if self._stop_session is not None:
            await self._stop_session(session_key)
        return cancelled

    async def _answer_button(self, inbound: Inbound, key: str, prompt_id: str, option_id: str) -> Admitted:
        """A prompt's button: answered here, inline, never queued behind the waiting turn."""
        if self._desk is None:
            raise self._refuse(inbound.source.platform, "invalid_answer", "approvals are not enabled here")
        try:
            result, feedback = await self._desk.button(inbound, key, prompt_id, option_id)
        except AnswerRefused as exc:
            raise self._refuse(inbound.source.platform, exc.code, exc.message) from exc
        return self._admitted_inline(inbound, result, feedback)

    def _admitted_inline(
        self, inbound: Inbound, result: AdmitResult, feedback: AnswerFeedback | None
    ) -> Admitted:
        if result.new:
            self._metrics.admitted.labels(inbound.source.platform).inc()
            self._on_reply()
        else:
            self._metrics.duplicates.labels(inbound.source.platform).inc()
        return Admitted(new=result.new, seq=result.seq, session_key=result.session_key, answer=feedback)

    def _refuse(self, platform: str, code: str, message: str) -> AdmissionRefused:
        self._metrics.refused.labels(platform or "unknown", code).inc()
        log.warning("admission refused", extra={"platform": platform, "code": code, "reason": message})
        return AdmissionRefused(code, message)

    async def _control(
        self, inbound: Inbound, key: str, command: ControlCommand, text: str | None = None
    ) -> Admitted:
        if text is None:
            text = await command.reply(key, self._store)
        reply = command_reply(inbound, key, text)
        request = AdmitRequest(
            inbound=inbound,
            session_key=key,
            queued=False,
            reply=reply,
            cancel_queued=command.stops,
            reset_session=command.resets,
        )
        result = await self._store.admit(request)
        if result.new:
            self._metrics.admitted.labels(inbound.source.platform).inc()
            if command.stops and self._stop_session is not None:
                await self._stop_session(key)
            self._on_reply()
        else:
            self._metrics.duplicates.labels(inbound.source.platform).inc()
        return Admitted(new=result.new, seq=result.seq, session_key=result.session_key)
