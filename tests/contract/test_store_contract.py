"""The Store protocol's behaviour, as one suite run against every backend.

Only the public protocol is used here, so the same tests hold any backend to the same
contract. Backends: "sqlite" (a real file in tmp_path). The PostgreSQL backend joins
``BACKENDS`` when it lands: add a harness with ``store()`` (a new, unopened store over the
same state) and ``fresh()`` (a harness over new, empty state).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatgate.domain.context import ChatLabels
from chatgate.domain.errors import LeaseLost, StoreUnavailable
from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbound import Inbound
from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.outbox import OutboxDraft, OutboxSettlement
from chatgate.domain.turns import Claim
from chatgate.store.base import Store
from chatgate.store.sqlite import SqliteStore
from support.store_values import outcome, src

T = TypeVar("T")
BACKENDS = ["sqlite"]  # "postgres" joins when its backend lands


class Backend(Protocol):
    def store(self) -> Store: ...

    def fresh(self) -> Backend: ...


class SqliteBackend:
    _ids = itertools.count()

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / "contract.db"

    def store(self) -> Store:
        return SqliteStore(self.path)

    def fresh(self) -> SqliteBackend:
        return SqliteBackend(self.root / f"fresh-{next(self._ids)}")


def make_backend(name: str, root: Path) -> Backend:
    if name == "sqlite":
        return SqliteBackend(root)
    raise AssertionError(f"unknown backend {name}")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request.param, tmp_path)


OpenStore = Callable[[], Awaitable[Store]]


@pytest.fixture
async def open_store(backend: Backend) -> AsyncIterator[OpenStore]:
    """``await open_store()``: a new, opened store over the test's state, closed at teardown."""
    stores: list[Store] = []

    async def factory() -> Store:
        store = backend.store()
        await store.open()
        stores.append(store)
        return store

    yield factory
    for store in reversed(stores):
        await store.close()


@pytest.fixture
async def store(open_store: OpenStore) -> Store:
    return await open_store()


# ------------------------------------------------------------------ builders


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


# ------------------------------------------------------------------ admission


async def test_redelivered_delivery_id_returns_the_original_seq_and_session_key(store):
    first = await store.admit(req("d1", "k1"))
    again = await store.admit(req("d1", "k1"))
    assert first.new and not again.new
    assert (again.seq, again.session_key) == (first.seq, first.session_key)
    assert await store.queue_depth() == 1


async def test_redelivery_keeps_the_session_key_decided_at_first_admission(store):
    first = await store.admit(req("d1", "k1"))
    again = await store.admit(req("d1", "k2"))
    assert (again.new, again.session_key, again.seq) == (False, "k1", first.seq)
    assert await store.session_info("k2") is None


async def test_concurrent_copies_of_one_delivery_are_admitted_exactly_once(store):
    results = await asyncio.gather(*(store.admit(req("d1", "k1")) for _ in range(50)))
    assert sum(r.new for r in results) == 1
    assert len({(r.seq, r.session_key) for r in results}) == 1
    assert await store.queue_depth() == 1
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 100)
    assert [i.inbound.delivery_id for i in claim.items] == ["d1"]


async def test_identical_texts_with_different_delivery_ids_are_two_items(store):
    a = await store.admit(req("d1", "k1", "same"))
    b = await store.admit(req("d2", "k1", "same"))
    assert a.new and b.new and a.seq < b.seq
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 10)
    assert [(i.inbound.delivery_id, i.inbound.text) for i in claim.items] == [("d1", "same"), ("d2", "same")]


async def test_one_delivery_id_on_two_transports_is_two_items(store):
    a = await store.admit(req("d1", "k1", transport="telegram-webhook"))
    b = await store.admit(req("d1", "k1", transport="telegram-poll"))
    assert a.new and b.new and a.seq != b.seq
    assert await store.queue_depth() == 2


