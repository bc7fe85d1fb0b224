"""The real PostgreSQL the tests run against, and a schema of its own per test.

PostgreSQL is at ``CHATGATE_TEST_POSTGRES`` (default: 127.0.0.1:5432, trust auth, database
``test``). A test that needs it and cannot reach it is skipped, except under ``CI=true``,
where an unreachable PostgreSQL fails the test: CI must run the PostgreSQL half.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import TYPE_CHECKING

import asyncpg
import pytest

if TYPE_CHECKING:
    from chatgate.store.postgres import PostgresStore

DSN = os.environ.get("CHATGATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
_reachable: bool | None = None


def _run(coro_fn: object) -> object:
    """Run a coroutine function on a loop of its own, in a thread (a test's loop may be running)."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro_fn())  # type: ignore[operator]
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


async def _probe() -> bool:
    try:
        conn = await asyncpg.connect(DSN, timeout=5.0)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
        return False
    await conn.close()
    return True


def require_postgres() -> None:
    """Skip (or, under CI, fail) unless PostgreSQL answers at ``DSN``."""
    global _reachable
    if _reachable is None:
        _reachable = bool(_run(_probe))
    if _reachable:
        return
    message = f"PostgreSQL is not reachable at {DSN} (set CHATGATE_TEST_POSTGRES)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def new_schema_name() -> str:
    return f"cgtest_{uuid.uuid4().hex[:12]}"


def drop_schemas(names: Iterable[str]) -> None:
    wanted = list(names)
    if not wanted:
        return

    async def drop() -> None:
        conn = await asyncpg.connect(DSN, timeout=10.0)
        try:
            for name in wanted:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        finally:
            await conn.close()

    _run(drop)


MakeStore = Callable[..., "PostgresStore"]


@pytest.fixture(name="pg_schema")
def pg_schema_fixture() -> Iterator[str]:
    """A new schema name, dropped (with everything in it) at teardown."""
    require_postgres()
    name = new_schema_name()
    yield name
    drop_schemas([name])


@pytest.fixture(name="make_store")
async def make_store_fixture(pg_schema: str) -> AsyncIterator[MakeStore]:
    """``make_store(**options)``: a new, unopened PostgresStore on the test's schema (closed at teardown)."""
    stores: list[PostgresStore] = []

    def make(**kwargs: object) -> PostgresStore:
        from chatgate.store.postgres import PostgresStore

        store = PostgresStore(DSN, schema=pg_schema, **kwargs)  # type: ignore[arg-type]
        stores.append(store)
        return store

    yield make
    for store in stores:
        await store.close()


async def sql(query: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(DSN)
    try:
        return await conn.fetch(query, *args)
    finally:
        await conn.close()


async def kill_connections(store: PostgresStore) -> int:
    """``pg_terminate_backend`` on every connection of ``store`` (the server side of an outage)."""
    rows = await sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        f"chatgate {store.holder}",
    )
    return len(rows)
