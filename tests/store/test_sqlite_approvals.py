"""Approval prompts and remembered approvals in the SQLite store (a real file in tmp_path).

The compare-and-set is what makes "resolve first, then render" honest: exactly one
resolution of a prompt ever wins, a late answer loses to the deadline, and an answer
committed with its event is never applied twice by a redelivery.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from chatgate.domain.approvals import ApprovalAnswer, ApprovalRecord, ApprovalResolution
from chatgate.domain.outbox import OutboxDraft
from chatgate.store.sqlite import SqliteStore
from chatgate.store.sqlite.schema import SCHEMA_VERSION
from contract.kit import T0, approval
from store.conftest import ConnectSeam, Make, OpenStore

Query = Callable[..., list[tuple[Any, ...]]]


def notice(idem: str, text: str = "expired") -> OutboxDraft:
    return OutboxDraft(idem, "webchat", "c1", "k1", "notice", text, "m1", {})


async def session_for(store: SqliteStore, make: Make, key: str = "k1", delivery_id: str = "d-session") -> str:
    """Create the session row of ``key`` (as an admitted message does) and return its session id."""
    await store.admit(make.request(delivery_id, key))
    info = await store.session_info(key)
    assert info is not None
    return info.session_id


async def test_a_fresh_database_is_at_the_approvals_schema(open_store: OpenStore, query: Query) -> None:
    await open_store()
    assert query("PRAGMA user_version") == [(SCHEMA_VERSION,)]
    tables = {r[0] for r in query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"approvals", "approval_grants"} <= tables


async def test_a_created_prompt_is_read_back_exactly_and_survives_a_reopen(
    open_store: OpenStore, db_path: Path
) -> None:
    store = await open_store()
    rec = approval(target={"thread_id": "t1", "user_id": "u1"})
    await store.create_approval(rec)
    assert await store.get_approval(rec.prompt_id) == rec
    await store.set_prompt_shown(rec.prompt_id, "buttons", "pm-7")
    await store.close()
    reopened = await open_store(db_path)
    assert await reopened.get_approval(rec.prompt_id) == msgspec.structs.replace(
        rec, prompt_message_id="pm-7"
    )
    assert await reopened.get_approval("n1.missing") is None


async def test_open_approvals_lists_the_chats_pending_prompts_oldest_first(open_store: OpenStore) -> None:
    store = await open_store()
    await store.create_approval(approval("n1.00000003", requested_at=T0 + 2))
    await store.create_approval(approval("n1.00000001", requested_at=T0))
    await store.create_approval(approval("n1.00000002", requested_at=T0 + 1))
    await store.create_approval(approval("n1.00000004", chat_id="other"))
    await store.resolve_approval("n1.00000002", "denied", None, "u1", "Ann", T0 + 5)
    assert [r.prompt_id for r in await store.open_approvals("webchat", "c1")] == [
        "n1.00000001",
        "n1.00000003",
    ]
    assert [r.prompt_id for r in await store.open_approvals("webchat", "other")] == ["n1.00000004"]


async def test_the_first_resolve_wins_and_a_second_gets_the_recorded_row(open_store: OpenStore) -> None:
    store = await open_store()
    await store.create_approval(approval())
    first = await store.resolve_approval("n1.00000001", "approved", "once", "u1", "Ann", T0 + 10)
    second = await store.resolve_approval("n1.00000001", "denied", None, "u2", "Bob", T0 + 11)
    assert first.won and not second.won
    assert first.record is not None and second.record == first.record
    assert (first.record.state, first.record.tier, first.record.answered_by_name) == (
        "approved",
        "once",
        "Ann",
    )
    assert first.record.answered_at == T0 + 10
    stored = await store.get_approval("n1.00000001")
    assert stored == first.record


async def test_two_concurrent_resolves_in_one_commit_batch_exactly_one_wins(
    open_store: OpenStore, connect_seam: ConnectSeam, query: Query
) -> None:
    store = await open_store(connect=connect_seam)
    await store.create_approval(approval())
    async with connect_seam.writer_paused(store):
        approve = asyncio.ensure_future(
            store.resolve_approval("n1.00000001", "approved", "once", "u1", "Ann", T0 + 10)
        )
        deny = asyncio.ensure_future(
            store.resolve_approval("n1.00000001", "denied", None, "u2", "Bob", T0 + 10)
        )
    results = [await approve, await deny]
    assert sorted(r.won for r in results) == [False, True]
    winner = next(r for r in results if r.won)
    loser = next(r for r in results if not r.won)
    assert loser.record == winner.record  # the loser is told what was recorded
    rows = query("SELECT state, answered_by_id FROM approvals")
    assert rows == [("approved", "u1")]


async def test_many_concurrent_resolves_from_separate_tasks_one_wins(
    open_store: OpenStore, query: Query
) -> None:
    store = await open_store()
    await store.create_approval(approval())
    results = await asyncio.gather(
        *(
            store.resolve_approval(
                "n1.00000001", "approved" if i % 2 else "denied", "once", f"u{i}", None, T0 + 1
            )
            for i in range(20)
        )
    )
    assert sum(r.won for r in results) == 1
    winner = next(r for r in results if r.won).record
    assert all(r.record == winner for r in results)
    assert len(query("SELECT 1 FROM approvals WHERE answered_by_id IS NOT NULL")) == 1


async def test_an_answer_after_the_deadline_loses_and_records_the_expiry(open_store: OpenStore) -> None:
    store = await open_store()
    await store.create_approval(approval())
    late = await store.resolve_approval("n1.00000001", "approved", "always", "u1", "Ann", T0 + 300)
    assert not late.won
    assert late.record is not None
    assert (late.record.state, late.record.reason, late.record.tier) == ("expired", "timeout", None)
    assert late.record.answered_by_id is None
    assert (await store.get_approval("n1.00000001")) == late.record
    assert not await store.granted("k1", ["recursive_delete"])  # a lost "always" grants nothing


async def test_the_timeout_itself_may_expire_a_prompt_past_its_deadline(open_store: OpenStore) -> None:
    store = await open_store()
    await store.create_approval(approval())
    expired = await store.resolve_approval(
        "n1.00000001", "expired", None, None, None, T0 + 301, reason="timeout", notice=notice("n:1")
    )
    assert expired.won and expired.record is not None
    assert (expired.record.state, expired.record.reason) == ("expired", "timeout")


async def test_a_notice_is_recorded_only_by_the_winning_resolve(open_store: OpenStore, query: Query) -> None:
    store = await open_store()
    await store.create_approval(approval())
    await store.resolve_approval(
        "n1.00000001", "denied", None, "u1", "Ann", T0 + 1, notice=notice("n:1", "a")
    )
    await store.resolve_approval(
        "n1.00000001", "expired", None, None, None, T0 + 2, notice=notice("n:2", "b")
    )
    assert query("SELECT idem_key, text, kind, status FROM outbox") == [("n:1", "a", "notice", "pending")]


async def test_resolving_an_unknown_prompt_finds_nothing(open_store: OpenStore) -> None:
    store = await open_store()
    assert await store.resolve_approval("n1.nope", "approved", "once", "u1", None, T0) == ApprovalResolution(
        None, False
    )


async def test_expire_open_approvals_expires_only_pending_ones_with_their_notices(
    open_store: OpenStore, query: Query
) -> None:
    store = await open_store()
    await store.create_approval(approval("n1.00000001"))
    await store.create_approval(approval("n1.00000002", requested_at=T0 + 1))
    await store.create_approval(approval("n1.00000003"))
    await store.resolve_approval("n1.00000003", "approved", "once", "u1", "Ann", T0 + 2)

    def notice_for(rec: ApprovalRecord) -> OutboxDraft:
        return notice(f"prompt:{rec.prompt_id}:expired", f"{rec.command} expired ({rec.reason})")

    expired = await store.expire_open_approvals(T0 + 3, "restart", notice_for)
    assert [(r.prompt_id, r.state, r.reason) for r in expired] == [
        ("n1.00000001", "expired", "restart"),
        ("n1.00000002", "expired", "restart"),
    ]
    assert query("SELECT prompt_id, state FROM approvals ORDER BY prompt_id") == [
        ("n1.00000001", "expired"),
        ("n1.00000002", "expired"),
        ("n1.00000003", "approved"),
    ]
    assert [r[0] for r in query("SELECT idem_key FROM outbox ORDER BY id")] == [
        "prompt:n1.00000001:expired",
        "prompt:n1.00000002:expired",
    ]
    assert await store.expire_open_approvals(T0 + 4, "restart", notice_for) == []


async def test_a_session_approval_grants_its_rules_until_new(open_store: OpenStore, make: Make) -> None:
    store = await open_store()
    session_id = await session_for(store, make)
    await store.create_approval(
        approval(session_id=session_id, rule_keys=("recursive_delete", "outside_workdir_write"))
    )
    assert not await store.granted("k1", ["recursive_delete"])
    won = await store.resolve_approval("n1.00000001", "approved", "session", "u1", "Ann", T0 + 1)
    assert won.won
    assert await store.granted("k1", ["recursive_delete"])
    assert await store.granted("k1", ["recursive_delete", "outside_workdir_write"])
    assert not await store.granted("k1", ["recursive_delete", "sudo"])  # every rule must be granted
    assert not await store.granted("k2", ["recursive_delete"])  # another session
    await store.admit(make.request("d-new", "k1", "/new", queued=False, reset_session=True))
    assert not await store.granted("k1", ["recursive_delete"])


async def test_a_grant_made_for_an_earlier_conversation_never_applies(
    open_store: OpenStore, make: Make
) -> None:
    store = await open_store()
    old_id = await session_for(store, make)
    await store.create_approval(approval(session_id=old_id))
    await store.admit(make.request("d-new", "k1", "/new", queued=False, reset_session=True))
    # The prompt of the old conversation is approved after /new (a race the engine allows).
    assert (await store.resolve_approval("n1.00000001", "approved", "session", "u1", "Ann", T0 + 1)).won
    assert not await store.granted("k1", ["recursive_delete"])


async def test_an_always_approval_applies_to_every_session(open_store: OpenStore, make: Make) -> None:
    store = await open_store()
    await session_for(store, make)
    await store.create_approval(approval())
    assert (await store.resolve_approval("n1.00000001", "approved", "always", "u1", "Ann", T0 + 1)).won
    assert await store.granted("k1", ["recursive_delete"])
    assert await store.granted("any-other-session", ["recursive_delete"])
    assert not await store.granted("k1", ["force_push"])


async def test_once_and_deny_grant_nothing(open_store: OpenStore, make: Make) -> None:
    store = await open_store()
    await session_for(store, make)
    await store.create_approval(approval("n1.00000001"))
    await store.create_approval(approval("n1.00000002"))
    await store.resolve_approval("n1.00000001", "approved", "once", "u1", "Ann", T0 + 1)
    await store.resolve_approval("n1.00000002", "denied", "session", "u1", "Ann", T0 + 1)
    assert not await store.granted("k1", ["recursive_delete"])
    denied = await store.get_approval("n1.00000002")
    assert denied is not None and denied.tier is None


async def test_add_grant_session_and_always(open_store: OpenStore, make: Make, query: Query) -> None:
    store = await open_store()
    await session_for(store, make)
    await store.add_grant("session", "k1", "sudo", "sudo ls")
    await store.add_grant("always", None, "force_push", "git push -f")
    assert await store.granted("k1", ["sudo", "force_push"])
    assert not await store.granted("k9", ["sudo"])
    assert await store.granted("k9", ["force_push"])
    assert await store.granted("k1", [])
    assert sorted(query("SELECT scope, session_key, rule_key, command FROM approval_grants")) == [
        ("always", "", "force_push", "git push -f"),
        ("session", "k1", "sudo", "sudo ls"),
    ]


async def test_an_answer_commits_with_its_event_and_a_redelivery_resolves_nothing(
    open_store: OpenStore, make: Make, query: Query
) -> None:
    store = await open_store()
    far = time.time() + 3600  # admission answers at the real time
    await store.create_approval(approval("n1.00000001", expires_at=far))
    await store.create_approval(approval("n1.00000002", requested_at=T0 + 1, expires_at=far))
    seen: list[ApprovalResolution] = []

    def render(resolution: ApprovalResolution) -> str:
        seen.append(resolution)
        assert resolution.record is not None
        return f"{'won' if resolution.won else 'lost'}: {resolution.record.state}"

    def request(prompt_id: str) -> Any:
        answer = ApprovalAnswer(prompt_id, "approved", "once", "u1", "Ann", render)
        reply = make.draft("cmd:webchat:d-approve", kind="command", text="(rendered)")
        return msgspec.structs.replace(
            make.request("d-approve", "k1", "/approve", queued=False, reply=reply), answer=answer
        )

    first = await store.admit(request("n1.00000001"))
    assert first.new and first.resolution is not None and first.resolution.won
    # Redelivered while another prompt is open: it must not resolve that one.
    again = await store.admit(request("n1.00000002"))
    assert not again.new and again.resolution is None
    assert query("SELECT prompt_id, state FROM approvals ORDER BY prompt_id") == [
        ("n1.00000001", "approved"),
        ("n1.00000002", "pending"),
    ]
    assert query("SELECT text FROM outbox") == [("won: approved",)]
    assert query("SELECT status, outcome FROM inbox") == [("done", "command")]
    assert len(seen) == 1


async def test_a_losing_answer_still_commits_its_event_with_the_recorded_outcome(
    open_store: OpenStore, make: Make, query: Query
) -> None:
    store = await open_store()
    await store.create_approval(approval())
    await store.resolve_approval("n1.00000001", "denied", None, "u2", "Bob", T0 + 1)

    def render(resolution: ApprovalResolution) -> str:
        rec = resolution.record
        assert rec is not None
        return f"{'won' if resolution.won else 'lost'}: {rec.state} by {rec.answered_by_name}"

    reply = make.draft("cmd:webchat:d-late", kind="command")
    request = msgspec.structs.replace(
        make.request("d-late", "k1", "/approve", queued=False, reply=reply),
        answer=ApprovalAnswer("n1.00000001", "approved", "once", "u1", "Ann", render),
    )
    result = await store.admit(request)
    assert result.new and result.resolution is not None and not result.resolution.won
    assert query("SELECT text FROM outbox") == [("lost: denied by Bob",)]
    assert query("SELECT state, answered_by_id FROM approvals") == [("denied", "u2")]


async def test_enqueue_outbox_is_idempotent_by_key(open_store: OpenStore, query: Query) -> None:
    store = await open_store()
    await store.enqueue_outbox([notice("p:1", "first"), notice("p:2", "second")])
    await store.enqueue_outbox([notice("p:1", "changed")])
    await store.enqueue_outbox([])
    assert query("SELECT idem_key, text FROM outbox ORDER BY id") == [("p:1", "first"), ("p:2", "second")]
