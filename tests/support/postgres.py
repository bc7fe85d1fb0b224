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
from collections.abc import Iterable

import asyncpg
import pytest

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
