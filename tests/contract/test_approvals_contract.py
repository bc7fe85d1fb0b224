"""The approvals role's contract: a prompt is decided exactly once (a compare-and-set), a late answer
loses to the deadline, a won session or always approval is remembered, and an answer committed with
its event is never applied twice by a redelivery."""

from __future__ import annotations

import asyncio
import time

import msgspec
import pytest

from chatgate.domain.approvals import ApprovalAnswer, ApprovalRecord, ApprovalResolution
from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.store_roles import (
    Approvals,
    Inbox,
)
from chatgate.store.base import Store
from contract.kit import T0, approval, covers, draft, notice, req


async def session_for(store: Store, key: str = "k1", delivery_id: str = "d-session") -> str:
    """Create the session of ``key`` (as an admitted message does) and return its session id."""
    await store.admit(req(delivery_id, key))
    info = await store.session_info(key)
    assert info is not None
    return info.session_id


def answering(delivery_id: str, answer: ApprovalAnswer) -> AdmitRequest:
    reply = draft(f"cmd:webchat:{delivery_id}", kind="command", text="(rendered)")
    return msgspec.structs.replace(
        req(delivery_id, "k1", "/approve", queued=False, reply=reply), answer=answer
    )


@covers(Approvals.create_approval, Approvals.get_approval, Approvals.set_prompt_shown)
async def test_a_created_prompt_reads_back_exactly_and_survives_a_reopen(open_store):
    store = await open_store()
    rec = approval(target={"thread_id": "t1", "user_id": "u1"}, prompt_via="text")
    await store.create_approval(rec)
    assert await store.get_approval(rec.prompt_id) == rec
    await store.set_prompt_shown(rec.prompt_id, "buttons", "pm-7")
    await store.set_prompt_shown(rec.prompt_id, "buttons", None)  # an unknown message id keeps the known one
    await store.close()
    again = await open_store()
    shown = msgspec.structs.replace(rec, prompt_via="buttons", prompt_message_id="pm-7")
    assert await again.get_approval(rec.prompt_id) == shown
    assert shown.prompt().message_id == "pm-7"
    assert await again.get_approval("n1.missing") is None


@covers(Approvals.open_approvals)
async def test_open_approvals_lists_the_chats_pending_prompts_oldest_first(store):
    await store.create_approval(approval("n1.00000003", requested_at=T0 + 2))
    await store.create_approval(approval("n1.00000001", requested_at=T0))
    await store.create_approval(approval("n1.00000002", requested_at=T0 + 1))
    await store.create_approval(approval("n1.00000004", chat_id="other"))
    await store.create_approval(approval("n1.00000005", platform="telegram"))
    await store.resolve_approval("n1.00000002", "denied", None, "u1", "Ann", T0 + 5)
    assert [r.prompt_id for r in await store.open_approvals("webchat", "c1")] == [
        "n1.00000001",
        "n1.00000003",
    ]
    assert [r.prompt_id for r in await store.open_approvals("webchat", "other")] == ["n1.00000004"]
    assert [r.prompt_id for r in await store.open_approvals("telegram", "c1")] == ["n1.00000005"]
    assert await store.open_approvals("webchat", "nope") == []


@covers(Approvals.resolve_approval, Approvals.get_approval)
async def test_the_first_resolution_wins_and_a_second_is_told_what_was_recorded(store):
    await store.create_approval(approval())
    first = await store.resolve_approval("n1.00000001", "approved", "once", "u1", "Ann", T0 + 10)
    second = await store.resolve_approval("n1.00000001", "denied", None, "u2", "Bob", T0 + 11)
    assert first.won and not second.won
    assert first.record is not None and second.record == first.record
    assert (first.record.state, first.record.tier, first.record.answered_by_id) == ("approved", "once", "u1")
    assert (first.record.answered_by_name, first.record.answered_at) == ("Ann", T0 + 10)
    assert await store.get_approval("n1.00000001") == first.record


@covers(Approvals.resolve_approval)
async def test_of_many_concurrent_resolutions_exactly_one_wins(store):
    await store.create_approval(approval())
    results = await asyncio.gather(
        *(
            store.resolve_approval(
                "n1.00000001", "approved" if i % 2 else "denied", "once", f"u{i}", None, T0
            )
            for i in range(20)
        )
    )
    assert sum(r.won for r in results) == 1
    winner = next(r for r in results if r.won).record
    assert winner is not None and all(r.record == winner for r in results)
    assert await store.get_approval("n1.00000001") == winner


