"""The PostgreSQL dialect's shared fragments: the database clock, the advisory lock key of a
store instance, the fleet's notice channel, and a command status's row count.

Every module of the backend (the pool in ``database.py``, the fleet's liveness in ``fleet.py``,
the roles) builds its statements from these; this module imports nothing of ours.
"""

from __future__ import annotations

NOW = "extract(epoch from now())::float8"
"""The database clock, in epoch seconds: every lease expiry is computed from it."""
HOLDER_KEY = "hashtextextended(current_schema() || '/' || {}, 0)"
"""The advisory lock key of a store instance id (an SQL expression of it)."""
NOTIFY_CHANNEL = "left('chatgate_' || current_schema(), 63)"
NOTIFY = f"SELECT pg_notify({NOTIFY_CHANNEL}, $1)"
"""Tell every process of the fleet (at commit): ``inbox``, ``outbox``, ``stop:<session key>``, ..."""
GONE = "NOT EXISTS (SELECT 1 FROM processes p WHERE p.holder = {})"
"""A holder with no ``processes`` row: reaped (run ``reap_dead`` first in the transaction)."""


def rowcount(status: str) -> int:
    """The row count of a command status such as ``UPDATE 3`` or ``INSERT 0 1``."""
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0
