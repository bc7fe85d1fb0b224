"""Admission dedupe as seen in the file: one inbox row per (transport, delivery_id)."""

from __future__ import annotations

import asyncio
import json

from msgspec.structs import replace

from chatgate.domain.turns import ClaimTerms


async def test_fifty_concurrent_copies_of_one_delivery_leave_exactly_one_inbox_row(open_store, make, query):
    store = await open_store()
    results = await asyncio.gather(*(store.admit(make.request("d1", "k1", "hi")) for _ in range(50)))
    assert sum(r.new for r in results) == 1
    assert {(r.seq, r.session_key) for r in results} == {(results[0].seq, "k1")}
    assert query("SELECT transport, delivery_id, session_key, status FROM inbox") == [
        ("webchat", "d1", "k1", "queued")
    ]
    assert query("SELECT COUNT(*) FROM sessions") == [(1,)]


async def test_redelivery_under_another_session_key_keeps_the_stored_key_and_payload(open_store, make, query):
    store = await open_store()
    first = await store.admit(make.request("d1", "k1", "original"))
    again = await store.admit(make.request("d1", "k-other", "edited", chat_name="Renamed"))
    assert (again.new, again.seq, again.session_key) == (False, first.seq, "k1")
    ((key, payload),) = query("SELECT session_key, inbound_json FROM inbox")
    assert key == "k1"
    assert json.loads(payload)["text"] == "original"
    assert query("SELECT COUNT(*) FROM sessions WHERE key = 'k-other'") == [(0,)]
    assert query("SELECT COUNT(*) FROM chat_labels") == [(0,)]


async def test_identical_texts_with_different_delivery_ids_are_two_inbox_rows(open_store, make, query):
    store = await open_store()
    a = await store.admit(make.request("d1", "k1", "same words"))
    b = await store.admit(make.request("d2", "k1", "same words"))
    assert a.new and b.new and a.seq != b.seq
    assert query("SELECT delivery_id, json_extract(inbound_json, '$.text') FROM inbox ORDER BY seq") == [
        ("d1", "same words"),
        ("d2", "same words"),
    ]


async def test_stored_inbound_round_trips_through_the_claim(open_store, make):
    store = await open_store()
    request = make.request("d1", "k1", "héllo ✓", chat_type="group", chat_name="Ops", user_id="u9")
    await store.admit(request)
    (claim,) = await store.claim_sessions("w", 1, 30.0, 1)
    assert claim.items[0].inbound == request.inbound
    assert await store.session_source("k1") == request.inbound.source


async def test_an_idle_session_is_claimed_in_the_one_commit_that_admits_its_event(open_store, make, query):
    commits: list[int] = []
    store = await open_store(on_commit=lambda writes, _seconds: commits.append(writes))
    request = replace(make.request("d1", "k1", "hi"), claim=ClaimTerms("w1", 30.0, 1))
    before = len(commits)
    result = await store.admit(request)
    assert len(commits) == before + 1, "admission and claim are one transaction"
    assert result.claim is not None
    assert [(i.seq, i.attempts) for i in result.claim.items] == [(result.seq, 1)]
    assert query("SELECT lease_owner FROM sessions WHERE key = 'k1'") == [("w1",)]
    assert query("SELECT attempts, claimed_by FROM inbox") == [(1, "w1")]
    assert await store.claim_sessions("w2", 10, 30.0, 1) == []


async def test_an_admissions_claim_reads_the_turns_history_and_labels_in_its_transaction(open_store, make):
    store = await open_store()
    await store.admit(make.request("d1", "k1", "first", chat_name="Ops"))
    (claim,) = await store.claim_sessions("w1", 1, 30.0, 1)
    await store.complete_turn("w1", make.outcome(claim, reply="answer"), 30.0, 0)
    terms = ClaimTerms("w1", 30.0, 1, context_rows=1)
    result = await store.admit(replace(make.request("d2", "k1", "second", chat_name="Ops"), claim=terms))
    assert result.claim is not None and result.claim.context is not None
    assert [(e.role, e.content) for e in result.claim.context.history] == [("assistant", "answer")]
    assert result.claim.context.history == tuple(await store.history(claim.session_id, 1))
    assert result.claim.context.labels == await store.chat_labels("webchat", None, "c1")
    assert result.claim.context.labels.chat_name == "Ops"
    without = await store.admit(replace(make.request("d3", "k2", "x"), claim=ClaimTerms("w1", 30.0, 1)))
    assert without.claim is not None and without.claim.context is None, "no context asked, none read"
