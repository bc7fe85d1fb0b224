"""The backends the contract suite runs against, and the fixtures every contract test uses.

A backend joins the suite with one fixture, ``<name>_backend``, returning a ``Backend``
over new, empty state, and its name in ``BACKENDS``. Every contract test then runs
against it: ``store`` (and ``open_store``, ``backend``) are parametrized by ``BACKENDS``.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Protocol

import pytest

from chatgate.store.base import Store
from chatgate.store.sqlite import SqliteStore
from support.postgres import DSN, drop_schemas, new_schema_name, require_postgres

BACKENDS = ["sqlite", "postgres"]


class Backend(Protocol):
    def store(self) -> Store:
        """A new, unopened store over this backend's state (so a test can close and reopen it)."""
        ...

    def fresh(self) -> Backend:
        """A backend over new, empty state (for Hypothesis examples, which share one fixture)."""
        ...

    def side(self) -> Store:
        """A new, unopened store beside a running one, as a command opens it (``app.store_access``)."""
        ...


class SqliteBackend:
    """A real SQLite file in the test's tmp_path."""

    _ids = itertools.count()

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / "contract.db"

    def store(self) -> Store:
        return SqliteStore(self.path)

    def fresh(self) -> SqliteBackend:
        return SqliteBackend(self.root / f"fresh-{next(self._ids)}")

    def side(self) -> Store:
        return SqliteStore(self.path, side=True)


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Backend:
    return SqliteBackend(tmp_path)


class PostgresBackend:
    """A schema of its own in the real PostgreSQL (dropped at teardown, with its fresh ones)."""

    def __init__(self, created: list[str]) -> None:
        self.created = created
        self.schema = new_schema_name()
        created.append(self.schema)

    def store(self) -> Store:
        from chatgate.store.postgres import PostgresStore

        return PostgresStore(DSN, schema=self.schema, pool_size=4)

    def fresh(self) -> PostgresBackend:
        return PostgresBackend(self.created)

    def side(self) -> Store:
        from chatgate.store.postgres import PostgresStore

        return PostgresStore(DSN, schema=self.schema, pool_size=1)


@pytest.fixture
def postgres_backend() -> Iterator[Backend]:
    require_postgres()
    created: list[str] = []
    yield PostgresBackend(created)
    drop_schemas(created)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    found: Backend = request.getfixturevalue(f"{request.param}_backend")
    return found


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