async def test_command_admission_is_not_queued_and_commits_its_reply_once(store):
    command = req("d1", "k1", "/status", queued=False, reply=draft("cmd:d1", kind="command", text="idle"))
    assert (await store.admit(command)).new
    assert await store.queue_depth() == 0
    assert await store.claim_sessions("w1", 10, 30.0, 10) == []
    assert not (await store.admit(command)).new
    (row,) = await store.unconfirmed_for_chat("webchat", "c1")
    assert (row.kind, row.text, row.status, row.session_key) == ("command", "idle", "pending", "k1")
    assert row.target == {"chat_id": "c1", "n": 1}


# ------------------------------------------------------------------ scheduling


async def test_claims_order_sessions_by_their_oldest_queued_item(store):
    for delivery_id, key in [("d1", "kc"), ("d2", "ka"), ("d3", "kb"), ("d4", "kc"), ("d5", "ka")]:
        await store.admit(req(delivery_id, key))
    claims = await store.claim_sessions("w1", 10, 30.0, 1)
    assert [c.session_key for c in claims] == ["kc", "ka", "kb"]
    assert [c.items[0].inbound.delivery_id for c in claims] == ["d1", "d2", "d3"]


async def test_claim_limit_caps_sessions_and_leaves_the_rest_for_the_next_claim(store):
    for delivery_id, key in [("d1", "kc"), ("d2", "ka"), ("d3", "kb")]:
        await store.admit(req(delivery_id, key))
    assert [c.session_key for c in await store.claim_sessions("w1", 2, 30.0, 1)] == ["kc", "ka"]
    assert [c.session_key for c in await store.claim_sessions("w1", 2, 30.0, 1)] == ["kb"]


