"""The lifecycle role's contract: what was committed survives close and reopen, an outage is
never "absent", and a restart takes over what a dead predecessor left."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from chatgate.domain.accounts import Account, SignInToken, WebSession
from chatgate.domain.api_keys import ApiKeyRecord
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.media import MediaRecord
from chatgate.domain.outbox import OutboxSettlement
from chatgate.domain.pairing import PairingLimits
from chatgate.domain.store_roles import (
    Leases,
    Lifecycle,
)
from chatgate.domain.turns import TurnOutcome
from chatgate.store.base import Store
from contract.kit import T0, approval, covers, draft, put_outbox, req, texts
from contract.test_schedules_contract import schedule
from contract.test_tasks_contract import first, task
from support.store_values import outcome


@covers(Lifecycle.recover)
async def test_recover_releases_other_owners_leases_and_requeues_mid_send_rows_as_possible_duplicates(store):
    await store.admit(req("d1", "k1"))
    await store.admit(req("e1", "k2", chat_id="c2"))
    (dead,) = await store.claim_sessions("dead", 1, 3600.0, 1)
    (mine,) = await store.claim_sessions("me", 1, 3600.0, 1)
    assert (dead.session_key, mine.session_key) == ("k1", "k2")
    await put_outbox(store, draft("a", "c1"), draft("b", "c2"), draft("c", "c3"))
    rows = {r.idem_key: r for r in await store.claim_outbox(10)}
    assert set(rows) == {"a", "b", "c"}
    await store.settle_outbox([OutboxSettlement(id=rows["b"].id, status="sent", platform_message_id="pm")])

    assert await store.recover("me") == 1
    k1, k2 = await store.session_info("k1"), await store.session_info("k2")
    assert k1 is not None and k1.leased_by is None
    assert k2 is not None and k2.leased_by == "me"
    (taken,) = await store.claim_sessions("me", 10, 30.0, 1)
    assert taken.session_key == "k1" and taken.items[0].attempts == 2

    resent = {r.idem_key: r for r in await store.claim_outbox(10)}
    assert set(resent) == {"a", "c"}
    for key in ("a", "c"):
        assert resent[key].possibly_duplicate is True
        assert resent[key].attempts == rows[key].attempts + 1
        assert resent[key].message_id == rows[key].message_id == f"o{rows[key].id}"
    (b,) = await store.unconfirmed_for_chat("webchat", "c2")
    assert (b.status, b.possibly_duplicate, b.platform_message_id) == ("sent", False, "pm")


_CALLS: dict[str, Callable[[Store], Awaitable[Any]]] = {
    "ping": lambda s: s.ping(),
    "fleet_members": lambda s: s.fleet_members(),
    "session_source": lambda s: s.session_source("k1"),
    "session_info": lambda s: s.session_info("k1"),
    "history": lambda s: s.history("sid", 10),
    "list_sessions": lambda s: s.list_sessions(),
    "queue_depth": lambda s: s.queue_depth(),
    "chat_labels": lambda s: s.chat_labels("webchat", None, "c1"),
    "session_profile": lambda s: s.session_profile("k1"),
    "set_session_profile": lambda s: s.set_session_profile("k1", "fast", 1.0),
    "unconfirmed_for_chat": lambda s: s.unconfirmed_for_chat("webchat", "c1"),
    "unconfirmed_page": lambda s: s.unconfirmed_page("webchat", "c1", 0, 10),
    "admit": lambda s: s.admit(req("d9", "k1")),
    "make_durable": lambda s: s.make_durable(),
    "recover": lambda s: s.recover("w1"),
    "claim_sessions": lambda s: s.claim_sessions("w1", 10, 30.0, 1),
    "renew_lease": lambda s: s.renew_lease("k1", "w1", 30.0),
    "abandon_turn": lambda s: s.abandon_turn("w1", "k1", (1,), None, None),
    "claim_outbox": lambda s: s.claim_outbox(10),
    "settle_outbox": lambda s: s.settle_outbox([OutboxSettlement(id=1, status="sent")]),
    "confirm_outbox": lambda s: s.confirm_outbox("webchat", "c1", 1),
    "complete_turn": lambda s: s.complete_turn("w1", TurnOutcome("k1", "sid", (1,), (), (), "ok"), 30.0, 1),
    "commit_turn": lambda s: s.commit_turn("w1", TurnOutcome("k1", "sid", (1,), (), (), "ok"), 30.0, 1, 1),
    "queue_stats": lambda s: s.queue_stats(),
    "cancel_running": lambda s: s.cancel_running("k1", "stop"),
    "record_rejected": lambda s: s.record_rejected("relay", "d1", "bad", "{}"),
    "rejected": lambda s: s.rejected(),
    "enqueue_outbox": lambda s: s.enqueue_outbox([draft("n:1")]),
    "get_cursor": lambda s: s.get_cursor("poll"),
    "set_cursor": lambda s: s.set_cursor("poll", "1"),
    "create_approval": lambda s: s.create_approval(approval()),
    "set_prompt_shown": lambda s: s.set_prompt_shown("n1.00000001", "text", None),
    "get_approval": lambda s: s.get_approval("n1.00000001"),
    "open_approvals": lambda s: s.open_approvals("webchat", "c1"),
    "resolve_approval": lambda s: s.resolve_approval("n1.00000001", "denied", None, "u1", None, T0),
    "expire_open_approvals": lambda s: s.expire_open_approvals(T0, "restart"),
    "add_grant": lambda s: s.add_grant("always", None, "sudo", "sudo ls"),
    "granted": lambda s: s.granted("k1", ["sudo"]),
    "request_pairing": lambda s: s.request_pairing(
        "telegram", "u9", None, "c9", T0, PairingLimits(), lambda r: draft(f"pair:{r.code}")
    ),
    "approve_pairing": lambda s: s.approve_pairing("ABCDEFGH", T0, PairingLimits()),
    "revoke_pairing": lambda s: s.revoke_pairing("telegram", "u9"),
    "paired_users": lambda s: s.paired_users(),
    "pending_pairings": lambda s: s.pending_pairings(T0),
    "record_preview": lambda s: s.record_preview("w1", "k1", "pm1"),
    "record_notices": lambda s: s.record_notices("w1", "k1", [draft("notice:1:2", kind="notice")]),
    "outbox_status": lambda s: s.outbox_status("final:1"),
    "undelivered_in_chat": lambda s: s.undelivered_in_chat("webchat", "c1"),
    "hold_chat_route": lambda s: s.hold_chat_route("webchat", "c1"),
    "undelivered": lambda s: s.undelivered(T0, 120.0, 20),
    "create_api_key": lambda s: s.create_api_key(ApiKeyRecord("0123456789ab", "ci", T0), "h" * 64),
    "api_key_by_hash": lambda s: s.api_key_by_hash("h" * 64),
    "list_api_keys": lambda s: s.list_api_keys(),
    "revoke_api_key": lambda s: s.revoke_api_key("0123456789ab", T0),
    "api_exchange": lambda s: s.api_exchange("webchat", "d1"),
    "save_schedule": lambda s: s.save_schedule(schedule()),
    "get_schedule": lambda s: s.get_schedule("s1"),
    "list_schedules": lambda s: s.list_schedules(),
    "due_schedules": lambda s: s.due_schedules(T0, 10),
    "next_schedule_at": lambda s: s.next_schedule_at(),
    "advance_schedule": lambda s: s.advance_schedule("s1", T0, None),
    "pause_schedule": lambda s: s.pause_schedule("s1", True),
    "delete_schedule": lambda s: s.delete_schedule("s1"),
    "start_task": lambda s: s.start_task(task(), first(task())),
    "get_task": lambda s: s.get_task("t1"),
    "list_tasks": lambda s: s.list_tasks("k1"),
    "cancel_task": lambda s: s.cancel_task("t1", "x"),
    "close_stale_tasks": lambda s: s.close_stale_tasks(T0, "x"),
    "create_account": lambda s: s.create_account(Account("0123456789ab", "ann", "user", T0), None),
    "account_by_name": lambda s: s.account_by_name("ann"),
    "list_accounts": lambda s: s.list_accounts(),
    "add_sign_in_token": lambda s: s.add_sign_in_token(SignInToken("0123456789ab", "u1", T0), "h" * 64),
    "sign_in_token_by_hash": lambda s: s.sign_in_token_by_hash("h" * 64),
    "list_sign_in_tokens": lambda s: s.list_sign_in_tokens(),
    "revoke_account": lambda s: s.revoke_account("u1", T0),
    "revoke_sign_in_token": lambda s: s.revoke_sign_in_token("0123456789ab", T0),
    "create_web_session": lambda s: s.create_web_session(WebSession("s1", "u1", T0, T0 + 9), "h" * 64),
    "signed_in": lambda s: s.signed_in("h" * 64, T0),
    "end_web_session": lambda s: s.end_web_session("s1", T0),
    "live_sessions": lambda s: s.live_sessions(["s1"], T0),
    "claim_chat": lambda s: s.claim_chat("web", "c1", "u1", T0),
    "chat_owner": lambda s: s.chat_owner("web", "c1"),
    "set_chat_title": lambda s: s.set_chat_title("web", "c1", "t", replace=False),
    "delete_chat": lambda s: s.delete_chat("web", "c1"),
    "list_chats": lambda s: s.list_chats("web", "u1", None, 10),
    "chat_history": lambda s: s.chat_history("web", "c1", None, 10),
    "media_record": lambda s: s.media_record("1:0"),
    "record_media": lambda s: s.record_media(MediaRecord("1:0", None, "x", "f"), T0),
    "put_blob": lambda s: s.put_blob("a" * 64, "/nonexistent/upload"),
    "read_blob": lambda s: s.read_blob("a" * 64),
    "open_blob": lambda s: s.open_blob("a" * 64),
    "media_usage": lambda s: s.media_usage("web:u1"),
    "expire_media": lambda s: s.expire_media(T0),
    "sweep_blobs": lambda s: s.sweep_blobs(T0),
    "shared_key": lambda s: s.shared_key("uploads"),
}
"""One call of every role method but ``open`` and ``close``: on a closed store each must fail
loudly (``test_role_coverage.py`` checks that none is missing)."""


@pytest.mark.parametrize("name", sorted(_CALLS))
async def test_every_call_on_a_closed_store_raises_store_unavailable_never_absent(open_store, name):
    store = await open_store()
    await store.admit(req("d1", "k1"))
    await store.close()
    with pytest.raises(StoreUnavailable):
        await _CALLS[name](store)


@covers(Lifecycle.close, Leases.complete_turn)
async def test_complete_turn_on_a_closed_store_raises_store_unavailable(open_store):
    store = await open_store()
    await store.admit(req("d1", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.complete_turn("w1", outcome(claim), 30.0, 1)
    again = await open_store()
    assert await again.queue_depth() == 1  # nothing was half-written


def test_fresh_backends_do_not_share_state(backend):
    async def run() -> None:
        a, b = backend.fresh().store(), backend.fresh().store()
        await a.open()
        await b.open()
        try:
            await a.admit(req("d1", "k1"))
            assert await b.queue_depth() == 0
        finally:
            await a.close()
            await b.close()

    asyncio.run(run())


@covers(Lifecycle.open, Lifecycle.close)
async def test_what_was_committed_before_close_is_there_after_reopen(open_store):
    store = await open_store()
    await store.open()  # opening an open store changes nothing
    await store.admit(req("d1", "k1", "one"))
    await put_outbox(store, draft("a1"))
    await store.close()
    await store.close()  # and closing twice is harmless
    again = await open_store()
    assert await again.queue_depth() == 1
    (claim,) = await again.claim_sessions("w1", 10, 30.0, 1)
    assert texts(claim) == ["one"]
    assert [r.idem_key for r in await again.unconfirmed_for_chat("webchat", "c1")] == ["a1"]


@covers(Lifecycle.close)
async def test_close_lets_the_writes_in_flight_finish_and_loses_none_of_them(open_store):
    store = await open_store()
    writes = [asyncio.ensure_future(store.admit(req(f"d{i}", f"k{i}"))) for i in range(20)]
    await asyncio.sleep(0)  # every write has started
    await store.close()
    results = await asyncio.gather(*writes)
    assert all(r.new for r in results)
    again = await open_store()
    assert await again.queue_depth() == 20


@covers(Lifecycle.ping)
async def test_ping_answers_only_while_the_store_is_open(backend):
    store = backend.store()
    with pytest.raises(StoreUnavailable):
        await store.ping()  # not opened yet
    await store.open()
    try:
        await store.ping()
        await store.ping(timeout=0.5)
    finally:
        await store.close()
    with pytest.raises(StoreUnavailable):
        await store.ping()
