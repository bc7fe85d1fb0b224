"""Human approval of dangerous tool calls: ask, wait, resolve first, then render.

``ApprovalBroker.decide`` is called by a turn's tool runner for each shell command. A
command the analysis proves safe (``domain.shell_proof``) that no danger rule matches, or
a proven one whose every matched rule was remembered for this session (or always), runs
at once; one that could not be proven always asks, and only "once". Otherwise the broker
records a durable approval, shows the prompt on the chat's adapter (buttons, or plain
text naming ``/approve`` and ``/deny``), and waits for an answer or the timeout. Either
way the outcome is whatever ``Approvals.resolve_approval`` (a compare-and-set)
recorded: a timeout that loses to a just-recorded answer obeys the answer, an answer
that loses to the timeout is told the prompt expired. Every text shown about a prompt
is computed from the recorded row.

Answers arrive through admission (``approvals.answers``, which commits the
answering event and the resolution in one transaction) or directly (``resolve``). Either
wakes the waiting call at once; answers never wait behind the session's running turn.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

import msgspec
from msgspec.structs import replace

from chatgate.domain.approvals import ApprovalRecord
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.outbound import Delivered, DeliveryResult, Rejected
from chatgate.domain.prompts import ExpiryReason, prompt_text
from chatgate.domain.shell.danger import Assessment, DangerRule, assess
from chatgate.domain.store_roles import Approvals, OutboxNotices
from chatgate.domain.tasks import cancel_and_wait
from chatgate.engine.approvals.policy import (
    Answerer,
    ApprovalSettings,
    Decision,
    ToolContext,
    check_answer,
    end_notice,
    feedback,
    not_run_reason,
    notice_draft,
    prompt_target,
    resolution_of,
)
from chatgate.engine.ports import Adapter, AnswerFeedback, prompting

log = logging.getLogger(__name__)


class _Waiter(msgspec.Struct):
    future: asyncio.Future[ApprovalRecord]
    session_key: str
    message_id: str | None = None
    """The prompt's platform message, known here before the store has it."""


class BrokerStore(Approvals, OutboxNotices, Protocol):
    """The roles the broker uses: approvals and grants, and the outbox for plain-text prompts."""