@covers(Approvals.resolve_approval, Approvals.granted)
async def test_an_answer_after_the_deadline_loses_and_records_the_expiry(store):
    await session_for(store)
    await store.create_approval(approval())
    late = await store.resolve_approval("n1.00000001", "approved", "always", "u1", "Ann", T0 + 300)
    assert not late.won and late.record is not None
    assert (late.record.state, late.record.reason, late.record.tier) == ("expired", "timeout", None)
    assert late.record.answered_by_id is None
    assert await store.get_approval("n1.00000001") == late.record
    assert not await store.granted("k1", ["recursive_delete"])  # a lost "always" grants nothing


@covers(Approvals.resolve_approval)
async def test_the_timeout_itself_expires_a_prompt_past_its_deadline(store):
    await store.create_approval(approval())
    expired = await store.resolve_approval(
        "n1.00000001", "expired", None, None, None, T0 + 301, reason="timeout", notice=notice("n:1")
    )
    assert expired.won and expired.record is not None
    assert (expired.record.state, expired.record.reason) == ("expired", "timeout")


@covers(Approvals.resolve_approval)
async def test_a_notice_is_recorded_only_by_the_winning_resolution(store):
    await store.create_approval(approval())
    await store.resolve_approval(
        "n1.00000001", "denied", None, "u1", "Ann", T0 + 1, notice=notice("n:1", "a")
    )
    await store.resolve_approval(
        "n1.00000001", "expired", None, None, None, T0 + 2, notice=notice("n:2", "b")
    )
    rows = await store.unconfirmed_for_chat("webchat", "c1")
    assert [(r.idem_key, r.text, r.kind, r.status) for r in rows] == [("n:1", "a", "notice", "pending")]


@covers(Approvals.resolve_approval)
async def test_resolving_an_unknown_prompt_finds_nothing_and_records_nothing(store):
    found = await store.resolve_approval("n1.nope", "approved", "once", "u1", None, T0, notice=notice("n:1"))
    assert found == ApprovalResolution(None, False)
    assert await store.unconfirmed_for_chat("webchat", "c1") == []


@covers(Approvals.expire_open_approvals)
async def test_expire_open_approvals_expires_only_pending_ones_each_with_its_notice(store):
    await store.create_approval(approval("n1.00000001"))
    await store.create_approval(approval("n1.00000002", requested_at=T0 + 1))
    await store.create_approval(approval("n1.00000003"))
    await store.resolve_approval("n1.00000003", "approved", "once", "u1", "Ann", T0 + 2)

    def notice_for(rec: ApprovalRecord) -> OutboxDraft | None:
        if rec.prompt_id.endswith("2"):
            return None  # a prompt may end without a notice
        return notice(f"prompt:{rec.prompt_id}:expired", f"{rec.command} expired ({rec.reason})")

    expired = await store.expire_open_approvals(T0 + 3, "restart", notice_for)
    assert [(r.prompt_id, r.state, r.reason, r.answered_at) for r in expired] == [
        ("n1.00000001", "expired", "restart", T0 + 3),
        ("n1.00000002", "expired", "restart", T0 + 3),
    ]
    assert [r.state for r in [await store.get_approval(f"n1.0000000{i}") for i in (1, 2, 3)] if r] == [
        "expired",
        "expired",
        "approved",
    ]
    assert [(r.idem_key, r.text) for r in await store.unconfirmed_for_chat("webchat", "c1")] == [
        ("prompt:n1.00000001:expired", "rm -rf ./x expired (restart)")
    ]
    assert await store.open_approvals("webchat", "c1") == []
    assert await store.expire_open_approvals(T0 + 4, "restart", notice_for) == []


@covers(Approvals.granted, Approvals.resolve_approval)
async def test_a_session_approval_grants_its_rules_until_new(store):
    session_id = await session_for(store)
    await store.create_approval(
        approval(session_id=session_id, rule_keys=("recursive_delete", "outside_workdir"))
    )
    assert not await store.granted("k1", ["recursive_delete"])
    assert (await store.resolve_approval("n1.00000001", "approved", "session", "u1", "Ann", T0 + 1)).won
    assert await store.granted("k1", ["recursive_delete"])
    assert await store.granted("k1", ["recursive_delete", "outside_workdir"])
    assert not await store.granted("k1", ["recursive_delete", "sudo"])  # every rule must be granted
    assert not await store.granted("k2", ["recursive_delete"])  # another session
    await store.admit(req("d-new", "k1", "/new", queued=False, reset_session=True))
    assert not await store.granted("k1", ["recursive_delete"])


