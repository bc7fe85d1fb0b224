"""PostgreSQL group commit: admissions that queue up share one transaction, each answered alone.

Rows written by one transaction share its id (``xmin``), so the inbox itself shows which
admissions were committed together. Order within a session, idempotency and one event's
refusal are checked inside such batches.
"""

from __future__ import annotations

import asyncio

import pytest

from chatgate.domain.errors import ScopeConflict
from contract.kit import req
from support.postgres import make_store_fixture, pg_schema_fixture, sql  # noqa: F401  (fixtures)

pytestmark = pytest.mark.xdist_group("postgres-backend")


async def _rows(schema: str) -> list[tuple[str, str, int, int]]:
    """(delivery id, session key, seq, transaction id) of every inbox row, in seq order."""
    rows = await sql(
        f'SELECT delivery_id, session_key, seq, xmin::text::bigint AS tx FROM "{schema}".inbox ORDER BY seq'
    )
    return [(r["delivery_id"], r["session_key"], r["seq"], r["tx"]) for r in rows]


async def test_admissions_that_queue_up_commit_in_fewer_transactions_in_order_per_session(
    make_store, pg_schema
) -> None:
    store = make_store()
    await store.open()
    # 40 at once: 8 sessions, 5 messages each, interleaved; submitted in this order.
    requests = [req(f"k{s}-m{i}", f"k{s}", f"m{i}") for i in range(5) for s in range(8)]
    results = await asyncio.gather(*(store.admit(r) for r in requests))
    assert all(r.new for r in results)
    rows = await _rows(pg_schema)
    assert len(rows) == len(requests)
    transactions = {tx for *_, tx in rows}
    assert len(transactions) < len(requests) // 2, f"{len(transactions)} transactions for 40 admissions"
    for s in range(8):
        mine = [d for d, key, _, _ in rows if key == f"k{s}"]
        assert mine == [f"k{s}-m{i}" for i in range(5)], "a session's events keep their order"
    assert [r.seq for r in results] == [
        next(seq for d, _, seq, _ in rows if d == r.inbound.delivery_id) for r in requests
    ], "each caller got its own event's seq"


async def test_a_redelivery_in_the_same_batch_is_a_duplicate_and_one_bad_event_refuses_only_itself(
    make_store, pg_schema
) -> None:
    store = make_store()
    await store.open()
    await store.admit(req("first", "kw", scope_id="T1"))  # kw is bound to workspace T1
    batch = [
        req("a", "k1"),
        req("a", "k1"),  # the same delivery again, before the first committed
        req("other-scope", "kw", scope_id="T2"),  # refused: another workspace's event for kw
        req("b", "k2"),
    ]
    answers = await asyncio.gather(*(store.admit(r) for r in batch), return_exceptions=True)
    first, again, refused, other = answers
    assert not isinstance(first, BaseException) and not isinstance(again, BaseException)
    assert first.new and not again.new and again.seq == first.seq
    assert isinstance(refused, ScopeConflict)
    assert not isinstance(other, BaseException) and other.new
    delivered = [d for d, *_ in await _rows(pg_schema)]
    assert delivered == ["first", "a", "b"]


async def test_a_batch_whose_commit_answer_is_lost_is_refused_and_its_redelivery_is_the_duplicate(
    pg_schema,
) -> None:
    """In doubt, each caller hears what a lone admission would: unavailable, so nothing is
    acknowledged as new or as a duplicate on a guess. The redelivery finds the rows."""
    from chatgate.domain.errors import StoreUnavailable
    from chatgate.store.postgres import PostgresStore
    from support.pg_proxy import CommitDroppingProxy
    from support.postgres import DSN

    proxy = CommitDroppingProxy(DSN)
    store = PostgresStore(await proxy.start(), schema=pg_schema)
    try:
        await store.open()
        requests = [req(f"m{i}", f"k{i % 3}", f"m{i}") for i in range(9)]
        proxy.drop_after_commit()
        answers = await asyncio.gather(*(store.admit(r) for r in requests), return_exceptions=True)
        assert proxy.dropped == 1
        assert all(isinstance(a, StoreUnavailable) for a in answers), answers
        rows = await _rows(pg_schema)
        assert sorted(d for d, *_ in rows) == sorted(r.inbound.delivery_id for r in requests)
        assert len({tx for *_, tx in rows}) == 1, "the batch committed, though no caller heard so"
        again = await asyncio.gather(*(store.admit(r) for r in requests))
        assert [a.new for a in again] == [False] * len(requests)
        assert [a.seq for a in again] == [
            next(seq for d, _, seq, _ in rows if d == r.inbound.delivery_id) for r in requests
        ]
    finally:
        await store.close()
        await proxy.aclose()
