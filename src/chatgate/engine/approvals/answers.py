"""Approval answers that arrive as inbound events: a prompt's button, ``/approve``, ``/deny``.

They are answered at admission, never queued behind the session's turn (which is the
one waiting for them). Each answer is committed together with its event in one
transaction (``AdmitRequest.answer``), so a redelivered event is recognized and
resolves nothing, whatever prompt has opened since. Then, and only then, the outcome
that was recorded is rendered.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from chatgate.domain.approvals import ApprovalAnswer, ApprovalRecord, ApprovalResolution
from chatgate.domain.commands import Command
from chatgate.domain.inbound import Inbound
from chatgate.domain.inbox import AdmitRequest, AdmitResult
from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.prompts import OPTION_IDS, PROMPT_ID_RE
from chatgate.domain.store_roles import ApprovalReads, Inbox
from chatgate.engine.approvals.broker import ApprovalBroker
from chatgate.engine.approvals.policy import (
    Answerer,
    AnswerRefused,
    check_answer,
    feedback,
    may_answer,
    reply_text,
)
from chatgate.engine.ports import AnswerFeedback
from chatgate.engine.replies import command_reply

log = logging.getLogger(__name__)

COMMAND_TIERS = {"": "once", "once": "once", "session": "session", "always": "always"}
USAGE = "Usage: /approve (once), /approve session, /approve always, or /deny."


def prompt_response(inbound: Inbound) -> tuple[str, str] | None:
    """``(prompt_id, option_id)`` when the event answers a prompt; ``ValueError`` when it
    claims to but is malformed. Only a structured ``prompt_response`` counts: a text
    message is never an answer, whatever it says."""
    raw: Any = inbound.payload.get("prompt_response") if inbound.payload else None
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError("prompt_response must be an object with prompt_id and option_id")
    prompt_id, option_id = raw.get("prompt_id"), raw.get("option_id")
    if not isinstance(prompt_id, str) or not PROMPT_ID_RE.fullmatch(prompt_id):
        raise ValueError(f"prompt_response.prompt_id {str(prompt_id)[:60]!r} is not a prompt id")
    if option_id not in OPTION_IDS:
        raise ValueError(
            f"prompt_response.option_id {str(option_id)[:20]!r} is not one of {list(OPTION_IDS)}"
        )
    return prompt_id, str(option_id)


class AnswerStore(Inbox, ApprovalReads, Protocol):
    """The roles an answer needs: the prompt it answers, and the inbox its event commits to."""


class AnswerIntake:
    """Admission's side of approvals: commit an answer with its event, then wake and render."""

    def __init__(self, store: AnswerStore, broker: ApprovalBroker) -> None:
        self._store = store
        self._broker = broker

    @property
    def _timeout(self) -> float:
        return self._broker.settings.timeout_s

    def _answer(self, prompt_id: str, option_id: str, who: Answerer, replied: bool) -> ApprovalAnswer:
        timeout = self._timeout

        def render(resolution: ApprovalResolution) -> str:
            return reply_text(resolution.record, resolution.won, timeout)

        deny = option_id == "deny"
        return ApprovalAnswer(
            prompt_id,
            "denied" if deny else "approved",
            None if deny else option_id,
            who.user_id,
            who.name,
            render if replied else None,
            # Not waiting here: its turn was stopped between the tap and now, or (a fleet) it
            # waits on another process; the store tells which, and records the end if stopped.
            waiting_here=self._broker.is_waiting(prompt_id),
        )

    def _settle(self, result: AdmitResult, prompt_id: str, replied: bool) -> AnswerFeedback | None:
        if not result.new:
            return None  # a redelivery: the first delivery was answered and rendered
        resolution = result.resolution
        if resolution is None or resolution.record is None:
            return feedback(None, False, prompt_id, self._timeout)
        if resolution.won:
            self._broker.after_win(resolution.record, replied=replied)
        return feedback(resolution.record, resolution.won, prompt_id, self._timeout)

    async def button(
        self, inbound: Inbound, key: str, prompt_id: str, option_id: str
    ) -> tuple[AdmitResult, AnswerFeedback | None]:
        """A tap. Raises ``AnswerRefused`` (nothing stored) for someone who may not answer."""
        who = Answerer.of(inbound.source)
        record = await self._store.get_approval(prompt_id)
        answer = None
        if record is not None:
            check_answer(record, who, option_id, self._broker.settings.approvers)
            answer = self._answer(prompt_id, option_id, who, replied=False)
        result = await self._store.admit(
            AdmitRequest(inbound=inbound, session_key=key, queued=False, answer=answer)
        )
        return result, self._settle(result, prompt_id, replied=False)

    async def command(
        self, inbound: Inbound, key: str, command: Command
    ) -> tuple[AdmitResult, AnswerFeedback | None]:
        """``/approve [session|always]`` or ``/deny``: answers the oldest open prompt of this
        session (or, for an approver, of this chat); the reply says what was recorded."""
        who = Answerer.of(inbound.source)
        option = "deny" if command.name == "deny" else COMMAND_TIERS.get(command.args.strip().lower())
        if option is None:
            return await self._plain(inbound, key, USAGE), None
        record = await self._target(who, key)
        if record is None:
            return await self._plain(inbound, key, "No approval is waiting in this chat."), None
        try:
            check_answer(record, who, option, self._broker.settings.approvers)
        except AnswerRefused as exc:
            log.warning(
                "approval answer refused: %s", exc.message,
                extra={"prompt_id": record.prompt_id, "user_id": who.user_id, "platform": who.platform},
            )  # fmt: skip
            return await self._plain(inbound, key, exc.message), None
        request = AdmitRequest(
            inbound=inbound,
            session_key=key,
            queued=False,
            reply=self._reply(inbound, key, ""),
            answer=self._answer(record.prompt_id, option, who, replied=True),
        )
        result = await self._store.admit(request)
        return result, self._settle(result, record.prompt_id, replied=True)

    async def _target(self, who: Answerer, key: str) -> ApprovalRecord | None:
        open_ones = await self._store.open_approvals(who.platform, who.chat_id or "")
        own = next((r for r in open_ones if r.session_key == key), None)
        if own is not None:
            return own
        approvers = self._broker.settings.approvers
        return next((r for r in open_ones if may_answer(r, who, approvers)), None)

    async def _plain(self, inbound: Inbound, key: str, text: str) -> AdmitResult:
        request = AdmitRequest(
            inbound=inbound, session_key=key, queued=False, reply=self._reply(inbound, key, text)
        )
        return await self._store.admit(request)

    @staticmethod
    def _reply(inbound: Inbound, key: str, text: str) -> OutboxDraft:
        return command_reply(inbound, key, text)