async def test_leased_session_is_not_claimed_again_while_its_lease_is_live(store):
    await store.admit(req("d1", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    await store.admit(req("d2", "k1"))
    await store.admit(req("e1", "k2"))
    assert [c.session_key for c in await store.claim_sessions("w2", 10, 30.0, 1)] == ["k2"]
    assert await store.claim_sessions("w1", 10, 30.0, 1) == []
    info = await store.session_info("k1")
    assert info is not None and info.leased_by == "w1" and info.queued == 2
    assert claim.session_key == "k1"


async def test_batch_claims_take_the_head_items_in_admission_order(store):
    for i in range(5):
        await store.admit(req(f"d{i}", "k1", f"m{i}"))
    (one,) = await store.claim_sessions("w1", 10, 30.0, 1)
    assert texts(one) == ["m0"]
    await store.abandon_turn("w1", "k1", (one.items[0].seq,), None, None)
    (three,) = await store.claim_sessions("w1", 10, 30.0, 3)
    assert texts(three) == ["m0", "m1", "m2"]
    assert [i.seq for i in three.items] == sorted(i.seq for i in three.items)


async def test_every_claim_of_an_item_counts_one_attempt(store):
    await store.admit(req("d1", "k1"))
    (first,) = await store.claim_sessions("w1", 10, 0.05, 1)
    assert first.items[0].attempts == 1
    (second,) = await eventually(lambda: store.claim_sessions("w2", 10, 0.05, 1))
    assert second.items[0].seq == first.items[0].seq
    assert second.items[0].attempts == 2


async def test_expired_lease_passes_to_another_owner_and_the_old_owner_loses_the_turn(store):
    await store.admit(req("d1", "k1"))
    (mine,) = await store.claim_sessions("w1", 10, 0.05, 1)
    (theirs,) = await eventually(lambda: store.claim_sessions("w2", 10, 30.0, 1))
    with pytest.raises(LeaseLost):
        await store.complete_turn("w1", outcome(mine), 30.0, 1)
    assert await store.renew_lease("k1", "w1", 30.0) is False
    assert await store.history(mine.session_id, 10) == []
    assert await store.complete_turn("w2", outcome(theirs), 30.0, 1) is None
    assert len(await store.history(theirs.session_id, 10)) == 2


async def test_renew_lease_extends_only_the_owners_lease(store):
    await store.admit(req("d1", "k1"))
    await store.claim_sessions("w1", 10, 0.2, 1)
    assert await store.renew_lease("k1", "w2", 30.0) is False
    assert await store.renew_lease("k1", "w1", 30.0) is True
    await asyncio.sleep(0.3)  # past the original expiry; the renewed lease still holds
    assert await store.claim_sessions("w2", 10, 30.0, 1) == []
    assert await store.renew_lease("unknown", "w1", 30.0) is False


async def test_complete_turn_commits_the_turn_and_hands_over_the_next_item_in_fifo_order(store):
    for i, text in enumerate(["one", "two", "three"]):
        await store.admit(req(f"d{i}", "k1", text))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    assert texts(claim) == ["one"]
    nxt = await store.complete_turn("w1", outcome(claim, draft("final:1"), reply="re one"), 30.0, 1)
    assert texts(nxt) == ["two"] and nxt is not None
    assert nxt.items[0].attempts == 1 and nxt.session_id == claim.session_id
    assert await store.history(claim.session_id, 10) == [
        HistoryEntry(role="user", content="one"),
        HistoryEntry(role="assistant", content="re one"),
    ]
    (row,) = await store.unconfirmed_for_chat("webchat", "c1")
    assert (row.idem_key, row.status, row.kind) == ("final:1", "pending", "final")
    assert await store.queue_depth() == 2  # "two" is leased but not done, "three" waits
    info = await store.session_info("k1")
    assert info is not None and info.leased_by == "w1"

    last = await store.complete_turn("w1", outcome(nxt, reply="re two"), 30.0, 5)
    assert texts(last) == ["three"]
    assert last is not None
    assert await store.complete_turn("w1", outcome(last, reply="re three"), 30.0, 5) is None
    assert [e.content for e in await store.history(claim.session_id, 10)] == [
        "one", "re one", "two", "re two", "three", "re three",
    ]  # fmt: skip
    info = await store.session_info("k1")
    assert info is not None and (info.leased_by, info.queued) == (None, 0)
    assert await store.queue_depth() == 0


async def test_complete_turn_hands_over_the_next_batch(store):
    for i in range(5):
        await store.admit(req(f"d{i}", "k1", f"m{i}"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 2)
    nxt = await store.complete_turn("w1", outcome(claim), 30.0, 2)
    assert texts(claim) == ["m0", "m1"] and texts(nxt) == ["m2", "m3"]


async def test_session_released_by_complete_turn_can_be_claimed_by_another_owner(store):
    await store.admit(req("d1", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    assert await store.complete_turn("w1", outcome(claim), 30.0, 1) is None
    await store.admit(req("d2", "k1", "later"))
    (other,) = await store.claim_sessions("w2", 10, 30.0, 1)
    assert texts(other) == ["later"]


async def test_complete_turn_by_a_non_owner_raises_lease_lost_and_changes_nothing(store):
    await store.admit(req("d1", "k1"))
    await store.admit(req("d2", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    with pytest.raises(LeaseLost):
        await store.complete_turn("w2", outcome(claim, draft("final:x")), 30.0, 1)
    assert await store.history(claim.session_id, 10) == []
    assert await store.unconfirmed_for_chat("webchat", "c1") == []
    assert await store.queue_depth() == 2
    info = await store.session_info("k1")
    assert info is not None and info.leased_by == "w1"
    assert texts(await store.complete_turn("w1", outcome(claim), 30.0, 1)) == ["hello"]


async def test_completing_a_turn_twice_raises_lease_lost_and_records_it_once(store):
    await store.admit(req("d1", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    assert await store.complete_turn("w1", outcome(claim, draft("final:1")), 30.0, 1) is None
    with pytest.raises(LeaseLost):
        await store.complete_turn("w1", outcome(claim, draft("final:1")), 30.0, 1)
    assert len(await store.history(claim.session_id, 10)) == 2
    assert len(await store.unconfirmed_for_chat("webchat", "c1")) == 1


async def test_abandoned_items_return_to_the_queue_without_counting_the_attempt(store):
    await store.admit(req("d1", "k1"))
    await store.admit(req("d2", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 2)
    assert [i.attempts for i in claim.items] == [1, 1]
    await store.abandon_turn("w1", "k1", tuple(i.seq for i in claim.items), None, None)
    info = await store.session_info("k1")
    assert info is not None and (info.leased_by, info.queued) == (None, 2)
    (again,) = await store.claim_sessions("w2", 10, 30.0, 2)
    assert [i.seq for i in again.items] == [i.seq for i in claim.items]
    assert [i.attempts for i in again.items] == [1, 1]


async def test_session_waiting_to_retry_is_not_claimed_until_its_retry_time(store):
    await store.admit(req("d1", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    retry_at = time.time() + 0.3
    await store.abandon_turn("w1", "k1", (claim.items[0].seq,), retry_at, "agent exploded")
    await store.admit(req("e1", "k2"))
    assert [c.session_key for c in await store.claim_sessions("w1", 10, 30.0, 1)] == ["k2"]
    info = await store.session_info("k1")
    assert info is not None and info.last_error == "agent exploded" and info.leased_by is None
    (retried,) = await eventually(lambda: store.claim_sessions("w1", 10, 30.0, 1))
    assert time.time() >= retry_at
    assert retried.session_key == "k1" and retried.items[0].attempts == 1
    assert await store.complete_turn("w1", outcome(retried), 30.0, 1) is None
    info = await store.session_info("k1")
    assert info is not None and info.last_error is None


async def test_abandon_turn_by_a_former_owner_changes_nothing(store):
    await store.admit(req("d1", "k1"))
    (stale,) = await store.claim_sessions("w1", 10, 0.05, 1)  # attempt 1
    await eventually(lambda: store.claim_sessions("w2", 10, 0.05, 1))  # attempt 2
    await store.abandon_turn("w1", "k1", (stale.items[0].seq,), time.time() + 3600, "stale")
    info = await store.session_info("k1")
    assert info is not None and (info.leased_by, info.last_error) == ("w2", None)
    (third,) = await eventually(lambda: store.claim_sessions("w3", 10, 30.0, 1))
    assert third.items[0].attempts == 3


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


# ------------------------------------------------------------------ cancel and reset


async def test_cancel_command_cancels_the_sessions_queued_items_in_the_same_commit(store):
    for i in range(3):
        await store.admit(req(f"d{i}", "k1"))
    await store.admit(req("e1", "k2", chat_id="c2"))
    (running,) = await store.claim_sessions("w1", 1, 30.0, 1)
    assert running.session_key == "k1"
    stop = req(
        "stop-1", "k1", "/stop", queued=False, cancel_queued=True, reply=draft("cmd:stop-1", kind="command")
    )
    result = await store.admit(stop)
    assert (result.new, result.cancelled) == (True, 3)
    assert await store.queue_depth() == 1
    k1 = await store.session_info("k1")
    assert k1 is not None and k1.queued == 0
    assert [r.idem_key for r in await store.unconfirmed_for_chat("webchat", "c1")] == ["cmd:stop-1"]
    (other,) = await store.claim_sessions("w2", 10, 30.0, 1)
    assert other.session_key == "k2"
    assert (await store.admit(stop)).cancelled == 0  # a redelivered /stop cancels nothing more


async def test_complete_turn_for_cancelled_items_raises_lease_lost(store):
    await store.admit(req("d1", "k1", "one"))
    await store.admit(req("d2", "k1", "two"))
    (running,) = await store.claim_sessions("w1", 10, 30.0, 1)
    await store.admit(req("stop-1", "k1", "/stop", queued=False, cancel_queued=True))
    with pytest.raises(LeaseLost):
        await store.complete_turn("w1", outcome(running, draft("final:1")), 30.0, 1)
    assert await store.history(running.session_id, 10) == []
    assert await store.unconfirmed_for_chat("webchat", "c1") == []
    await store.abandon_turn("w1", "k1", (running.items[0].seq,), None, None)
    await store.admit(req("d3", "k1", "three"))
    (after,) = await store.claim_sessions("w1", 10, 30.0, 10)
    assert texts(after) == ["three"]  # cancelled items never come back


async def test_cancel_reply_states_how_many_items_were_cancelled(store):
    await store.admit(req("d1", "k1"))
    await store.admit(req("d2", "k1"))
    text = "Stopped. Dropped {cancelled} waiting message(s)."
    reply = draft("cmd:stop-1", kind="command", text=text)
    await store.admit(req("stop-1", "k1", "/stop", queued=False, cancel_queued=True, reply=reply))
    (row,) = await store.unconfirmed_for_chat("webchat", "c1")
    assert row.text == "Stopped. Dropped 2 waiting message(s)."


async def test_reset_session_starts_a_new_session_id_and_keeps_old_history_apart(store):
    await store.admit(req("d1", "k1", "before"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    await store.complete_turn("w1", outcome(claim), 30.0, 1)
    old_id = claim.session_id
    await store.admit(req("new-1", "k1", "/new", queued=False, cancel_queued=True, reset_session=True))
    info = await store.session_info("k1")
    assert info is not None and info.session_id != old_id
    assert await store.history(info.session_id, 10) == []
    assert len(await store.history(old_id, 10)) == 2
    await store.admit(req("d2", "k1", "after"))
    (fresh,) = await store.claim_sessions("w1", 10, 30.0, 1)
    assert fresh.session_id == info.session_id and texts(fresh) == ["after"]


# ------------------------------------------------------------------ outbox


async def test_claim_outbox_hands_out_only_the_head_row_of_each_chat(store):
    await put_outbox(store, draft("a1", "c1"), draft("a2", "c1"), draft("b1", "c2"), draft("a3", "c1"))
    claimed = await store.claim_outbox(10)
    assert [r.idem_key for r in claimed] == ["a1", "b1"]
    assert await store.claim_outbox(10) == []
    statuses = {r.idem_key: r.status for r in await store.unconfirmed_for_chat("webchat", "c1")}
    assert statuses == {"a1": "sending", "a2": "pending", "a3": "pending"}


async def test_claimed_outbox_rows_are_sending_and_count_this_attempt(store):
    await put_outbox(store, draft("a1", "c1"))
    (row,) = await store.claim_outbox(10)
    assert (row.status, row.attempts) == ("sending", 1)


async def test_next_row_of_a_chat_is_handed_out_once_its_head_is_sent(store):
    await put_outbox(store, draft("a1", "c1"), draft("a2", "c1"))
    (head,) = await store.claim_outbox(10)
    await store.settle_outbox([OutboxSettlement(id=head.id, status="sent", platform_message_id="pm-a1")])
    (nxt,) = await store.claim_outbox(10)
    assert nxt.idem_key == "a2"
    first = (await store.unconfirmed_for_chat("webchat", "c1"))[0]
    assert (first.idem_key, first.status, first.platform_message_id) == ("a1", "sent", "pm-a1")


async def test_head_row_waiting_to_retry_holds_back_the_rest_of_its_chat(store):
    await put_outbox(store, draft("a1", "c1"), draft("a2", "c1"), draft("b1", "c2"))
    claimed = {r.idem_key: r for r in await store.claim_outbox(10)}
    retry_at = time.time() + 0.3
    await store.settle_outbox(
        [
            OutboxSettlement(id=claimed["a1"].id, status="pending", retry_at=retry_at, error="429"),
            OutboxSettlement(id=claimed["b1"].id, status="sent"),
        ]
    )
    assert await store.claim_outbox(10) == []
    (again,) = await eventually(lambda: store.claim_outbox(10))
    assert time.time() >= retry_at
    assert (again.idem_key, again.attempts) == ("a1", 2)  # the second attempt, this one counted


async def test_failed_head_row_no_longer_holds_back_its_chat(store):
    await put_outbox(store, draft("a1", "c1"), draft("a2", "c1"))
    (head,) = await store.claim_outbox(10)
    await store.settle_outbox([OutboxSettlement(id=head.id, status="failed", error="rejected")])
    (nxt,) = await store.claim_outbox(10)
    assert nxt.idem_key == "a2"
    assert [r.idem_key for r in await store.unconfirmed_for_chat("webchat", "c1")] == ["a2"]


async def test_one_chat_id_on_two_platforms_is_two_chats(store):
    await put_outbox(store, draft("w1", "c1", platform="webchat"), draft("t1", "c1", platform="telegram"))
    assert {r.idem_key for r in await store.claim_outbox(10)} == {"w1", "t1"}
    assert [r.idem_key for r in await store.unconfirmed_for_chat("telegram", "c1")] == ["t1"]


async def test_claim_outbox_respects_its_limit_in_id_order(store):
    await put_outbox(store, *(draft(f"x{i}", f"c{i}") for i in range(5)))
    assert [r.idem_key for r in await store.claim_outbox(2)] == ["x0", "x1"]
    assert [r.idem_key for r in await store.claim_outbox(10)] == ["x2", "x3", "x4"]


async def test_unconfirmed_for_chat_lists_unconfirmed_pending_sending_and_sent_rows_in_id_order(store):
    await put_outbox(store, *(draft(f"r{i}", "c1") for i in range(1, 6)), draft("other", "c2"))

    async def head() -> int:
        rows = [r for r in await store.claim_outbox(10) if r.chat_id == "c1"]
        assert len(rows) == 1
        return rows[0].id

    r1 = await head()
    await store.settle_outbox([OutboxSettlement(id=r1, status="sent")])
    assert await store.confirm_outbox("webchat", "c1", r1) is True
    await store.settle_outbox([OutboxSettlement(id=await head(), status="sent", platform_message_id="p2")])
    await store.settle_outbox([OutboxSettlement(id=await head(), status="failed")])
    await head()  # r4 stays 'sending'
    rows = await store.unconfirmed_for_chat("webchat", "c1")
    assert [(r.idem_key, r.status) for r in rows] == [("r2", "sent"), ("r4", "sending"), ("r5", "pending")]
    assert [r.id for r in rows] == sorted(r.id for r in rows)
    assert [r.idem_key for r in await store.unconfirmed_for_chat("webchat", "c2")] == ["other"]


async def test_confirm_outbox_is_true_once_and_false_on_repeat_or_for_another_chat(store):
    await put_outbox(store, draft("a1", "c1"))
    (row,) = await store.claim_outbox(10)
    await store.settle_outbox([OutboxSettlement(id=row.id, status="sent")])
    assert await store.confirm_outbox("webchat", "c2", row.id) is False
    assert await store.confirm_outbox("telegram", "c1", row.id) is False
    assert await store.confirm_outbox("webchat", "c1", row.id + 1000) is False
    assert await store.confirm_outbox("webchat", "c1", row.id) is True
    assert await store.confirm_outbox("webchat", "c1", row.id) is False
    assert await store.unconfirmed_for_chat("webchat", "c1") == []


async def test_recording_an_outbox_draft_again_with_the_same_idem_key_is_a_noop(store):
    await put_outbox(store, draft("cmd:x", "c1", text="first"))
    await put_outbox(store, draft("cmd:x", "c1", text="second"))
    await store.admit(req("d1", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    await store.complete_turn("w1", outcome(claim, draft("cmd:x", "c1", text="third")), 30.0, 1)
    (row,) = await store.unconfirmed_for_chat("webchat", "c1")
    assert (row.idem_key, row.text) == ("cmd:x", "first")


# ------------------------------------------------------------------ chat labels


def labelled(
    delivery_id: str, key: str, name: str | None, topic: str | None = None, **kw: Any
) -> AdmitRequest:
    kw.setdefault("chat_id", "g1")
    return req(delivery_id, key, chat_type="group", chat_name=name, chat_topic=topic, **kw)


async def test_latest_label_observation_wins_whatever_order_sessions_were_created(store):
    await store.admit(labelled("d1", "k-ann", "Old", "t1", user_id="ann"))
    await store.admit(labelled("d2", "k-bob", "New", "t2", user_id="bob"))  # a session created later
    assert await store.chat_labels("webchat", None, "g1") == ChatLabels("New", "t2")
    await store.admit(labelled("d3", "k-ann", "Newest", "t3", user_id="ann"))  # back in the older session
    assert await store.chat_labels("webchat", None, "g1") == ChatLabels("Newest", "t3")
    await store.admit(
        req(
            "new-1",
            "k-bob",
            "/new",
            queued=False,
            reset_session=True,
            chat_id="g1",
            chat_type="group",
            user_id="bob",
        )
    )
    assert await store.chat_labels("webchat", None, "g1") == ChatLabels("Newest", "t3")
    await store.admit(labelled("d4", "k-cat", "Renamed", None, user_id="cat"))
    assert await store.chat_labels("webchat", None, "g1") == ChatLabels("Renamed", None)


async def test_admission_without_labels_keeps_the_last_observed_labels(store):
    await store.admit(labelled("d1", "k1", "Team", "Plans"))
    await store.admit(labelled("d2", "k1", None, None))
    await store.admit(labelled("d3", "k2", None, None, user_id="u2"))
    assert await store.chat_labels("webchat", None, "g1") == ChatLabels("Team", "Plans")


async def test_redelivered_old_event_does_not_roll_labels_back(store):
    await store.admit(labelled("d1", "k1", "Old"))
    await store.admit(labelled("d2", "k1", "New"))
    await store.admit(labelled("d1", "k1", "Old"))
    assert await store.chat_labels("webchat", None, "g1") == ChatLabels("New", None)


async def test_labels_survive_close_and_reopen(open_store):
    store = await open_store()
    await store.admit(labelled("d1", "k1", "Team", "Plans"))
    await store.close()
    again = await open_store()
    assert await again.chat_labels("webchat", None, "g1") == ChatLabels("Team", "Plans")


async def test_labels_are_kept_apart_by_platform_scope_and_chat(store):
    await store.admit(labelled("d1", "k1", "Plain"))
    await store.admit(labelled("d2", "k2", "Scoped", scope_id="guild-1"))
    await store.admit(labelled("d3", "k3", "Telegram", platform="telegram", transport="tg"))
    assert await store.chat_labels("webchat", None, "g1") == ChatLabels("Plain", None)
    assert await store.chat_labels("webchat", "guild-1", "g1") == ChatLabels("Scoped", None)
    assert await store.chat_labels("telegram", None, "g1") == ChatLabels("Telegram", None)
    assert await store.chat_labels("webchat", None, "g2") == ChatLabels()


# ------------------------------------------------------------------ sessions, absent vs unavailable


async def test_session_source_is_the_latest_admitted_source(store):
    await store.admit(req("d1", "k1", user_name="Ann"))
    await store.admit(req("d2", "k1", user_name="Annie"))
    await store.admit(req("d1", "k1", user_name="Redelivered"))
    source = await store.session_source("k1")
    assert source == src(user_name="Annie")


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


_CALLS: dict[str, Callable[[Store], Awaitable[Any]]] = {
    "ping": lambda s: s.ping(),
    "session_source": lambda s: s.session_source("k1"),
    "session_info": lambda s: s.session_info("k1"),
    "history": lambda s: s.history("sid", 10),
    "list_sessions": lambda s: s.list_sessions(),
    "queue_depth": lambda s: s.queue_depth(),
    "chat_labels": lambda s: s.chat_labels("webchat", None, "c1"),
    "unconfirmed_for_chat": lambda s: s.unconfirmed_for_chat("webchat", "c1"),
    "admit": lambda s: s.admit(req("d9", "k1")),
    "recover": lambda s: s.recover("w1"),
    "claim_sessions": lambda s: s.claim_sessions("w1", 10, 30.0, 1),
    "renew_lease": lambda s: s.renew_lease("k1", "w1", 30.0),
    "abandon_turn": lambda s: s.abandon_turn("w1", "k1", (1,), None, None),
    "claim_outbox": lambda s: s.claim_outbox(10),
    "settle_outbox": lambda s: s.settle_outbox([OutboxSettlement(id=1, status="sent")]),
    "confirm_outbox": lambda s: s.confirm_outbox("webchat", "c1", 1),
}


@pytest.mark.parametrize("name", sorted(_CALLS))
async def test_every_call_on_a_closed_store_raises_store_unavailable_never_absent(open_store, name):
    store = await open_store()
    await store.admit(req("d1", "k1"))
    await store.close()
    with pytest.raises(StoreUnavailable):
        await _CALLS[name](store)


async def test_complete_turn_on_a_closed_store_raises_store_unavailable(open_store):
    store = await open_store()
    await store.admit(req("d1", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.complete_turn("w1", outcome(claim), 30.0, 1)
    again = await open_store()
    assert await again.queue_depth() == 1  # nothing was half-written


# ------------------------------------------------------------------ property: per-session FIFO

SESSIONS = ("ka", "kb", "kc")
steps = st.lists(
    st.one_of(
        st.tuples(st.just("admit"), st.sampled_from(SESSIONS), st.integers(1, 3)),
        st.tuples(st.just("claim"), st.integers(1, 3), st.integers(1, 3)),
        st.tuples(st.just("complete"), st.integers(0, 5), st.integers(1, 3)),
        st.tuples(st.just("abandon"), st.integers(0, 5), st.just(0)),
    ),
    min_size=1,
    max_size=40,
)


async def _fifo_scenario(store: Store, plan: list[tuple[str, Any, int]]) -> None:
    admitted: dict[str, list[int]] = {k: [] for k in SESSIONS}  # seqs in admission (seq) order
    done: dict[str, list[int]] = {k: [] for k in SESSIONS}
    held: dict[str, Claim] = {}
    counter = itertools.count()

    def check_claim(claim: Claim, batch: int) -> None:
        pending = [s for s in admitted[claim.session_key] if s not in done[claim.session_key]]
        seqs = [i.seq for i in claim.items]
        assert 1 <= len(seqs) <= batch
        assert seqs == pending[: len(seqs)], "a claim must take the head of its session's queue"
        assert all(i.attempts == 1 for i in claim.items)  # no lease ever expired, abandons are free

    async def complete(claim: Claim, batch: int) -> None:
        nxt = await store.complete_turn("w", outcome(claim), 60.0, batch)
        done[claim.session_key].extend(i.seq for i in claim.items)
        del held[claim.session_key]
        if nxt is not None:
            check_claim(nxt, batch)
            held[nxt.session_key] = nxt

    for op, arg, n in plan:
        if op == "admit":
            results = await asyncio.gather(
                *(store.admit(req(f"d{next(counter)}", arg, chat_id=arg)) for _ in range(n))
            )
            admitted[arg].extend(r.seq for r in results)
            admitted[arg].sort()
        elif op == "claim":
            for claim in await store.claim_sessions("w", arg, 60.0, n):
                assert claim.session_key not in held, "a leased session was claimed twice"
                check_claim(claim, n)
                held[claim.session_key] = claim
        elif held:
            claim = held[sorted(held)[arg % len(held)]]
            if op == "complete":
                await complete(claim, n)
            else:
                await store.abandon_turn(
                    "w", claim.session_key, tuple(i.seq for i in claim.items), None, None
                )
                del held[claim.session_key]
    for _ in range(200):  # drain
        for claim in list(held.values()):
            await complete(claim, 2)
        if not held:
            claims = await store.claim_sessions("w", 3, 60.0, 2)
            if not claims:
                break
            for claim in claims:
                check_claim(claim, 2)
                held[claim.session_key] = claim
    assert done == admitted, "every item handled exactly once, in admission order per session"
    assert await store.queue_depth() == 0


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=steps)
def test_claim_and_complete_cycles_handle_each_sessions_items_once_in_admission_order(backend, plan):
    async def run() -> None:
        store = backend.fresh().store()
        await store.open()
        try:
            await _fifo_scenario(store, plan)
        finally:
            await store.close()

    asyncio.run(run())


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
