"""The transcript role's contract: what was said per conversation, and each session's state;
absent is None or empty."""

from __future__ import annotations

from chatgate.domain.context import ChatLabels
from chatgate.domain.store_roles import (
    Transcript,
)
from contract.kit import covers, req
from support.store_values import outcome, src


@covers(Transcript.history)
async def test_history_returns_the_latest_entries_oldest_first(store):
    for i in range(3):
        await store.admit(req(f"d{i}", "k1", f"q{i}"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    while claim is not None:
        claim = await store.complete_turn(
            "w1", outcome(claim, reply=f"a{claim.items[0].inbound.text[1:]}"), 30.0, 1
        )
    info = await store.session_info("k1")
    assert info is not None
    assert [e.content for e in await store.history(info.session_id, 3)] == ["a1", "q2", "a2"]
    assert [e.role for e in await store.history(info.session_id, 100)] == ["user", "assistant"] * 3


@covers(Transcript.session_source)
async def test_session_source_is_the_latest_admitted_source(store):
    await store.admit(req("d1", "k1", user_name="Ann"))
    await store.admit(req("d2", "k1", user_name="Annie"))
    await store.admit(req("d1", "k1", user_name="Redelivered"))
    source = await store.session_source("k1")
    assert source == src(user_name="Annie")


@covers(Transcript.session_info, Transcript.list_sessions)
async def test_session_info_and_list_sessions_report_queue_lease_and_activity(store):
    await store.admit(req("d1", "k1"))
    await store.admit(req("d2", "k1"))
    await store.admit(req("e1", "k2", chat_id="c2", platform="telegram", transport="tg"))
    await store.claim_sessions("w1", 1, 30.0, 1)
    k1 = await store.session_info("k1")
    assert k1 is not None
    assert (k1.session_key, k1.platform, k1.chat_id, k1.queued, k1.leased_by) == (
        "k1",
        "webchat",
        "c1",
        2,
        "w1",
    )
    assert k1.created_at <= k1.last_activity
    sessions = await store.list_sessions()
    assert [s.session_key for s in sessions] == ["k2", "k1"]  # most recent activity first
    assert [s.session_key for s in await store.list_sessions(limit=1)] == ["k2"]


@covers(Transcript.session_source, Transcript.session_info, Transcript.history, Transcript.list_sessions)
async def test_reads_of_unknown_things_return_none_or_empty(store):
    assert await store.session_source("nope") is None
    assert await store.session_info("nope") is None
    assert await store.history("nope", 10) == []
    assert await store.list_sessions() == []
    assert await store.unconfirmed_for_chat("webchat", "nope") == []
    assert await store.chat_labels("webchat", None, "nope") == ChatLabels()
    assert await store.queue_depth() == 0
    assert await store.claim_sessions("w1", 10, 30.0, 1) == []
    assert await store.claim_outbox(10) == []
    assert await store.confirm_outbox("webchat", "nope", 1) is False
    assert await store.renew_lease("nope", "w1", 30.0) is False
    await store.ping()
