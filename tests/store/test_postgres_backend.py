"""The PostgreSQL backend's own promises, beyond the contract suite: versioned migrations,
``StoreUnavailable`` (never an asyncpg error) when the server or a connection goes away, and
nothing acknowledged lost when connections are killed under load.

Everything runs against the real PostgreSQL, in a schema of its own per test.
"""

from __future__ import annotations

import asyncio

import pytest

from chatgate.domain.errors import StoreUnavailable
from chatgate.store.postgres import PostgresStore
from chatgate.store.postgres.schema import SCHEMA_VERSION
from contract.kit import req
from support.postgres import (  # noqa: F401  (pg_schema and make_store are fixtures)
    DSN,
    kill_connections,
    make_store_fixture,
    pg_schema_fixture,
    require_postgres,
    sql,
)

pytestmark = pytest.mark.xdist_group("postgres-backend")


async def test_a_new_schema_is_created_and_migrated_to_the_current_version(make_store, pg_schema):
    store = make_store()
    await store.open()
    (row,) = await sql(f'SELECT version FROM "{pg_schema}".schema_version')
    assert row["version"] == SCHEMA_VERSION
    await store.close()
    again = make_store()
    await again.open()  # an up-to-date schema is left as it is
    assert [r["version"] for r in await sql(f'SELECT version FROM "{pg_schema}".schema_version')] == [
        SCHEMA_VERSION
    ]


async def test_a_fleet_starting_at_once_migrates_the_schema_once(make_store, pg_schema):
    stores = [make_store() for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    assert [r["version"] for r in await sql(f'SELECT version FROM "{pg_schema}".schema_version')] == [
        SCHEMA_VERSION
    ]
    await stores[0].admit(req("d1", "k1"))
    assert await stores[3].queue_depth() == 1


async def test_a_schema_newer_than_this_chatgate_is_refused_with_what_to_do(make_store, pg_schema):
    first = make_store()
    await first.open()
    await first.close()
    await sql(f'UPDATE "{pg_schema}".schema_version SET version = $1', SCHEMA_VERSION + 1)
    with pytest.raises(StoreUnavailable, match=r"newer than this chatgate.*upgrade chatgate"):
        await make_store().open()


async def test_an_unreachable_server_is_store_unavailable_at_open():
    require_postgres()
    store = PostgresStore("postgresql://postgres@127.0.0.1:1/test", schema="unused", connect_timeout=2.0)
    with pytest.raises(StoreUnavailable, match="postgresql open"):
        await store.open()
    with pytest.raises(StoreUnavailable):
        await store.queue_depth()


async def test_killed_connections_fail_calls_cleanly_and_the_store_recovers_without_a_reopen(make_store):
    store = make_store(pool_size=3)
    await store.open()
    await store.admit(req("before", "k1"))
    assert await kill_connections(store) >= 2  # the pool and the liveness connection
    outcomes: list[str] = []
    for i in range(20):
        try:
            await store.admit(req(f"after-{i}", "k1"))
            outcomes.append("ok")
        except StoreUnavailable:
            outcomes.append("unavailable")
    assert outcomes[-1] == "ok", outcomes  # the pool replaced the dead connections by itself
    assert await store.queue_depth() == 1 + outcomes.count("ok")
    await store.ping()  # and the liveness lock is held again


async def test_connections_killed_under_load_lose_nothing_that_was_acknowledged(make_store):
    store = make_store(pool_size=4)
    await store.open()
    acked: list[str] = []
    refused = 0

    async def client(c: int) -> None:
        nonlocal refused
        for i in range(40):
            delivery = f"c{c}-{i}"
            try:
                result = await store.admit(req(delivery, f"k{c}", f"message {i}"))
            except StoreUnavailable:
                refused += 1
                continue
            assert result.new
            acked.append(delivery)

    async def killer() -> None:
        for _ in range(5):
            await asyncio.sleep(0.05)
            await kill_connections(store)

    await asyncio.gather(*(client(c) for c in range(6)), killer())
    assert acked, "nothing was admitted at all"
    rows = await store.claim_sessions("w1", 100, 30.0, 1000)
    admitted = {item.inbound.delivery_id for claim in rows for item in claim.items}
    assert set(acked) <= admitted, sorted(set(acked) - admitted)
    # a refused admission either committed or did not; it never committed twice
    assert len(admitted) == sum(len(c.items) for c in rows)
