#!/usr/bin/env python
"""The durable floor for bench/telegram.py: the least a durable gateway does per message.

Like ``telegram_echo_bot.py`` (the gateway's own Bot API client, long polling, a batch's
updates answered concurrently), but each text message also costs what durability and an
agent cannot do without: one call to the same OpenAI-compatible model through the same
client as the gateway's agent (``chatgate.agents.model_http``: one streamed POST on aiohttp),
then one SQLite commit at ``synchronous=FULL`` in WAL mode (the message and its answer, on
a thread of its own) before ``sendMessage``; the offset advances after the batch's answers.
No sessions, history, outbox or retries.

That floor holds the whole poll behind the batch's model calls: it is durable only because
Telegram redelivers what was not acknowledged, and one slow answer stalls every chat. With
``--ack-first`` it is the least a gateway that must not stall does: the batch's messages
are committed (one ``FULL`` transaction) and acknowledged before any model call, and each
answer is committed (a second ``FULL`` transaction) before its ``sendMessage``, so a
restart neither loses a message nor asks the model twice. Two commits a message, still no
sessions, history, outbox, settlement or retries.

Usage: ``telegram_durable_bot.py [--ack-first] API_BASE MODEL_BASE DB_PATH`` with the token
in ``BENCH_TELEGRAM_TOKEN`` and the model's key in ``BENCH_OPENAI_KEY``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chatgate.agents.model_http import ModelEndpoint
from chatgate.platforms.telegram.botapi import BotApi


class Journal:
    """One connection on one thread: each ``commit`` is its own FULL transaction."""

    def __init__(self, path: str) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal")
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = FULL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS messages (update_id INTEGER PRIMARY KEY, chat_id INTEGER, text TEXT,"
            " answer TEXT)"
        )

    def _transaction(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        self._conn.execute("BEGIN IMMEDIATE")
        self._conn.executemany(sql, rows)
        self._conn.execute("COMMIT")

    async def _commit(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """One FULL transaction, on the journal's own thread."""
        await asyncio.get_running_loop().run_in_executor(self._pool, self._transaction, sql, rows)

    async def commit(self, update_id: int, chat_id: int, text: str, answer: str) -> None:
        await self._commit(
            "INSERT OR IGNORE INTO messages VALUES (?, ?, ?, ?)", [(update_id, chat_id, text, answer)]
        )

    async def admit(self, rows: list[tuple[int, int, str]]) -> None:
        """``--ack-first``: a batch's messages, durable before its offset is acknowledged."""
        await self._commit("INSERT OR IGNORE INTO messages VALUES (?, ?, ?, NULL)", list(rows))

    async def answer(self, update_id: int, answer: str) -> None:
        """``--ack-first``: the answer, durable before it is sent."""
        await self._commit("UPDATE messages SET answer = ? WHERE update_id = ?", [(answer, update_id)])

    def close(self) -> None:
        self._pool.shutdown()
        self._conn.close()


async def ask(model: ModelEndpoint, text: str) -> str:
    body = {"model": "bench", "messages": [{"role": "user", "content": text}], "stream": True}
    chunks = await model.stream("/chat/completions", body)
    parts: list[str] = []
    try:
        async for chunk in chunks:
            if isinstance(chunk, dict):
                parts.extend((c.get("delta") or {}).get("content") or "" for c in chunk.get("choices") or [])
    finally:
        await chunks.close()
    return "".join(parts)


async def answer(api: BotApi, model: ModelEndpoint, journal: Journal, update: dict[str, Any]) -> None:
    message = update.get("message") or {}
    if "text" not in message:
        return
    reply = await ask(model, message["text"])
    chat_id = message["chat"]["id"]
    await journal.commit(update["update_id"], chat_id, message["text"], reply)
    await api.call("sendMessage", 20, chat_id=chat_id, text=reply)


async def answer_admitted(
    api: BotApi, model: ModelEndpoint, journal: Journal, message: dict[str, Any], update_id: int
) -> None:
    reply = await ask(model, message["text"])
    await journal.answer(update_id, reply)
    await api.call("sendMessage", 20, chat_id=message["chat"]["id"], text=reply)


async def main(base: str, model_base: str, db_path: str, ack_first: bool) -> None:
    api = BotApi(os.environ["BENCH_TELEGRAM_TOKEN"], base)
    model = ModelEndpoint(model_base, os.environ["BENCH_OPENAI_KEY"], timeout_s=120.0, max_retries=2)
    journal = Journal(db_path)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    offset = None

    async def poll() -> None:
        nonlocal offset
        while True:
            updates = await api.call("getUpdates", 40, offset=offset, timeout=25)
            await asyncio.gather(*(answer(api, model, journal, u) for u in updates))
            if updates:
                offset = updates[-1]["update_id"] + 1

    turns: set[asyncio.Task[None]] = set()

    async def poll_acking_first() -> None:
        nonlocal offset
        while True:
            updates = await api.call("getUpdates", 40, offset=offset, timeout=25)
            texts = [(u["update_id"], u["message"]) for u in updates if "text" in (u.get("message") or {})]
            if texts:
                await journal.admit([(uid, m["chat"]["id"], m["text"]) for uid, m in texts])
            if updates:
                offset = updates[-1]["update_id"] + 1
            for update_id, message in texts:
                turn = asyncio.create_task(answer_admitted(api, model, journal, message, update_id))
                turns.add(turn)
                turn.add_done_callback(turns.discard)

    task = asyncio.create_task(poll_acking_first() if ack_first else poll())
    await asyncio.wait({task, asyncio.create_task(stop.wait())}, return_when=asyncio.FIRST_COMPLETED)
    for turn in (task, *turns):
        turn.cancel()
    await asyncio.gather(task, *turns, return_exceptions=True)
    await api.aclose()
    await model.aclose()
    journal.close()


if __name__ == "__main__":
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    positional = [a for a in sys.argv[1:] if not a.startswith("--")]
    if set(flags) - {"--ack-first"} or len(positional) != 3:
        sys.exit(__doc__)
    asyncio.run(main(*positional, ack_first="--ack-first" in flags))
