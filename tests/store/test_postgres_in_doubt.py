"""In-doubt writes on PostgreSQL are resolved, not guessed (issue 32, finding 2).

Through ``CommitDroppingProxy``, a TCP relay in front of the real server: a failure after
a commit the client heard of leaves the write's result standing, and a delivery claim
whose commit answer was lost is checked and released before the failure is reported (or at
this process's next claim), not when its 300 s lease runs out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from chatgate.domain.errors import StoreUnavailable
from chatgate.store.postgres import PostgresStore
from contract.kit import draft, req
from support.pg_proxy import CommitDroppingProxy
from support.postgres import DSN, pg_schema_fixture, sql  # noqa: F401  (fixtures)
from support.store_values import outcome

pytestmark = pytest.mark.xdist_group("postgres-backend")


@pytest.fixture
async def proxied(pg_schema: str) -> AsyncIterator[tuple[PostgresStore, CommitDroppingProxy]]:
    proxy = CommitDroppingProxy(DSN)
    store = PostgresStore(await proxy.start(), schema=pg_schema)
    try:
        await store.open()
        yield store, proxy
    finally:
        await store.close()
        await proxy.aclose()


async def _sending(schema: str) -> list[tuple[int, str | None]]:
    rows = await sql(
        f'SELECT id, sending_holder FROM "{schema}".outbox WHERE status = $1 ORDER BY id', "sending"
    )
    return [(r["id"], r["sending_holder"]) for r in rows]


async def _rows(schema: str) -> list[tuple[int, str, bool]]:
    rows = await sql(f'SELECT id, status, possibly_duplicate FROM "{schema}".outbox ORDER BY id')
    return [(r["id"], r["status"], r["possibly_duplicate"]) for r in rows]


async def test_a_claim_whose_connection_fails_after_the_commit_hands_its_rows_out(proxied, pg_schema) -> None:
    """asyncpg's ``cannot switch to state 15`` case: the commit was answered, the reset on release
    failed. The claim committed, so its rows are this call's to send, not stuck ``sending``."""
    store, proxy = proxied
    await store.enqueue_outbox([draft("r1", "c1"), draft("r2", "c2")])
    proxy.fail_after_commit()
    rows = await store.claim_outbox(10)
    assert proxy.dropped == 1, "the connection failed after the commit"
    assert sorted(r.idem_key for r in rows) == ["r1", "r2"]
    assert [h for _, h in await _sending(pg_schema)] == [store.holder] * 2
    assert await store.claim_outbox(10) == [], "handed out once"


async def test_a_claim_whose_commit_answer_is_lost_is_resolved_and_released_before_it_is_reported(
    proxied, pg_schema, caplog: pytest.LogCaptureFixture
) -> None:
    store, proxy = proxied
    await store.enqueue_outbox([draft("r1", "c1")])
    proxy.drop_after_commit()
    with pytest.raises(StoreUnavailable):
        await store.claim_outbox(10)
    assert proxy.dropped == 1
    [(row_id, status, duplicate)] = await _rows(pg_schema)
    assert f"{row_id} (webchat/c1)" in caplog.text, "the claim committed; the row it held is named"
    assert (status, duplicate) == ("pending", True), "released before the failure was reported"
    again = await store.claim_outbox(10)
    assert [r.idem_key for r in again] == ["r1"], "taken back at once, not after the 300 s lease"
    assert again[0].possibly_duplicate


async def test_a_reply_claimed_by_a_turn_commit_whose_answer_is_lost_is_sent_at_the_next_claim(
    proxied, pg_schema
) -> None:
    store, proxy = proxied
    await store.admit(req("d1", "k1"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    proxy.drop_after_commit()
    with pytest.raises(StoreUnavailable):
        await store.commit_turn("w1", outcome(claim, draft("final:1", key="k1")), 30.0, 1, 1)
    assert [h for _, h in await _sending(pg_schema)] == [store.holder], "the commit claimed its reply"
    (again,) = await store.claim_outbox(10)
    assert (again.idem_key, again.possibly_duplicate) == ("final:1", True)
