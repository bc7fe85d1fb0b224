"""The fleet backend: one PostgreSQL schema shared by many gateway processes (``asyncpg``).

One module per store role, like the SQLite backend. Import it only when ``store.url``
names PostgreSQL: asyncpg is the optional extra ``chatgate[postgres]``.
"""

from chatgate.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