@covers(Approvals.granted, Approvals.resolve_approval)
async def test_a_grant_won_for_an_earlier_conversation_never_applies(store):
    old_id = await session_for(store)
    await store.create_approval(approval(session_id=old_id))
    await store.admit(req("d-new", "k1", "/new", queued=False, reset_session=True))
    assert (await store.resolve_approval("n1.00000001", "approved", "session", "u1", "Ann", T0 + 1)).won
    assert not await store.granted("k1", ["recursive_delete"])


@covers(Approvals.granted, Approvals.resolve_approval)
async def test_an_always_approval_applies_to_every_session_and_once_or_deny_grant_nothing(store):
    await session_for(store)
    await store.create_approval(approval("n1.00000001", rule_keys=("sudo",)))
    await store.create_approval(approval("n1.00000002", rule_keys=("force_push",)))
    await store.create_approval(approval("n1.00000003"))
    await store.resolve_approval("n1.00000001", "approved", "once", "u1", "Ann", T0 + 1)
    await store.resolve_approval("n1.00000002", "denied", "session", "u1", "Ann", T0 + 1)
    assert not await store.granted("k1", ["sudo"]) and not await store.granted("k1", ["force_push"])
    denied = await store.get_approval("n1.00000002")
    assert denied is not None and denied.tier is None
    assert (await store.resolve_approval("n1.00000003", "approved", "always", "u1", "Ann", T0 + 1)).won
    assert await store.granted("k1", ["recursive_delete"])
    assert await store.granted("any-other-session", ["recursive_delete"])


@covers(Approvals.add_grant, Approvals.granted)
async def test_add_grant_remembers_per_session_or_for_every_session(store):
    await session_for(store)
    await store.add_grant("session", "k1", "sudo", "sudo ls")
    await store.add_grant("always", None, "force_push", "git push -f")
    await store.add_grant("session", "k1", "sudo", "sudo ls -l")  # again: still one grant
    assert await store.granted("k1", ["sudo", "force_push"])
    assert not await store.granted("k9", ["sudo"])
    assert await store.granted("k9", ["force_push"])
    assert await store.granted("k1", [])
    with pytest.raises(ValueError):
        await store.add_grant("session", "no-such-session", "sudo", "sudo ls")
    with pytest.raises(ValueError):
        await store.add_grant("forever", "k1", "sudo", "sudo ls")  # type: ignore[arg-type]
    assert not await store.granted("no-such-session", ["sudo"])


@covers(Inbox.admit, Approvals.get_approval)
async def test_an_answer_commits_with_its_event_and_a_redelivery_resolves_nothing(store):
    far = time.time() + 3600  # admission answers at the real time
    await store.create_approval(approval("n1.00000001", expires_at=far))
    await store.create_approval(approval("n1.00000002", requested_at=T0 + 1, expires_at=far))
    seen: list[ApprovalResolution] = []

    def render(resolution: ApprovalResolution) -> str:
        seen.append(resolution)
        assert resolution.record is not None
        return f"{'won' if resolution.won else 'lost'}: {resolution.record.state}"

    first = await store.admit(
        answering("d-approve", ApprovalAnswer("n1.00000001", "approved", "once", "u1", "Ann", render))
    )
    assert first.new and first.resolution is not None and first.resolution.won
    # Redelivered while another prompt is open: it must not resolve that one.
    again = await store.admit(
        answering("d-approve", ApprovalAnswer("n1.00000002", "approved", "once", "u1", "Ann", render))
    )
    assert not again.new and again.resolution is None
    states = [await store.get_approval(p) for p in ("n1.00000001", "n1.00000002")]
    assert [r.state for r in states if r] == ["approved", "pending"]
    assert [r.text for r in await store.unconfirmed_for_chat("webchat", "c1")] == ["won: approved"]
    assert await store.queue_depth() == 0 and len(seen) == 1


@covers(Inbox.admit, Approvals.resolve_approval)
async def test_a_losing_answer_still_commits_its_event_with_the_recorded_outcome(store):
    await store.create_approval(approval())
    await store.resolve_approval("n1.00000001", "denied", None, "u2", "Bob", T0 + 1)

    def render(resolution: ApprovalResolution) -> str:
        rec = resolution.record
        assert rec is not None
        return f"{'won' if resolution.won else 'lost'}: {rec.state} by {rec.answered_by_name}"

    result = await store.admit(
        answering("d-late", ApprovalAnswer("n1.00000001", "approved", "once", "u1", "Ann", render))
    )
    assert result.new and result.resolution is not None and not result.resolution.won
    assert [r.text for r in await store.unconfirmed_for_chat("webchat", "c1")] == ["lost: denied by Bob"]
    recorded = await store.get_approval("n1.00000001")
    assert recorded is not None and (recorded.state, recorded.answered_by_id) == ("denied", "u2")
