"""The ``WebChats`` role over SQLite: chat owners and titles (``web_chats``), and a chat's
history read from the inbox, the outbox and the approvals it already has."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from chatgate.domain.web_chats import (
    DELETED_OWNER,
    MAX_CONVERSATIONS_PER_USER,
    NO_ROOM,
    ChatSummary,
    HistoryItem,
    like_pattern,
    message_item,
    newest_first,
    reply_item,
    search_words,
)
from chatgate.store.sqlite.database import SqliteRole
from chatgate.store.sqlite.forwards import reads, writes

_NEWEST = float("inf")


def claim_chat(
    conn: sqlite3.Connection,
    platform: str,
    chat_id: str,
    user_id: str,
    now: float,
    most: int = MAX_CONVERSATIONS_PER_USER,
) -> str:
    conn.execute(
        "INSERT INTO web_chats (platform, chat_id, owner_id, created_at) SELECT ?,?,?,?"
        " WHERE (SELECT count(*) FROM web_chats WHERE owner_id = ? AND platform = ?) < ?"
        " ON CONFLICT DO NOTHING",
        (platform, chat_id, user_id, now, user_id, platform, most),
    )
    row = conn.execute(
        "SELECT owner_id FROM web_chats WHERE platform = ? AND chat_id = ?", (platform, chat_id)
    ).fetchone()
    return NO_ROOM if row is None else str(row[0])


def chat_owner(conn: sqlite3.Connection, platform: str, chat_id: str) -> str | None:
    row = conn.execute(
        "SELECT owner_id FROM web_chats WHERE platform = ? AND chat_id = ?", (platform, chat_id)
    ).fetchone()
    return None if row is None else str(row[0])


def set_chat_title(conn: sqlite3.Connection, platform: str, chat_id: str, title: str, replace: bool) -> bool:
    unset = "" if replace else " AND title IS NULL"
    cur = conn.execute(
        f"UPDATE web_chats SET title = ? WHERE platform = ? AND chat_id = ?{unset}",
        (title, platform, chat_id),
    )
    return cur.rowcount > 0


def delete_chat(conn: sqlite3.Connection, platform: str, chat_id: str) -> bool:
    cur = conn.execute(
        "UPDATE web_chats SET owner_id = ?, title = NULL"
        " WHERE platform = ? AND chat_id = ? AND owner_id != ?",
        (DELETED_OWNER, platform, chat_id, DELETED_OWNER),
    )
    return cur.rowcount > 0


_LIST = """
SELECT w.chat_id, w.title, w.created_at,
       COALESCE((SELECT MAX(s.last_activity) FROM sessions s
                 WHERE s.platform = w.platform AND s.chat_id = w.chat_id), w.created_at) AS active
FROM web_chats w
WHERE w.owner_id = ? AND w.platform = ? {match}
  AND (w.title IS NOT NULL OR EXISTS (SELECT 1 FROM sessions s
                                      WHERE s.platform = w.platform AND s.chat_id = w.chat_id))
ORDER BY active DESC, w.chat_id
LIMIT ?
"""
_TITLE = "AND lower(COALESCE(w.title, '')) LIKE ? ESCAPE '\\'"
_MATCH = """AND (lower(COALESCE(w.title, '')) LIKE ? ESCAPE '\\'
     OR w.chat_id IN (SELECT chat_id FROM chat_text WHERE chat_text MATCH ? AND platform = ?))"""


def list_chats(
    conn: sqlite3.Connection, platform: str, user_id: str, query: str | None, limit: int
) -> list[ChatSummary]:
    if query:
        pattern, words = like_pattern(query), search_words(query)
        if words:
            text = " AND ".join(f'"{w}"*' for w in words)
            params: tuple[object, ...] = (user_id, platform, pattern, text, platform, limit)
            rows = conn.execute(_LIST.format(match=_MATCH), params).fetchall()
        else:
            rows = conn.execute(_LIST.format(match=_TITLE), (user_id, platform, pattern, limit)).fetchall()
    else:
        rows = conn.execute(_LIST.format(match=""), (user_id, platform, limit)).fetchall()
    return [
        ChatSummary(str(r[0]), None if r[1] is None else str(r[1]), float(r[2]), float(r[3])) for r in rows
    ]


def chat_history(
    conn: sqlite3.Connection, platform: str, chat_id: str, before: float | None, limit: int
) -> list[HistoryItem]:
    until = _NEWEST if before is None else before
    items: list[HistoryItem] = []
    for seq_json, at in conn.execute(
        "SELECT i.inbound_json, i.admitted_at FROM inbox i JOIN sessions s ON s.key = i.session_key"
        " WHERE s.platform = ? AND s.chat_id = ? AND i.transport = ? AND i.admitted_at < ?"
        " ORDER BY i.admitted_at DESC LIMIT ?",
        (platform, chat_id, platform, until, limit),
    ):
        item = message_item(json.loads(seq_json), float(at))
        if item is not None:
            items.append(item)
    for row in conn.execute(
        "SELECT id, kind, text, in_reply_to, target_json, created_at FROM outbox"
        " WHERE platform = ? AND chat_id = ? AND created_at < ? ORDER BY created_at DESC LIMIT ?",
        (platform, chat_id, until, limit),
    ):
        target = json.loads(row[4])
        items.append(reply_item(int(row[0]), str(row[1]), str(row[2]), row[3], target, float(row[5])))
    items.extend(_prompts(conn, platform, chat_id, until, limit))
    return newest_first(items, limit)


def _prompts(
    conn: sqlite3.Connection, platform: str, chat_id: str, until: float, limit: int
) -> list[HistoryItem]:
    rows: list[Any] = conn.execute(
        "SELECT prompt_id, prompt_text, state, requested_at FROM approvals"
        " WHERE platform = ? AND chat_id = ? AND prompt_via = 'buttons' AND requested_at < ?"
        " ORDER BY requested_at DESC LIMIT ?",
        (platform, chat_id, until, limit),
    ).fetchall()
    return [HistoryItem("prompt", str(r[0]), str(r[1]), float(r[3]), outcome=str(r[2])) for r in rows]


class SqliteWebChats(SqliteRole):
    """``WebChats``."""

    claim_chat = writes(claim_chat)
    chat_owner = reads(chat_owner)
    set_chat_title = writes(set_chat_title)
    delete_chat = writes(delete_chat)
    list_chats = reads(list_chats)
    chat_history = reads(chat_history)
