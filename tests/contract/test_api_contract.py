"""The API roles' contract: bearer keys by hash, and what an admitted request became."""

from __future__ import annotations

from chatgate.domain.api_keys import ApiKeyRecord, hash_token, new_api_key
from chatgate.domain.store_roles import ApiKeys, Exchanges, Inbox, Leases
from contract.kit import T0, covers, draft, req
from support.store_values import outcome


@covers(ApiKeys.create_api_key, ApiKeys.api_key_by_hash, ApiKeys.list_api_keys)
async def test_a_key_is_found_by_its_token_hash_only_and_listed_oldest_first(store):
    first_id, first = new_api_key()
    second_id, second = new_api_key()
    await store.create_api_key(ApiKeyRecord(second_id, "later", T0 + 5), hash_token(second))
    await store.create_api_key(ApiKeyRecord(first_id, "ci", T0), hash_token(first))
    assert await store.api_key_by_hash(hash_token(first)) == ApiKeyRecord(first_id, "ci", T0)
    assert await store.api_key_by_hash(hash_token(first + "x")) is None
    assert await store.api_key_by_hash(first) is None  # the token itself is not what is kept
    assert [k.key_id for k in await store.list_api_keys()] == [first_id, second_id]


@covers(ApiKeys.revoke_api_key, ApiKeys.api_key_by_hash, ApiKeys.list_api_keys)
async def test_a_revoked_key_stays_listed_as_revoked_and_revoking_twice_says_so(store):
    key_id, token = new_api_key()
    await store.create_api_key(ApiKeyRecord(key_id, "ci", T0), hash_token(token))
    assert await store.revoke_api_key(key_id, T0 + 1) is True
    assert await store.revoke_api_key(key_id, T0 + 2) is False
    assert await store.revoke_api_key("ffffffffffff", T0 + 2) is False
    found = await store.api_key_by_hash(hash_token(token))
    assert found is not None and not found.active and found.revoked_at == T0 + 1
    assert [k.active for k in await store.list_api_keys()] == [False]


@covers(ApiKeys.create_api_key)
async def test_a_key_survives_a_reopen(open_store):
    store = await open_store()
    key_id, token = new_api_key()
    await store.create_api_key(ApiKeyRecord(key_id, "ünï", T0), hash_token(token))
    await store.close()
    again = await open_store()
    assert await again.api_key_by_hash(hash_token(token)) == ApiKeyRecord(key_id, "ünï", T0)


@covers(Exchanges.api_exchange, Inbox.admit, Leases.complete_turn)
async def test_an_exchange_is_in_progress_until_its_turn_commits_then_carries_the_joined_final(store):
    assert await store.api_exchange("api", "d1") is None
    await store.admit(req("d1", "k1", "question", transport="api", platform="api"))
    running = await store.api_exchange("api", "d1")
    assert running is not None and running.state == "in_progress" and running.answer is None
    assert running.inbound_json["text"] == "question" and running.session_key == "k1"
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    seq = claim.items[0].seq
    parts = (
        draft(f"final:{seq}", platform="api", text="part one, "),
        draft(f"final:{seq}:1", platform="api", text="part two"),
        draft(f"final:{seq + 1}", platform="api", text="another turn's"),
    )
    await store.complete_turn("w1", outcome(claim, *parts), 30.0, 1)
    done = await store.api_exchange("api", "d1")
    assert done is not None and done.state == "completed" and done.seq == seq
    assert done.answer == "part one, part two"
    assert await store.api_exchange("webchat", "d1") is None  # the transport is part of the identity


@covers(Exchanges.api_exchange, Inbox.admit)
async def test_a_commands_exchange_answers_with_its_reply_and_a_cancelled_one_says_cancelled(store):
    reply = draft("cmd:api:c1", platform="api", kind="command", text="Started a new conversation.")
    await store.admit(req("w1", "k1", "hi", transport="api", platform="api"))
    await store.admit(req("c1", "k1", "/new", transport="api", platform="api", queued=False, reply=reply))
    stop = req("c2", "k1", "/stop", transport="api", platform="api", queued=False, cancel_queued=True)
    await store.admit(stop)
    command = await store.api_exchange("api", "c1")
    assert command is not None and command.state == "completed"
    assert command.answer == "Started a new conversation."
    cancelled = await store.api_exchange("api", "w1")
    assert cancelled is not None and cancelled.state == "cancelled" and cancelled.answer is None
