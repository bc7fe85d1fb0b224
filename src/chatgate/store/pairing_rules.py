"""The pairing rules, once for both backends: a stranger's code and its reply, and the approval
with its lockout.

Each rule runs inside one transaction of its backend, over ``PairingStatements``: the few
statements a backend writes in its dialect (and PostgreSQL serializes with an advisory lock
before the rule starts). The SQLite backend runs the rule with ``inline.run_inline``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.pairing import (
    ApproveOutcome,
    PairedUser,
    PairingApproval,
    PairingIssue,
    PairingLimits,
    PairingRequest,
    new_code,
    normalize_code,
)

NoticeFor = Callable[[PairingRequest], OutboxDraft]


class PairingStatements(ABC):
    """A backend's pairing statements, on the connection of the transaction the rule runs in."""

    @abstractmethod
    async def drop_expired(self, platform: str, now: float) -> None: ...

    @abstractmethod
    async def request_of(self, platform: str, user_id: str) -> tuple[PairingRequest, float] | None:
        """The user's live request and when it was last replied to."""

    @abstractmethod
    async def note_reply(self, platform: str, user_id: str, now: float) -> None: ...

    @abstractmethod
    async def live_requests(self, platform: str) -> int: ...

    @abstractmethod
    async def codes(self) -> set[str]:
        """Every code waiting, on any platform (a code is unique across them)."""

    @abstractmethod
    async def insert_request(self, request: PairingRequest, now: float) -> None: ...

    @abstractmethod
    async def request_by_code(self, code: str) -> PairingRequest | None: ...

    @abstractmethod
    async def delete_request(self, code: str) -> None: ...

    @abstractmethod
    async def pair(self, user: PairedUser) -> None:
        """Record ``user`` as paired (a user paired again takes the new code and time)."""

    @abstractmethod
    async def guard(self) -> tuple[int, float | None] | None:
        """The approval guard: wrong codes in a row, and the end of the lockout they caused."""

    @abstractmethod
    async def set_guard(self, failures: int, locked_until: float | None) -> None: ...

    @abstractmethod
    async def insert_outbox(self, draft: OutboxDraft, now: float) -> None: ...


async def request_pairing(
    sql: PairingStatements,
    platform: str,
    user_id: str,
    user_name: str | None,
    chat_id: str | None,
    now: float,
    limits: PairingLimits,
    notice_for: NoticeFor,
) -> PairingIssue:
    """A stranger's code: the one they already have (replied to at most once per
    ``reply_interval_seconds``), or a new one while fewer than ``max_pending`` wait."""
    await sql.drop_expired(platform, now)
    found = await sql.request_of(platform, user_id)
    if found is not None:
        request, last_reply_at = found
        if now - last_reply_at < limits.reply_interval_seconds:
            return PairingIssue(request, replied=False)
        await sql.note_reply(platform, user_id, now)
        await sql.insert_outbox(notice_for(request), now)
        return PairingIssue(request, replied=True)
    if await sql.live_requests(platform) >= limits.max_pending:
        return PairingIssue(None, replied=False)
    taken = await sql.codes()
    code = new_code()
    while code in taken:  # 31^8 codes, at most a few hundred live: this almost never loops
        code = new_code()
    request = PairingRequest(code, platform, user_id, user_name, chat_id, now, now + limits.code_ttl_seconds)
    await sql.insert_request(request, now)
    await sql.insert_outbox(notice_for(request), now)
    return PairingIssue(request, replied=True)


async def _failures(sql: PairingStatements, now: float) -> tuple[int, float | None]:
    guard = await sql.guard()
    if guard is None:
        return 0, None
    failures, locked_until = guard
    if locked_until is not None and now >= locked_until:
        return 0, None  # the lockout is over; counting starts again
    return failures, locked_until


async def approve_pairing(
    sql: PairingStatements, code: str, now: float, limits: PairingLimits
) -> PairingApproval:
    """Once per code; every wrong or expired code counts towards the lockout, which refuses
    every approval (right codes too) until it ends; an approval starts the count again."""
    failures, locked_until = await _failures(sql, now)
    if locked_until is not None:
        return PairingApproval("locked", locked_until=locked_until, failures=failures)
    wanted = normalize_code(code)
    request = await sql.request_by_code(wanted)
    if request is None or request.expires_at <= now:
        failures += 1
        lock = now + limits.lockout_seconds if failures >= limits.max_failed_approvals else None
        await sql.set_guard(failures, lock)
        if request is not None:
            await sql.delete_request(wanted)
        outcome: ApproveOutcome = "unknown" if request is None else "expired"
        return PairingApproval(outcome, locked_until=lock, failures=failures)
    user = PairedUser(request.platform, request.user_id, request.user_name, now, request.code)
    await sql.pair(user)
    await sql.delete_request(wanted)
    await sql.set_guard(0, None)
    return PairingApproval("approved", user=user)
