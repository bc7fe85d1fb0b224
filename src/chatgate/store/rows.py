"""Rows to domain values, and domain values to rows, for both backends.

The two schemas name and order these columns alike, so a SELECT list and the value it maps
to are written once: a backend writes the statement (its placeholders, its locks) and hands
the row here. Rows are plain sequences (a ``sqlite3`` tuple or an ``asyncpg.Record``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from chatgate.domain.accounts import Account, SignInToken, WebSession
from chatgate.domain.api_keys import ApiKeyRecord
from chatgate.domain.approvals import ApprovalRecord
from chatgate.domain.background import TaskRecord
from chatgate.domain.outbox import OutboxRow, StuckReply
from chatgate.domain.pairing import PairedUser, PairingRequest
from chatgate.domain.schedules import Schedule, ScheduleTarget
from chatgate.domain.sessions import SessionInfo
from chatgate.domain.source import Source
from chatgate.store.codec import dumps


class Row(Protocol):
    """A row as either driver returns it: a ``sqlite3`` tuple or an ``asyncpg.Record``."""

    def __getitem__(self, index: int, /) -> Any: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


def _opt(value: Any) -> float | None:
    return None if value is None else float(value)


# ------------------------------------------------------------------ accounts

ACCOUNT = "a.user_id, a.name, a.role, a.created_at, a.revoked_at"
TOKEN = "t.token_id, t.user_id, t.created_at, t.revoked_at"
WEB_SESSION = "s.session_id, s.user_id, s.created_at, s.expires_at, s.via, s.ended_at"


def account_of(row: Row) -> Account:
    return Account(
        str(row[0]), str(row[1]), "admin" if row[2] == "admin" else "user", float(row[3]), _opt(row[4])
    )


def token_of(row: Row) -> SignInToken:
    return SignInToken(str(row[0]), str(row[1]), float(row[2]), _opt(row[3]))


def web_session_of(row: Row) -> WebSession:
    via = None if row[4] is None else str(row[4])
    return WebSession(str(row[0]), str(row[1]), float(row[2]), float(row[3]), via, _opt(row[5]))


# ------------------------------------------------------------------ API keys

API_KEY = "key_id, name, created_at, revoked_at"


def api_key_of(row: Row) -> ApiKeyRecord:
    return ApiKeyRecord(str(row[0]), str(row[1]), float(row[2]), _opt(row[3]))


# ------------------------------------------------------------------ approvals

APPROVAL = (
    "prompt_id, session_key, session_id, inbox_seq, call_id, tool, command, rule_keys, offered_tiers,"
    " requester_id, requester_name, requested_at, expires_at, platform, chat_id, target_json, reply_to,"
    " prompt_text, prompt_via, state, tier, reason, answered_by_id, answered_by_name, answered_at,"
    " prompt_message_id"
)


def approval_of(row: Row) -> ApprovalRecord:
    return ApprovalRecord(
        prompt_id=row[0],
        session_key=row[1],
        session_id=row[2],
        inbox_seq=row[3],
        call_id=row[4],
        tool=row[5],
        command=row[6],
        rule_keys=tuple(json.loads(row[7])),
        offered_tiers=tuple(json.loads(row[8])),
        requester_id=row[9],
        requester_name=row[10],
        requested_at=row[11],
        expires_at=row[12],
        platform=row[13],
        chat_id=row[14],
        target=json.loads(row[15]),
        reply_to=row[16],
        prompt_text=row[17],
        prompt_via=row[18],
        state=row[19],
        tier=row[20],
        reason=row[21],
        answered_by_id=row[22],
        answered_by_name=row[23],
        answered_at=row[24],
        prompt_message_id=row[25],
    )


def approval_values(rec: ApprovalRecord) -> tuple[object, ...]:
    """The values of ``APPROVAL``, in its order."""
    return (
        rec.prompt_id, rec.session_key, rec.session_id, rec.inbox_seq, rec.call_id, rec.tool, rec.command,
        dumps(list(rec.rule_keys)), dumps(list(rec.offered_tiers)), rec.requester_id, rec.requester_name,
        rec.requested_at, rec.expires_at, rec.platform, rec.chat_id, dumps(rec.target), rec.reply_to,
        rec.prompt_text, rec.prompt_via, rec.state, rec.tier, rec.reason, rec.answered_by_id,
        rec.answered_by_name, rec.answered_at, rec.prompt_message_id,
    )  # fmt: skip


# ------------------------------------------------------------------ outbox

OUTBOX = (
    "id, idem_key, platform, chat_id, session_key, kind, text, in_reply_to, status, "
    "attempts, possibly_duplicate, platform_message_id, created_at, target_json"
)


def outbox_row(row: Row) -> OutboxRow:
    return OutboxRow(
        id=row[0],
        idem_key=row[1],
        platform=row[2],
        chat_id=row[3],
        session_key=row[4],
        kind=row[5],
        text=row[6],
        in_reply_to=row[7],
        status=row[8],
        attempts=row[9],
        possibly_duplicate=bool(row[10]),
        platform_message_id=row[11],
        created_at=row[12],
        target=json.loads(row[13]),
    )


# ------------------------------------------------------------------ pairing

PAIRING_REQUEST = "code, platform, user_id, user_name, chat_id, created_at, expires_at"
PAIRED_USER = "platform, user_id, user_name, approved_at, code"


def pairing_request_of(row: Row) -> PairingRequest:
    return PairingRequest(*row)


def paired_user_of(row: Row) -> PairedUser:
    return PairedUser(*row)


# ------------------------------------------------------------------ schedules

SCHEDULE = (
    "id, origin, name, kind, spec, text, target_json, deliver_only, paused, next_fire_at,"
    " last_fired_at, fired, created_at, meta_json"
)


def schedule_of(row: Row) -> Schedule:
    (sid, origin, name, kind, spec, text, target, deliver, paused, nxt, last, fired, created, meta) = row
    return Schedule(
        id=sid,
        kind=kind,
        spec=spec,
        text=text,
        target=ScheduleTarget.from_dict(json.loads(target)),
        origin=origin,
        next_fire_at=nxt,
        created_at=created,
        deliver_only=bool(deliver),
        paused=bool(paused),
        last_fired_at=last,
        fired=int(fired),
        name=name,
        meta=json.loads(meta),
    )


def schedule_values(s: Schedule, flag: Callable[[bool], object]) -> tuple[object, ...]:
    """The values of ``SCHEDULE`` then ``session_key``; ``flag`` is the dialect's boolean."""
    return (
        s.id, s.origin, s.name, s.kind, s.spec, s.text, dumps(s.target.to_dict()), flag(s.deliver_only),
        flag(s.paused), s.next_fire_at, s.last_fired_at, s.fired, s.created_at, dumps(s.meta),
        s.target.session_key,
    )  # fmt: skip


