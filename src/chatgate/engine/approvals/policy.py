"""Who may answer an approval prompt, and what each recorded outcome says.

The settings, and pure functions of an approval record: the broker and admission use
them so a button, a ``/approve`` and a timeout all say the same thing about the same
recorded outcome.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from chatgate.domain.approvals import ApprovalRecord
from chatgate.domain.errors import ChatgateError
from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.outfiles import OutFile
from chatgate.domain.prompts import (
    OPTION_IDS,
    PromptResolution,
    command_hints,
    late_text,
    outcome_text,
    shown_command,
)
from chatgate.domain.shell.allow import DEFAULT_ALLOW, AllowList
from chatgate.domain.shell.danger import DangerRule
from chatgate.domain.source import Source
from chatgate.engine.ports import AnswerFeedback


class ApprovalSettings(msgspec.Struct, frozen=True):
    timeout_s: float = 300.0
    approvers: Mapping[str, frozenset[str]] = msgspec.field(default_factory=dict)
    """Per platform, the user ids who may answer any prompt of that platform's chats
    (besides the person whose message started the turn)."""
    rules: tuple[DangerRule, ...] = ()
    """Extra danger rules (config), checked after the built-in ones."""
    render_timeout_s: float = 10.0
    """Longest wait for an adapter to show or update a prompt."""
    allow: AllowList = msgspec.field(default_factory=lambda: DEFAULT_ALLOW)
    """Programs a command may use and still run unasked (``approvals.allow``). The sandbox
    proves nothing: it confines what an approved command can change (issue 27)."""


class AnswerRefused(ChatgateError):
    """This person may not give this answer; nothing was recorded. ``code`` is for adapters."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Answerer(msgspec.Struct, frozen=True):
    """Who answered, and from which chat."""

    platform: str
    chat_id: str | None
    user_id: str | None
    user_name: str | None

    @classmethod
    def of(cls, source: Source) -> Answerer:
        return cls(source.platform, source.chat_id, source.user_id, source.user_name)

    @property
    def name(self) -> str | None:
        return self.user_name or self.user_id


def may_answer(record: ApprovalRecord, who: Answerer, approvers: Mapping[str, frozenset[str]]) -> bool:
    """The requester, or an approver configured for the prompt's platform, in the prompt's chat."""
    if who.platform != record.platform or (who.chat_id or "") != record.chat_id or not who.user_id:
        return False
    return who.user_id == record.requester_id or who.user_id in approvers.get(record.platform, frozenset())


def check_answer(
    record: ApprovalRecord, who: Answerer, option_id: str, approvers: Mapping[str, frozenset[str]]
) -> None:
    """Raise ``AnswerRefused`` unless ``who`` may give ``option_id`` to this prompt."""
    if who.platform != record.platform or (who.chat_id or "") != record.chat_id:
        raise AnswerRefused("not_allowed", "This prompt belongs to another chat.")
    if not may_answer(record, who, approvers):
        asked_by = record.requester_name or record.requester_id or "the person who asked"
        raise AnswerRefused(
            "not_allowed",
            f"Only {asked_by} or a configured approver may answer this prompt; nothing was changed.",
        )
    if option_id not in OPTION_IDS:
        raise AnswerRefused(
            "invalid_answer", f"Unknown answer {option_id!r}; use one of {', '.join(OPTION_IDS)}."
        )
    if option_id not in record.offered_tiers:
        raise AnswerRefused(
            "invalid_answer",
            f"This prompt does not offer {option_id!r}; answer with {command_hints(record.offered_tiers)}.",
        )


def recorded_text(record: ApprovalRecord, timeout_s: float) -> str:
    return outcome_text(record.state, record.tier, record.answered_by_name, record.reason, timeout_s)


def resolution_of(record: ApprovalRecord, timeout_s: float) -> PromptResolution:
    return PromptResolution(record.state, recorded_text(record, timeout_s), record.tier)  # type: ignore[arg-type]


def feedback(record: ApprovalRecord | None, won: bool, prompt_id: str, timeout_s: float) -> AnswerFeedback:
    """What the person who answered is shown: the outcome, or why their answer changed nothing."""
    if record is None:
        return AnswerFeedback(prompt_id, False, "expired", "This prompt is no longer open — not run.")
    text = recorded_text(record, timeout_s)
    return AnswerFeedback(record.prompt_id, won, record.state, text if won else late_text(record.state, text))


def reply_text(record: ApprovalRecord | None, won: bool, timeout_s: float) -> str:
    """A command answer's reply to the chat (written inside the store transaction)."""
    if record is None:
        return "That prompt is no longer open — not run."
    said = feedback(record, won, record.prompt_id, timeout_s).text
    return f"{said}\n{_label(record)}: {shown_command(record.command)}"


def end_text(record: ApprovalRecord, timeout_s: float) -> str:
    """The chat notice for a text prompt that ended, or for any prompt a restart expired."""
    text = f"{recorded_text(record, timeout_s)}\n{_label(record)}: {shown_command(record.command)}"
    if record.reason == "restart":
        text += "\nThe interrupted reply starts again and asks again if it still needs to."
    return text


def end_notice(record: ApprovalRecord, timeout_s: float) -> OutboxDraft:
    """The outbox row of ``end_text`` (idempotency key ``prompt:<id>:end``)."""
    return notice_draft(record, f"prompt:{record.prompt_id}:end", end_text(record, timeout_s))


def not_run_reason(record: ApprovalRecord, timeout_s: float) -> str:
    """What the model reads when its call was not run: plain, and never a claim it ran."""
    rules = ", ".join(record.rule_keys)
    if record.state == "denied":
        who = record.answered_by_name or record.answered_by_id or "a person"
        return f"not run: {who} denied this {_noun(record)} in the approval prompt (rules: {rules})."
    if record.state == "expired" and record.reason == "timeout":
        return (
            f"not run: nobody answered the approval prompt within {timeout_s:g} s, so the {_noun(record)} was"
            f" denied (rules: {rules})."
        )
    return f"not run: the approval prompt ended without an approval ({record.reason or record.state})."


def _noun(record: ApprovalRecord) -> str:
    """What was asked about: a shell command, or a call of another tool (MCP)."""
    return "command" if record.tool == "shell" else "call"


def _label(record: ApprovalRecord) -> str:
    return _noun(record).capitalize()


def prompt_target(record: ApprovalRecord) -> dict[str, str]:
    """The routing target an adapter gets with the prompt (values as strings)."""
    return {k: str(v) for k, v in record.target.items()}


def notice_draft(record: ApprovalRecord, idem_key: str, text: str) -> OutboxDraft:
    """An outbox notice about this prompt, to its chat, in reply to the requester's message."""
    return OutboxDraft(
        idem_key=idem_key,
        platform=record.platform,
        chat_id=record.chat_id,
        session_key=record.session_key,
        kind="notice",
        text=text,
        in_reply_to=record.reply_to,
        target=dict(record.target),
    )


class ToolContext(msgspec.Struct, frozen=True):
    """Who and where a turn's tool calls are for: the session, and the requester (the
    sender of the turn's last message), whose chat sees the prompts."""

    session_key: str
    session_id: str
    inbox_seq: int
    source: Source
    reply_to: str | None
    target: Mapping[str, str]
    files: list[OutFile] = msgspec.field(default_factory=list)
    """Files the turn's tools attached to its reply (``attach_file``), in order."""


class Decision(msgspec.Struct, frozen=True):
    run: bool
    reason: str = ""
    """For a call that does not run: what the model (and through it the chat) is told."""
    prompt_id: str | None = None
