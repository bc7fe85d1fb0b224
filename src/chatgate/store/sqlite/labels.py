"""The labels role over SQLite: the latest observed chat name and topic per chat.

``observe_labels`` runs inside an admission; it applies only if the admission's ``seq``
is newer than the stored observation, so the latest observation wins whatever order
sessions were created or reset in, and a redelivered old event never rolls labels back.
"""

from __future__ import annotations

import sqlite3

from chatgate.domain.context import ChatLabels
from chatgate.domain.source import Source
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import reads


def observe_labels(conn: sqlite3.Connection, source: Source, seq: int) -> None:
    conn.execute(
        "INSERT INTO chat_labels (platform, scope, chat_id, chat_name, chat_topic,"
        " observed_seq) VALUES (?,?,?,?,?,?) ON CONFLICT (platform, scope, chat_id)"
        " DO UPDATE SET chat_name = excluded.chat_name, chat_topic = excluded.chat_topic,"
        " observed_seq = excluded.observed_seq WHERE excluded.observed_seq > observed_seq",
        (source.platform, source.scope_id or "", source.chat_id, source.chat_name, source.chat_topic, seq),
    )


def chat_labels(conn: sqlite3.Connection, platform: str, scope: str | None, chat_id: str) -> ChatLabels:
    row = conn.execute(
        "SELECT chat_name, chat_topic FROM chat_labels WHERE platform = ? AND scope = ? AND chat_id = ?",
        (platform, scope or "", chat_id),
    ).fetchone()
    return ChatLabels(row[0], row[1]) if row else ChatLabels()


class SqliteLabels(SqliteRole):
    """``Labels``."""

    chat_labels = reads(chat_labels)