class ApprovalBroker:
    def __init__(
        self,
        store: BrokerStore,
        adapters: Mapping[str, Adapter],
        settings: ApprovalSettings = ApprovalSettings(),
        *,
        on_outbox: Callable[[], None] = lambda: None,
        stop_session: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self._store = store
        self._adapters = adapters
        self.settings = settings
        self._on_outbox = on_outbox
        self._stop_session = stop_session
        self._nonce = secrets.token_hex(4)
        self._counter = 0
        self._waiters: dict[str, _Waiter] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._shutting_down = False

    # ------------------------------------------------------------ asking

    def new_prompt_id(self) -> str:
        """``<per-process nonce>.<8 hex>``: unique, short enough for a 64-byte button token."""
        self._counter += 1
        return f"{self._nonce}.{self._counter:08x}"

    def is_waiting(self, prompt_id: str) -> bool:
        """Whether a call in this process still waits for this prompt's answer.

        A pending prompt nobody waits for belongs to a turn that was stopped (or failed)
        while its expiry is still being recorded: an answer must close it, not approve a
        call that will never run.
        """
        return prompt_id in self._waiters

    def waits_in(self, session_key: str) -> bool:
        """Whether a call of this session waits for an answer now (no store read: prompts only
        wait in this process, and start-up expires those a previous process left open)."""
        return any(w.session_key == session_key for w in self._waiters.values())

    def waiting(self) -> list[str]:
        """Prompt ids this process is waiting on (open prompts of running turns)."""
        return list(self._waiters)

    async def decide(
        self, ctx: ToolContext, call_id: str, command: str, workdir: Path, tool: str = "shell"
    ) -> Decision:
        """Run now, or ask a human and obey the recorded answer. Raises ``StoreUnavailable``."""
        settings = self.settings
        assessment = await asyncio.to_thread(assess, command, str(workdir), settings.rules, settings.allow)
        if not assessment.dangerous:
            return Decision(True)
        return await self._decide(ctx, call_id, tool, command, assessment)

    async def decide_rule(
        self, ctx: ToolContext, call_id: str, tool: str, shown: str, rule: DangerRule
    ) -> Decision:
        """Ask about a call that is not a shell command (an MCP tool whose policy is ``ask``):
        ``rule`` says why; an approval remembered for ``rule.key`` covers it."""
        return await self._decide(ctx, call_id, tool, shown, Assessment((rule,)))

    async def _decide(
        self, ctx: ToolContext, call_id: str, tool: str, command: str, assessment: Assessment
    ) -> Decision:
        # A remembered approval covers a rule, never a command that could not be analysed.
        if not assessment.unproven and await self._store.granted(ctx.session_key, assessment.keys):
            log.info(
                "dangerous call allowed by a remembered approval",
                extra={"session_key": ctx.session_key, "rules": list(assessment.keys), "call_id": call_id},
            )
            return Decision(True)
        record = await self._ask(ctx, call_id, tool, command, assessment)
        if record.state == "approved":
            return Decision(True, prompt_id=record.prompt_id)
        return Decision(False, not_run_reason(record, self.settings.timeout_s), record.prompt_id)

    async def _ask(
        self, ctx: ToolContext, call_id: str, tool: str, command: str, assessment: Assessment
    ) -> ApprovalRecord:
        prompt_id = self.new_prompt_id()
        waiter = _Waiter(asyncio.get_running_loop().create_future(), ctx.session_key)
        self._waiters[prompt_id] = waiter  # before the record exists: no answer can slip past
        try:
            record = self._record(ctx, prompt_id, call_id, tool, command, assessment)
            try:
                await self._store.create_approval(record)
                log.info(
                    "approval requested",
                    extra={
                        "prompt_id": prompt_id,
                        "session_key": ctx.session_key,
                        "rules": list(assessment.keys),
                        "via": record.prompt_via,
                    },
                )
                record = await self._show(record, assessment, waiter)
                return await self._wait(record, waiter)
            except asyncio.CancelledError:
                # The turn was stopped (/stop, /new, interrupt, shutdown): close the prompt so
                # nobody approves a call that no longer waits. Owned by the broker, not the turn.
                self._spawn(self._expire(record, "restart" if self._shutting_down else "stopped"))
                raise
            except Exception:
                # Showing or waiting failed (the store went away): the call does not run, so the
                # prompt must not stay open for a tap to "approve" later.
                self._spawn(self._expire(record, "stopped"))
                raise
        finally:
            self._waiters.pop(prompt_id, None)

    def _record(
        self, ctx: ToolContext, prompt_id: str, call_id: str, tool: str, command: str, assessment: Assessment
    ) -> ApprovalRecord:
        now = time.time()
        buttons = prompting(self._adapters.get(ctx.source.platform)) is not None
        tiers = assessment.offered_tiers
        return ApprovalRecord(
            prompt_id=prompt_id,
            session_key=ctx.session_key,
            session_id=ctx.session_id,
            inbox_seq=ctx.inbox_seq,
            call_id=call_id,
            tool=tool,
            command=command,
            rule_keys=assessment.keys,
            offered_tiers=tuple(tiers),
            requester_id=ctx.source.user_id,
            requester_name=ctx.source.user_name,
            requested_at=now,
            expires_at=now + self.settings.timeout_s,
            platform=ctx.source.platform,
            chat_id=ctx.source.chat_id or "",
            target=dict(ctx.target),
            reply_to=ctx.reply_to,
            prompt_text=prompt_text(
                command, assessment.explained, self.settings.timeout_s, tiers, buttons=buttons, tool=tool
            ),
            prompt_via="buttons" if buttons else "text",
        )

    async def _show(self, record: ApprovalRecord, assessment: Assessment, waiter: _Waiter) -> ApprovalRecord:
        """Buttons where the adapter has them; else (or if that fails) the text prompt via the outbox."""
        platform = prompting(self._adapters.get(record.platform))
        if platform is not None and record.prompt_via == "buttons":
            result = await self._call(
                platform.send_prompt(record.chat_id, record.prompt(), prompt_target(record))
            )
            if isinstance(result, Delivered):
                waiter.message_id = result.platform_message_id
                if result.platform_message_id:
                    await self._store.set_prompt_shown(
                        record.prompt_id, "buttons", result.platform_message_id
                    )
                return replace(record, prompt_message_id=result.platform_message_id)
            log.warning(
                "could not show the approval buttons (%s); sending the prompt as text", result,
                extra={"prompt_id": record.prompt_id, "platform": record.platform},
            )  # fmt: skip
            await self._store.set_prompt_shown(record.prompt_id, "text", None)
        tiers, timeout_s = record.offered_tiers, self.settings.timeout_s
        text = prompt_text(
            record.command, assessment.explained, timeout_s, tiers, buttons=False, tool=record.tool
        )
        await self._store.enqueue_outbox([notice_draft(record, f"prompt:{record.prompt_id}", text)])
        self._on_outbox()
        return replace(record, prompt_via="text", prompt_text=text)

    async def _wait(self, record: ApprovalRecord, waiter: _Waiter) -> ApprovalRecord:
        remaining = record.expires_at - time.time()
        try:
            return await asyncio.wait_for(asyncio.shield(waiter.future), timeout=max(0.0, remaining))
        except TimeoutError:
            pass
        ended = await self._expire(record, "timeout")
        return ended if ended is not None else record

    async def _expire(self, record: ApprovalRecord, reason: ExpiryReason) -> ApprovalRecord | None:
        """Record the expiry (if nothing else was recorded first), then render what was recorded."""
        end = replace(record, state="expired", reason=reason)
        notice = None
        if record.prompt_via == "text":
            notice = end_notice(end, self.settings.timeout_s)
        try:
            resolution = await self._store.resolve_approval(
                record.prompt_id, "expired", None, None, None, time.time(), reason=reason, notice=notice
            )
        except StoreUnavailable as exc:
            log.warning("could not record the end of approval %s: %s", record.prompt_id, exc)
            return None
        recorded = resolution.record
        if recorded is None:
            return None
        if resolution.won:
            log.info("approval expired", extra={"prompt_id": record.prompt_id, "reason": reason})
            if notice is not None:
                self._on_outbox()
        # A late tap may have recorded this very expiry first (and lost): render it anyway.
        if resolution.won or (reason == "timeout" and recorded.state == "expired"):
            await self._render(recorded)
        return recorded

    # ------------------------------------------------------------ answers

    def wake(self, record: ApprovalRecord) -> None:
        """A resolution was recorded: the waiting call (if in this process) proceeds now."""
        waiter = self._waiters.get(record.prompt_id)
        if waiter is not None and not waiter.future.done():
            waiter.future.set_result(record)

    def after_win(self, record: ApprovalRecord, *, replied: bool) -> None:
        """Wake the call and render the recorded outcome (``replied``: a command's reply
        already says it in text)."""
        log.info(
            "approval answered",
            extra={
                "prompt_id": record.prompt_id,
                "state": record.state,
                "tier": record.tier,
                "by": record.answered_by_id,
            },
        )
        waiter = self._waiters.get(record.prompt_id)
        if record.prompt_message_id is None and waiter is not None and waiter.message_id is not None:
            record = replace(record, prompt_message_id=waiter.message_id)  # answered before it was stored
        self.wake(record)
        if record.prompt_via == "buttons":
            self._spawn(self._render(record))
        elif not replied:
            self._spawn(self._enqueue_end(record))

    async def resolve(self, prompt_id: str, option_id: str, user: Answerer) -> AnswerFeedback:
        """Answer a prompt directly (not through an inbound event): check who answers,
        resolve first (compare-and-set), then render the recorded outcome.

        Raises ``AnswerRefused`` (nothing recorded) or ``StoreUnavailable``.
        """
        record = await self._store.get_approval(prompt_id)
        if record is None:
            return feedback(None, False, prompt_id, self.settings.timeout_s)
        check_answer(record, user, option_id, self.settings.approvers)
        outcome: Literal["approved", "denied"] = "denied" if option_id == "deny" else "approved"
        tier = None if option_id == "deny" else option_id
        resolution = await self._store.resolve_approval(
            prompt_id, outcome, tier, user.user_id, user.name, time.time()
        )
        if resolution.won and resolution.record is not None:
            self.after_win(resolution.record, replied=False)
        return feedback(resolution.record, resolution.won, prompt_id, self.settings.timeout_s)

    # ------------------------------------------------------------ rendering

    async def _enqueue_end(self, record: ApprovalRecord) -> None:
        try:
            await self._store.enqueue_outbox([end_notice(record, self.settings.timeout_s)])
        except StoreUnavailable as exc:
            log.warning("could not record the outcome notice of %s: %s", record.prompt_id, exc)
            return
        self._on_outbox()

    async def _render(self, record: ApprovalRecord) -> None:
        """Update the prompt's buttons to the recorded outcome (best effort: it is recorded)."""
        platform = prompting(self._adapters.get(record.platform))
        if platform is None or record.prompt_via != "buttons":
            return
        resolution = resolution_of(record, self.settings.timeout_s)
        result = await self._call(
            platform.resolve_prompt(record.chat_id, record.prompt(), resolution, prompt_target(record))
        )
        if not isinstance(result, Delivered):
            log.info("could not update prompt %s: %s", record.prompt_id, result)

    async def _call(self, operation: Awaitable[DeliveryResult]) -> DeliveryResult:
        try:
            async with asyncio.timeout(self.settings.render_timeout_s):
                return await operation
        except TimeoutError:
            return Rejected(f"no answer within {self.settings.render_timeout_s:g} s")
        except Exception as exc:  # an adapter bug must not decide an approval
            log.exception("prompt operation failed")
            return Rejected(f"{type(exc).__name__}: {exc}")

    # ------------------------------------------------------------ lifecycle

    async def recover(self) -> list[ApprovalRecord]:
        """At start-up: the turns that waited on open prompts died with the old process.

        Expire them, each with a notice to its chat in the same transaction; their turns
        are resumed by the scheduler and ask again.
        """
        now = time.time()
        expired = await self._store.expire_open_approvals(
            now,
            "restart",
            lambda rec: end_notice(rec, self.settings.timeout_s),
        )
        if expired:
            log.warning("expired %d approval prompt(s) left open by the previous gateway", len(expired))
            self._on_outbox()
        return expired

    def render_all(self, records: list[ApprovalRecord]) -> None:
        """Update the buttons of prompts that ended while no one could (after a restart)."""
        for record in records:
            if record.prompt_via == "buttons":
                self._spawn(self._render(record))

    async def begin_shutdown(self) -> None:
        """Stop the turns waiting on prompts: nobody can answer while intake is closed.

        Their prompts are expired ("restart") and their messages go back to the queue, so
        the next start asks again instead of holding the drain for its whole budget.
        """
        self._shutting_down = True
        if self._stop_session is None:
            return
        for key in {w.session_key for w in self._waiters.values()}:
            await self._stop_session(key)

    async def close(self, timeout: float = 5.0) -> None:
        """Let expiries and renders in flight finish (bounded), then cancel the rest."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
        await cancel_and_wait(list(self._tasks))

    def _spawn(self, coro: Awaitable[Any]) -> None:
        async def run() -> None:
            await coro

        task = asyncio.get_running_loop().create_task(run(), name="chatgate-approval")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
