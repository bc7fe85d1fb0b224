"""The approval and outbox-notice methods of ``SqliteStore``, kept apart from the pipeline's.

A mixin over the store's own plumbing: every write goes through the group-commit writer
and every read through the reader pool, exactly like the rest of the store.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Literal, TypeVar

from chatgate.domain.approvals import ApprovalRecord, ApprovalResolution, GrantScope
from chatgate.domain.outbox import OutboxDraft
from chatgate.store import sqlite_approvals as approvals
from chatgate.store import sqlite_ops as ops

T = TypeVar("T")


class ApprovalMethods:
    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError

    async def enqueue_outbox(self, drafts: Sequence[OutboxDraft]) -> None:
        if not drafts:
            return
        now = time.time()
        items = list(drafts)

        def write(c: sqlite3.Connection) -> None:
            for draft in items:
                ops.insert_outbox(c, draft, now)

        await self._write(write)

    # ------------------------------------------------------------ approvals

    async def create_approval(self, record: ApprovalRecord) -> None:
        await self._write(lambda c: approvals.insert(c, record))

    async def set_prompt_shown(self, prompt_id: str, via: str, message_id: str | None) -> None:
        await self._write(lambda c: approvals.set_shown(c, prompt_id, via, message_id))

    async def get_approval(self, prompt_id: str) -> ApprovalRecord | None:
        return await self._read(lambda c: approvals.get(c, prompt_id))

    async def open_approvals(self, platform: str, chat_id: str) -> list[ApprovalRecord]:
        return await self._read(lambda c: approvals.open_for_chat(c, platform, chat_id))

    async def resolve_approval(
        self,
        prompt_id: str,
        outcome: Literal["approved", "denied", "expired"],
        tier: str | None,
        by_id: str | None,
        by_name: str | None,
        now: float,
        *,
        reason: str | None = None,
        notice: OutboxDraft | None = None,
    ) -> ApprovalResolution:
        return await self._write(
            lambda c: approvals.resolve(c, prompt_id, outcome, tier, by_id, by_name, now, reason, notice)
        )

    async def expire_open_approvals(
        self,
        now: float,
        reason: str,
        notice_for: Callable[[ApprovalRecord], OutboxDraft | None] | None = None,
    ) -> list[ApprovalRecord]:
        return await self._write(lambda c: approvals.expire_open(c, now, reason, notice_for))

    async def add_grant(
        self, scope: GrantScope, session_key: str | None, rule_key: str, command: str
    ) -> None:
        now = time.time()
        await self._write(lambda c: approvals.add_grant(c, scope, session_key, rule_key, command, now))

    async def granted(self, session_key: str, rule_keys: Sequence[str]) -> bool:
        keys = tuple(rule_keys)
        return await self._read(lambda c: approvals.granted(c, session_key, keys))
