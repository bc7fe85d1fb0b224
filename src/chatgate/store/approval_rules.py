"""The approval rules, once for both backends: an answer's compare-and-set with the grants and
notice it brings, the expiry of open prompts, and remembered approvals (grants).

Each rule runs inside one transaction of its backend, over ``ApprovalStatements``. PostgreSQL
reads the prompt ``FOR UPDATE`` and announces a resolution to the fleet; SQLite's one writer
makes the read-then-update a compare-and-set by itself (``inline.run_inline`` runs the rule).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from msgspec.structs import replace

from chatgate.domain.approvals import ApprovalRecord, ApprovalResolution
from chatgate.domain.outbox import OutboxDraft

ALWAYS_KEY = ""
"""The session key (and session id) column of an ``always`` grant: it belongs to no session."""

NoticeFor = Callable[[ApprovalRecord], OutboxDraft | None]


class ApprovalStatements(ABC):
    """A backend's approval statements, on the connection of the transaction the rule runs in."""

    @abstractmethod
    async def approval(self, prompt_id: str, *, lock: bool = False) -> ApprovalRecord | None:
        """The prompt; ``lock``: held until the transaction ends (where other processes may answer)."""

    @abstractmethod
    async def finish(
        self,
        prompt_id: str,
        state: str,
        tier: str | None,
        reason: str | None,
        by: tuple[str | None, str | None],
        at: float,
    ) -> bool:
        """Record the prompt's end while it is still pending; whether it was."""

    @abstractmethod
    async def expirable(self) -> list[ApprovalRecord]:
        """The pending prompts no live turn waits on, oldest first."""

    @abstractmethod
    async def grant(
        self,
        scope: str,
        session_key: str,
        session_id: str,
        rule_key: str,
        command: str,
        prompt_id: str | None,
        now: float,
    ) -> None:
        """Record (or renew) a remembered approval."""

    @abstractmethod
    async def session_id_of(self, session_key: str) -> str | None:
        """The session's current conversation, or None without a session."""

    @abstractmethod
    async def grants_found(self, rule_keys: list[str], session_key: str, session_id: str | None) -> int:
        """How many of ``rule_keys`` (distinct) have a grant: always, or this conversation's."""

    @abstractmethod
    async def insert_outbox(self, draft: OutboxDraft, now: float) -> None: ...

    @abstractmethod
    async def announce(self, prompt_id: str) -> None:
        """Tell whoever waits on the prompt (another process, at commit) that it was answered."""


def _ended(
    rec: ApprovalRecord,
    state: str,
    tier: str | None,
    reason: str | None,
    by: tuple[str | None, str | None],
    at: float,
) -> ApprovalRecord:
    return replace(
        rec,
        state=state,
        tier=tier,
        reason=reason,
        answered_by_id=by[0],
        answered_by_name=by[1],
        answered_at=at,
    )


async def _finish(
    sql: ApprovalStatements,
    rec: ApprovalRecord,
    state: str,
    tier: str | None,
    reason: str | None,
    by: tuple[str | None, str | None],
    at: float,
) -> ApprovalRecord | None:
    if not await sql.finish(rec.prompt_id, state, tier, reason, by, at):
        return None
    return _ended(rec, state, tier, reason, by, at)


async def resolve(
    sql: ApprovalStatements,
    prompt_id: str,
    outcome: str,
    tier: str | None,
    by_id: str | None,
    by_name: str | None,
    now: float,
    reason: str | None = None,
    notice: OutboxDraft | None = None,
) -> ApprovalResolution:
    """The compare-and-set. ``notice`` (and the grants of a remembered approval) are
    recorded only when this call wins."""
    found = await sql.approval(prompt_id, lock=True)
    if found is None or found.state != "pending":
        return ApprovalResolution(found, False)
    if outcome != "expired" and now >= found.expires_at:
        # Too late: the answer loses, and the row records what really happened.
        late = await _finish(sql, found, "expired", None, "timeout", (None, None), found.expires_at)
        return ApprovalResolution(late or await sql.approval(prompt_id), False)
    recorded_tier = tier if outcome == "approved" else None
    done = await _finish(sql, found, outcome, recorded_tier, reason, (by_id, by_name), now)
    if done is None:
        return ApprovalResolution(await sql.approval(prompt_id), False)
    if outcome == "approved" and recorded_tier in ("session", "always"):
        for rule_key in done.rule_keys:
            await _grant(
                sql, recorded_tier, done.session_key, done.session_id, rule_key, done.command, done, now
            )
    if notice is not None:
        await sql.insert_outbox(notice, now)
    await sql.announce(prompt_id)
    return ApprovalResolution(done, True)


async def expire_open(
    sql: ApprovalStatements, now: float, reason: str, notice_for: NoticeFor | None
) -> list[ApprovalRecord]:
    """End the prompts whose turn is gone (at start-up), each with its notice if ``notice_for`` gives one."""
    expired: list[ApprovalRecord] = []
    for rec in await sql.expirable():
        done = await _finish(sql, rec, "expired", None, reason, (None, None), now)
        if done is None:
            continue
        expired.append(done)
        draft = notice_for(done) if notice_for is not None else None
        if draft is not None:
            await sql.insert_outbox(draft, now)
    return expired


async def _grant(
    sql: ApprovalStatements,
    scope: str,
    session_key: str,
    session_id: str,
    rule_key: str,
    command: str,
    source: ApprovalRecord | None,
    now: float,
) -> None:
    if scope == "always":
        session_key = session_id = ALWAYS_KEY
    await sql.grant(
        scope, session_key, session_id, rule_key, command, source.prompt_id if source else None, now
    )


async def add_grant(
    sql: ApprovalStatements, scope: str, session_key: str | None, rule_key: str, command: str, now: float
) -> None:
    """A session grant belongs to the session's current conversation (its ``session_id``):
    ``/new`` starts another one, so the grant no longer applies."""
    if scope not in ("session", "always"):
        raise ValueError(f"grant scope must be 'session' or 'always', not {scope!r}")
    if scope == "session":
        if not session_key:
            raise ValueError("a session grant needs a session key")
        session_id = await sql.session_id_of(session_key)
        if session_id is None:
            raise ValueError(f"no session {session_key!r} to grant for")
        await _grant(sql, scope, session_key, session_id, rule_key, command, None, now)
        return
    await _grant(sql, scope, ALWAYS_KEY, ALWAYS_KEY, rule_key, command, None, now)


async def granted(sql: ApprovalStatements, session_key: str, rule_keys: Sequence[str]) -> bool:
    """Every rule key has a grant: ``always``, or ``session`` for this session's current conversation."""
    wanted = sorted(set(rule_keys))
    if not wanted:
        return True
    session_id = await sql.session_id_of(session_key)
    return await sql.grants_found(wanted, session_key, session_id) == len(wanted)
