"""``SqliteStore``: the embedded default store, every role over one SQLite file.

Each role's SQL lives in its own module (``inbox``, ``leases``, ``transcript``,
``outbox``, ``approvals``, ``cursors``, ``labels``, ``pairing``, ``api``, ``schedules``,
``tasks``, ``accounts``, ``web_chats``, ``lifecycle``); this class only composes them over
one ``Database`` (the writer thread, the reader pool, the file lock), or, for a command run
beside a gateway, one ``side.SideDatabase`` (``side=True``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from chatgate.store.sqlite.accounts import SqliteAccounts
from chatgate.store.sqlite.api import SqliteApiKeys
from chatgate.store.sqlite.approvals import SqliteApprovals
from chatgate.store.sqlite.cursors import SqliteCursors
from chatgate.store.sqlite.database import Connect, Connections, Database, Synchronous, default_connect
from chatgate.store.sqlite.inbox import SqliteInbox
from chatgate.store.sqlite.labels import SqliteLabels
from chatgate.store.sqlite.leases import SqliteLeases
from chatgate.store.sqlite.lifecycle import SqliteLifecycle
from chatgate.store.sqlite.media import SqliteMedia
from chatgate.store.sqlite.outbox import SqliteOutbox
from chatgate.store.sqlite.pairing import SqlitePairing
from chatgate.store.sqlite.profiles import SqliteSessionProfiles
from chatgate.store.sqlite.schedules import SqliteSchedules
from chatgate.store.sqlite.side import SideDatabase
from chatgate.store.sqlite.tasks import SqliteTasks
from chatgate.store.sqlite.transcript import SqliteTranscript
from chatgate.store.sqlite.web_chats import SqliteWebChats


class SqliteStore(
    SqliteLifecycle,
    SqliteInbox,
    SqliteLeases,
    SqliteTranscript,
    SqliteOutbox,
    SqliteApprovals,
    SqliteCursors,
    SqliteLabels,
    SqliteSessionProfiles,
    SqlitePairing,
    SqliteApiKeys,
    SqliteSchedules,
    SqliteTasks,
    SqliteAccounts,
    SqliteWebChats,
    SqliteMedia,
):
    """The ``Store`` protocol over one SQLite file in WAL mode."""

    def __init__(
        self,
        path: Path | str,
        *,
        synchronous: Synchronous = "FULL",
        group_commit: bool = True,
        max_batch: int = 512,
        readers: int = 2,
        connect: Connect = default_connect,
        on_commit: Callable[[int, float], None] | None = None,
        side: bool = False,
    ) -> None:
        """``side``: a short-lived store beside a running gateway (the CLI's): no file lock, no
        writer thread, each write its own WAL transaction, no migration (``side.py``)."""
        db: Connections = (
            SideDatabase(path)
            if side
            else Database(
                path,
                synchronous=synchronous,
                group_commit=group_commit,
                max_batch=max_batch,
                readers=readers,
                connect=connect,
                on_commit=on_commit,
            )
        )
        super().__init__(db)
        self.path = db.path
