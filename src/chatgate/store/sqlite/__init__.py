"""The embedded default backend: one SQLite file in WAL mode, one module per store role.

Writes go through one group-commit writer thread; reads run on a small pool of reader
threads with their own connections. Nothing here runs on the event loop. The package
exports what the composition root and the CLI build it with.
"""

from chatgate.store.sqlite.database import Connect
from chatgate.store.sqlite.store import SqliteStore

__all__ = ["Connect", "SqliteStore"]