def schedule_definition(s: Schedule, flag: Callable[[bool], object]) -> tuple[object, ...]:
    """What a changed ``config:`` schedule rewrites: name, kind, spec, text, target_json,
    session_key, deliver_only, next_fire_at, meta_json (then its id)."""
    return (
        s.name, s.kind, s.spec, s.text, dumps(s.target.to_dict()), s.target.session_key,
        flag(s.deliver_only), s.next_fire_at, dumps(s.meta), s.id,
    )  # fmt: skip


# ------------------------------------------------------------------ tasks

TASK = (
    "id, kind, parent_key, parent_session_id, child_key, origin_json, prompt, created_at, status,"
    " result, finished_at, note"
)


def task_of(row: Row) -> TaskRecord:
    tid, kind, parent, parent_sid, child, origin, prompt, created, status, result, finished, note = row
    return TaskRecord(
        tid, kind, parent, parent_sid, child, Source.from_dict(json.loads(origin)), prompt, created,
        status, result, finished, note,
    )  # fmt: skip


def new_task_values(task: TaskRecord) -> tuple[object, ...]:
    """The values of ``TASK`` up to ``status`` (a new task has no result, end or note yet)."""
    return (
        task.id, task.kind, task.parent_key, task.parent_session_id, task.child_key,
        dumps(task.origin.to_dict()), task.prompt, task.created_at, task.status,
    )  # fmt: skip


# ------------------------------------------------------------------ sessions

SESSION_INFO = (
    "SELECT s.key, s.session_id, s.platform, s.chat_id, s.created_at, s.last_activity,"
    " (SELECT COUNT(*) FROM inbox i {queued} WHERE i.session_key = s.key AND i.status = 'queued'),"
    " s.lease_owner, s.last_error,"
    " (SELECT COUNT(*) FROM inbox i {queued} WHERE i.session_key = s.key AND i.status = 'queued'"
    " AND i.claimed_by IS NULL) FROM sessions s"
)
"""``{queued}``: the backend's hint for the index of queued items (SQLite's ``QUEUED_ROWS``), or ''."""


def session_info_of(row: Row) -> SessionInfo:
    return SessionInfo(*row)


STUCK = "o.id, o.platform, o.chat_id, o.status, o.created_at, o.last_error, {holder}"
"""A stuck reply's columns (``{holder}``: who holds its claim, a column on PostgreSQL, NULL on SQLite)."""

STUCK_WHERE = (
    " o.status IN ('pending', 'sending', 'ambiguous') AND o.created_at < {cutoff}"
    " AND (o.status = 'sending' OR o.next_attempt_at IS NULL OR o.next_attempt_at <= {now})"
    " AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.platform = o.platform AND p.chat_id = o.chat_id"
    " AND p.id < o.id AND p.status IN ('pending', 'sending', 'ambiguous'))"
)
"""``StuckReply``: the head of its chat, old, and claimed or due (so nothing explains the wait)."""


def stuck_reply(r: Row) -> StuckReply:
    return StuckReply(int(r[0]), str(r[1]), str(r[2]), str(r[3]), float(r[4]), r[5], r[6])
