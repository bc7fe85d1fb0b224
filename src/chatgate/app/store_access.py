"""How a command reaches the store: ``async with open_store(config, state_dir, purpose=...)``.

A command (``chatgate pairing``, ``api-key``, ``schedules``, ``sessions``, ``user``,
``status``) gets a ``Store`` for whichever backend the config names, and uses its role
methods only. Beside a running gateway: on SQLite a side store (``SqliteStore(side=True)``:
no file lock, no writer thread, each write a WAL transaction of its own, never a migration),
which the gateway's readers see at once; on PostgreSQL a small pool of its own on the fleet's
schema, as every gateway of the fleet has. Nothing here runs on the event loop's time: the
stores do their I/O in threads or natively async.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

from chatgate.app.config import GatewayConfig
from chatgate.domain.errors import NoDatabaseYet as NoDatabaseYet
from chatgate.store.base import Store
from chatgate.store.sqlite import SqliteStore
from chatgate.store.sqlite.identity import StateDamaged, set_aside

__all__ = ["NoDatabaseYet", "Purpose", "StateDamaged", "database_path", "open_store", "set_aside"]

Purpose = Literal["read", "change", "create"]
"""``read`` and ``change`` need the state to exist; ``create`` makes an empty one first if it does not."""


def database_path(config: GatewayConfig, state_dir: Path) -> Path:
    """The SQLite file the config names (``store.sqlite.path``), or the state directory's."""
    return Path(config.store.sqlite.path) if config.store.sqlite.path else state_dir / "chatgate.db"


async def _create(path: Path) -> None:
    """An empty database at the current schema: opened once as a gateway's store (which
    migrates), then closed. Only where no file is, so no gateway can be running on it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(path)
    await store.open()
    await store.close()


def _build(config: GatewayConfig, state_dir: Path, purpose: Purpose) -> tuple[Store, Path | None]:
    if config.store.backend == "postgres":
        # asyncpg (the postgres extra) is imported only for a PostgreSQL store
        from chatgate.app.startup import build_postgres_store

        return build_postgres_store(config), None
    path = database_path(config, state_dir)
    return SqliteStore(path, side=True), path


@contextlib.asynccontextmanager
async def open_store(config: GatewayConfig, state_dir: Path, *, purpose: Purpose) -> AsyncIterator[Store]:
    """The configured store, open, beside whatever gateway runs on it; closed on exit.

    Raises ``NoDatabaseYet`` (a ``StoreUnavailable``) for ``read`` and ``change`` when the
    SQLite file does not exist, ``StoreUnavailable`` when the store cannot be reached."""
    store, path = _build(config, state_dir, purpose)
    if path is not None and not path.exists():
        if purpose != "create":
            raise NoDatabaseYet(path)
        await _create(path)
    await store.open()
    try:
        yield store
    finally:
        await store.close()
