"""The labels role over PostgreSQL: the latest observed chat name and topic per chat.

``observe_labels`` runs inside an admission and applies only if the admission's ``seq``
is newer than the stored observation, as on SQLite.
"""

from __future__ import annotations

import asyncpg

from chatgate.domain.context import ChatLabels
from chatgate.domain.source import Source
from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.forwards import reads


async def observe_labels(conn: asyncpg.Connection, source: Source, seq: int) -> None:
    await conn.execute(
        "INSERT INTO chat_labels AS l (platform, scope, chat_id, chat_name, chat_topic, observed_seq)"
        " VALUES ($1,$2,$3,$4,$5,$6) ON CONFLICT (platform, scope, chat_id)"
        " DO UPDATE SET chat_name = excluded.chat_name, chat_topic = excluded.chat_topic,"
        " observed_seq = excluded.observed_seq WHERE excluded.observed_seq > l.observed_seq",
        source.platform,
        source.scope_id or "",
        source.chat_id,
        source.chat_name,
        source.chat_topic,
        seq,
    )


async def chat_labels(conn: asyncpg.Connection, platform: str, scope: str | None, chat_id: str) -> ChatLabels:
    row = await conn.fetchrow(
        "SELECT chat_name, chat_topic FROM chat_labels WHERE platform = $1 AND scope = $2 AND chat_id = $3",
        platform,
        scope or "",
        chat_id,
    )
    return ChatLabels(row[0], row[1]) if row else ChatLabels()


class PgLabels(PgRole):
    """``Labels``."""

    chat_labels = reads(chat_labels)
