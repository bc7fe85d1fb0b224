"""Builders for the contract tests, and ``covers``: the marker that names what a test demonstrates.

Every contract test carries ``@covers(Role.method, ...)`` for the role methods whose
behaviour it asserts; ``test_role_coverage.py`` fails when a method of a role in
``chatgate.domain.store_roles.ROLES`` has no such test. Only the public protocol is used,
so the same tests hold every backend to the same contract.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from chatgate.domain.approvals import ApprovalRecord
from chatgate.domain.inbound import Inbound
from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.turns import Claim
from chatgate.store.base import Store
from support.store_values import src

T = TypeVar("T")


def covers(*methods: Callable[..., Any]) -> pytest.MarkDecorator:
    """Mark a test with the role methods (``Inbox.admit``, ...) whose behaviour it asserts.

    Taking the protocol's own functions, not strings, makes a renamed method fail at import.
    """
    return pytest.mark.covers(*(m.__name__ for m in methods))


def req(
    delivery_id: str,
    key: str = "k1",
    text: str = "hello",
    *,
    transport: str = "webchat",
    queued: bool = True,
    reply: OutboxDraft | None = None,
    cancel_queued: bool = False,
    reset_session: bool = False,
    **source: Any,
) -> AdmitRequest:
    inbound = Inbound(
        transport=transport, delivery_id=delivery_id, source=src(**source), text=text, message_ref=delivery_id
    )
    return AdmitRequest(
        inbound=inbound,
        session_key=key,
        queued=queued,
        reply=reply,
        cancel_queued=cancel_queued,
        reset_session=reset_session,
    )


def draft(
    idem_key: str,
    chat_id: str = "c1",
    *,
    key: str = "k1",
    platform: str = "webchat",
    text: str | None = None,
    kind: str = "final",
) -> OutboxDraft:
    return OutboxDraft(
        idem_key=idem_key,
        platform=platform,
        chat_id=chat_id,
        session_key=key,
        kind=kind,  # type: ignore[arg-type]
        text=text if text is not None else f"text of {idem_key}",
        in_reply_to="m1",
        target={"chat_id": chat_id, "n": 1},
    )


def texts(claim: Claim | None) -> list[str]:
    assert claim is not None
    return [i.inbound.text for i in claim.items]


_commands = itertools.count()


async def put_outbox(store: Store, *drafts: OutboxDraft) -> None:
    """Record outbox rows the way command replies are recorded: with their admission."""
    for d in drafts:
        result = await store.admit(
            req(
                f"cmd-{next(_commands)}",
                d.session_key,
                "/status",
                queued=False,
                reply=d,
                platform=d.platform,
                chat_id=d.chat_id,
            )
        )
        assert result.new


async def eventually(fn: Callable[[], Awaitable[T]], timeout: float = 30.0) -> T:
    """Poll ``fn`` until it returns something truthy (for leases and retries that expire)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await fn()
        if value:
            return value
        assert time.monotonic() < deadline, "condition never became true"
        await asyncio.sleep(0.01)


T0 = 1_700_000_000.0
"""The request time of test approvals (their deadline is ``T0 + 300``)."""


def approval(prompt_id: str = "n1.00000001", *, key: str = "k1", **fields: Any) -> ApprovalRecord:
    values: dict[str, Any] = {
        "prompt_id": prompt_id,
        "session_key": key,
        "session_id": "s-1",
        "inbox_seq": 1,
        "call_id": "call-1",
        "tool": "shell",
        "command": "rm -rf ./x",
        "rule_keys": ("recursive_delete",),
        "offered_tiers": ("once", "session", "always", "deny"),
        "requester_id": "u1",
        "requester_name": "Ann",
        "requested_at": T0,
        "expires_at": T0 + 300,
        "platform": "webchat",
        "chat_id": "c1",
        "target": {"user_id": "u1"},
        "reply_to": "m1",
        "prompt_text": "Approval needed: rm -rf ./x",
        "prompt_via": "buttons",
    }
    values.update(fields)
    return ApprovalRecord(**values)


def notice(idem_key: str, text: str = "expired", chat_id: str = "c1") -> OutboxDraft:
    return OutboxDraft(idem_key, "webchat", chat_id, "k1", "notice", text, "m1", {})
