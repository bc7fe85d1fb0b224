"""The ``WebChats`` role over PostgreSQL: chat owners and titles (``web_chats``), and a chat's
history read from the inbox, the outbox and the approvals it already has (as on SQLite)."""

from __future__ import annotations

import json

import asyncpg

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
from chatgate.store.postgres.database import PgRole
from chatgate.store.postgres.forwards import reads, writes
from chatgate.store.postgres.sql import rowcount

_NEWEST = float("inf")


async def claim_chat(
    conn: asyncpg.Connection,
    platform: str,
    chat_id: str,
    user_id: str,
    now: float,
    most: int = MAX_CONVERSATIONS_PER_USER,
) -> str:
    await conn.execute(
        "INSERT INTO web_chats (platform, chat_id, owner_id, created_at) SELECT $1,$2,$3,$4"
        " WHERE (SELECT count(*) FROM web_chats WHERE owner_id = $3 AND platform = $1) < $5"
        " ON CONFLICT DO NOTHING",
        platform,
        chat_id,
        user_id,
        now,
        most,
    )
    owner = await conn.fetchval(
        "SELECT owner_id FROM web_chats WHERE platform = $1 AND chat_id = $2", platform, chat_id
    )
    return NO_ROOM if owner is None else str(owner)


async def chat_owner(conn: asyncpg.Connection, platform: str, chat_id: str) -> str | None:
    owner = await conn.fetchval(
        "SELECT owner_id FROM web_chats WHERE platform = $1 AND chat_id = $2", platform, chat_id
    )
    return None if owner is None else str(owner)


async def set_chat_title(
    conn: asyncpg.Connection, platform: str, chat_id: str, title: str, replace: bool
) -> bool:
    unset = "" if replace else " AND title IS NULL"
    status = await conn.execute(
        f"UPDATE web_chats SET title = $1 WHERE platform = $2 AND chat_id = $3{unset}",
        title,
        platform,
        chat_id,
    )
    return rowcount(status) > 0


async def delete_chat(conn: asyncpg.Connection, platform: str, chat_id: str) -> bool:
    status = await conn.execute(
        "UPDATE web_chats SET owner_id = $1, title = NULL"
        " WHERE platform = $2 AND chat_id = $3 AND owner_id <> $1",
        DELETED_OWNER,
        platform,
        chat_id,
    )
    return rowcount(status) > 0


_LIST = """
SELECT w.chat_id, w.title, w.created_at,
       COALESCE((SELECT MAX(s.last_activity) FROM sessions s
                 WHERE s.platform = w.platform AND s.chat_id = w.chat_id), w.created_at) AS active
FROM web_chats w
WHERE w.owner_id = $1 AND w.platform = $2 {match}
  AND (w.title IS NOT NULL OR EXISTS (SELECT 1 FROM sessions s
                                      WHERE s.platform = w.platform AND s.chat_id = w.chat_id))
ORDER BY active DESC, w.chat_id
LIMIT {limit}
"""
_TITLE = "AND lower(COALESCE(w.title, '')) LIKE $4 ESCAPE '\\'"
_MATCH = """AND (lower(COALESCE(w.title, '')) LIKE $4 ESCAPE '\\'
     OR w.chat_id IN (SELECT t.chat_id FROM chat_text t
                      WHERE t.words @@ to_tsquery('simple', $5) AND t.platform = $2))"""


async def list_chats(
    conn: asyncpg.Connection, platform: str, user_id: str, query: str | None, limit: int
) -> list[ChatSummary]:
    if query:
        words = search_words(query)
        if words:
            text = " & ".join(f"{w}:*" for w in words)
            sql = _LIST.format(match=_MATCH, limit="$3")
            rows = await conn.fetch(sql, user_id, platform, limit, like_pattern(query), text)
        else:
            rows = await conn.fetch(
                _LIST.format(match=_TITLE, limit="$3"), user_id, platform, limit, like_pattern(query)
            )
    else:
        rows = await conn.fetch(_LIST.format(match="", limit="$3"), user_id, platform, limit)
    return [
        ChatSummary(str(r[0]), None if r[1] is None else str(r[1]), float(r[2]), float(r[3])) for r in rows
    ]


async def chat_history(
    conn: asyncpg.Connection, platform: str, chat_id: str, before: float | None, limit: int
) -> list[HistoryItem]:
    until = _NEWEST if before is None else before
    items: list[HistoryItem] = []
    for row in await conn.fetch(
        "SELECT i.inbound_json, i.admitted_at FROM inbox i JOIN sessions s ON s.key = i.session_key"
        " WHERE s.platform = $1 AND s.chat_id = $2 AND i.transport = $1 AND i.admitted_at < $3"
        " ORDER BY i.admitted_at DESC LIMIT $4",
        platform,
        chat_id,
        until,
        limit,
    ):
        item = message_item(json.loads(row[0]), float(row[1]))
        if item is not None:
            items.append(item)
    for row in await conn.fetch(
        "SELECT id, kind, text, in_reply_to, target_json, created_at FROM outbox"
        " WHERE platform = $1 AND chat_id = $2 AND created_at < $3 ORDER BY created_at DESC LIMIT $4",
        platform,
        chat_id,
        until,
        limit,
    ):
        target = json.loads(row[4])
        items.append(reply_item(int(row[0]), str(row[1]), str(row[2]), row[3], target, float(row[5])))
    for row in await conn.fetch(
        "SELECT prompt_id, prompt_text, state, requested_at FROM approvals"
        " WHERE platform = $1 AND chat_id = $2 AND prompt_via = 'buttons' AND requested_at < $3"
        " ORDER BY requested_at DESC LIMIT $4",
        platform,
        chat_id,
        until,
        limit,
    ):
        items.append(HistoryItem("prompt", str(row[0]), str(row[1]), float(row[3]), outcome=str(row[2])))
    return newest_first(items, limit)


class PgWebChats(PgRole):
    """``WebChats``."""

    claim_chat = writes(claim_chat)
    chat_owner = reads(chat_owner)
    set_chat_title = writes(set_chat_title)
    delete_chat = writes(delete_chat)
    list_chats = reads(list_chats)
    chat_history = reads(chat_history)
