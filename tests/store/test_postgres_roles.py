"""The PostgreSQL halves of the API, schedule and task roles, beyond their contract tests:
a v1 schema (before these roles) upgrades in place, an exchange's reply parts are found
whatever the database's collation, and across two processes of a fleet a delegated task
ends once and its completion keeps the parent's chat reachable where it was.

Everything runs against the real PostgreSQL, in a schema (or a database) of its own per test.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from chatgate.domain.api_keys import ApiKeyRecord, hash_token, new_api_key
from chatgate.domain.background import TASK_TRANSPORT, TaskRecord, child_delivery_id, child_session_key
from chatgate.domain.errors import LeaseLost
from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbound import Inbound
from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.turns import Claim, TurnOutcome
from chatgate.store.postgres import PostgresStore
from chatgate.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from contract.kit import T0, draft, req
from support.postgres import DSN, make_store_fixture, pg_schema_fixture, require_postgres, sql  # noqa: F401
from support.store_values import outcome, src

pytestmark = pytest.mark.xdist_group("postgres-backend")


def delegate(tid: str, parent_sid: str) -> tuple[TaskRecord, AdmitRequest]:
    task = TaskRecord(tid, "delegate", "k1", parent_sid, child_session_key("k1", tid), src(), f"do {tid}", T0)
    inbound = Inbound(
        transport=TASK_TRANSPORT,
        delivery_id=child_delivery_id(tid),
        source=task.origin,
        text=task.prompt,
        payload={"task": {"id": tid, "kind": "delegate", "parent": "k1"}},
    )
    return task, AdmitRequest(inbound=inbound, session_key=task.child_key)


def answered(claim: Claim, text: str) -> TurnOutcome:
    entries = (HistoryEntry("user", claim.items[0].inbound.text), HistoryEntry("assistant", text))
    return TurnOutcome(
        claim.session_key, claim.session_id, tuple(i.seq for i in claim.items), entries, (), "ok"
    )


async def _parent_with_route(a: PostgresStore) -> str:
    """k1 admitted through process a (its chat is reachable there); its session id."""
    await a.admit(req("m1", "k1", queued=False))
    info = await a.session_info("k1")
    assert info is not None
    return info.session_id


async def _route_of(schema: str, key: str) -> str | None:
    (row,) = await sql(f'SELECT route_holder FROM "{schema}".sessions WHERE key = $1', key)
    return row["route_holder"]  # type: ignore[no-any-return]


async def test_a_v1_schema_upgrades_to_the_new_roles_and_keeps_its_rows(make_store, pg_schema):
    conn = await asyncpg.connect(DSN)
    try:  # the schema as the release before these roles left it, with a row in it
        await conn.execute(f'CREATE SCHEMA "{pg_schema}"; SET search_path TO "{pg_schema}"')
        await conn.execute(MIGRATIONS[0])
        await conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        await conn.execute("INSERT INTO schema_version (version) VALUES (1)")
        await conn.execute("INSERT INTO cursors (name, value, updated_at) VALUES ('poll', '41', 0)")
    finally:
        await conn.close()
    store = make_store()
    await store.open()
    assert [r["version"] for r in await sql(f'SELECT version FROM "{pg_schema}".schema_version')] == [
        SCHEMA_VERSION
    ]
    assert await store.get_cursor("poll") == "41"
    key_id, token = new_api_key()
    await store.create_api_key(ApiKeyRecord(key_id, "ci", T0), hash_token(token))
    assert await store.api_key_by_hash(hash_token(token)) == ApiKeyRecord(key_id, "ci", T0)
    assert await store.list_schedules() == [] and await store.list_tasks("k1") == []


@pytest.fixture
async def icu_store() -> AsyncIterator[tuple[PostgresStore, str]]:
    """A store in a database of its own whose default collation is ICU English; and its DSN."""
    require_postgres()
    name = f"cg_icu_{uuid.uuid4().hex[:10]}"
    await sql(
        f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu"
        " ICU_LOCALE 'en' LOCALE 'C.UTF-8'"
    )
    dsn = DSN.rsplit("/", 1)[0] + f"/{name}"
    store = PostgresStore(dsn, schema="cg")
    try:
        await store.open()
        yield store, dsn
    finally:
        await store.close()
        await sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def test_an_exchanges_reply_parts_are_joined_under_a_collation_that_sorts_punctuation_its_way(
    icu_store,
):
    store, dsn = icu_store
    conn = await asyncpg.connect(dsn)
    try:
        inside = await conn.fetchval("SELECT 'final:5:1' > 'final:5:' AND 'final:5:1' < 'final:5;'")
    finally:
        await conn.close()
    assert inside is False, "ICU English sorts ';' before ':': a plain range of part keys is empty here"
    await store.admit(req("d1", "k1", "question", transport="api", platform="api"))
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    seq = claim.items[0].seq
    parts = (
        draft(f"final:{seq}", platform="api", text="one, "),
        draft(f"final:{seq}:1", platform="api", text="two, "),
        draft(f"final:{seq}:2", platform="api", text="three"),
        draft(f"final:{seq + 1}", platform="api", text="another turn's"),
    )
    await store.complete_turn("w1", outcome(claim, *parts), 30.0, 1)
    done = await store.api_exchange("api", "d1")
    assert done is not None and done.answer == "one, two, three"


async def _pair(make_store) -> tuple[PostgresStore, PostgresStore]:
    a, b = make_store(), make_store()
    await a.open()
    await b.open()
    return a, b


async def test_a_completion_committed_on_another_process_keeps_the_parents_chat_where_it_is(
    make_store, pg_schema
):
    a, b = await _pair(make_store)
    task, first = delegate("t1", await _parent_with_route(a))
    assert await b.start_task(task, first)  # dispatched through b (the tool ran there)
    (child,) = await b.claim_sessions("proc-b", 10, 30.0, 1)
    await b.complete_turn("proc-b", answered(child, "42"), 30.0, 1)
    assert await _route_of(pg_schema, "k1") == a.holder, "the parent's replies still go out through a"
    assert await _route_of(pg_schema, task.child_key) == a.holder
    (parent,) = await a.claim_sessions("proc-a", 10, 30.0, 5)
    assert [i.inbound.delivery_id for i in parent.items] == ["task-done:t1"]


async def test_a_cancel_racing_the_childs_commit_on_another_process_ends_the_task_once(make_store):
    a, b = await _pair(make_store)
    sid = await _parent_with_route(a)
    for round_ in range(8):
        task, first = delegate(f"t{round_}", sid)
        await a.start_task(task, first)
        (child,) = await b.claim_sessions("proc-b", 10, 30.0, 1)
        cancel, commit = await asyncio.gather(
            a.cancel_task(task.id, "cancelled by u1"),
            b.complete_turn("proc-b", answered(child, "42"), 30.0, 1),
            return_exceptions=True,
        )
        ended = await a.get_task(task.id)
        assert ended is not None and isinstance(cancel, TaskRecord) and cancel.status == ended.status
        parent = await a.claim_sessions("proc-a", 10, 30.0, 5)
        completions = [i.inbound.delivery_id for c in parent for i in c.items]
        if ended.status == "cancelled":
            assert isinstance(commit, LeaseLost), "the child's items were cancelled before its commit"
            assert completions == [], "a cancelled task delivers nothing"
        else:
            assert ended.status == "done" and commit is None, commit
            assert completions == [f"task-done:{task.id}"]
        for claim in parent:  # the parent reads its completion: the next round starts clean
            assert await a.complete_turn("proc-a", answered(claim, "seen"), 30.0, 5) is None


async def test_a_schedule_firing_admitted_by_another_process_keeps_the_chats_route(make_store, pg_schema):
    a, b = await _pair(make_store)
    await _parent_with_route(a)
    await b.admit(req("schedule:s1:1", "k1", "stand up", transport="schedule"))  # b's runner fired it
    assert await _route_of(pg_schema, "k1") == a.holder
    await b.admit(req("schedule:s1:1", "k1", "stand up", transport="schedule"))  # b saw it due again
    assert await _route_of(pg_schema, "k1") == a.holder, "a firing seen twice does not move it either"
    await b.admit(req("m2", "k1", "hi", queued=False))  # the person writes through b now
    assert await _route_of(pg_schema, "k1") == b.holder, "a client's message still moves the route"
