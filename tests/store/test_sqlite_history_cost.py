"""A chat's history costs the SQLite store nothing per message (issue 33).

The outbox keeps every reply it sent and the inbox every message it admitted. Each query
for open or queued rows must go through the partial index of those rows, never through
every row of the chat (``outbox_chat``, ``inbox_session``) or the whole table. Cost here is
counted in SQLite virtual-machine steps (``set_progress_handler``), which do not depend on
the machine's speed or load: a chat with 5,000 rows of history must cost what a chat with
none costs, where a walk over its history would cost tens of thousands of steps more.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from chatgate.agents.echo import EchoAgent
from chatgate.domain.outbox import OutboxDraft
from chatgate.engine.authz import PlatformAccess
from chatgate.engine.metrics import GatewayMetrics
from chatgate.engine.pipeline import EngineSettings, build_engine
from chatgate.store.sqlite import SqliteStore
from chatgate.store.sqlite.inbox import cancel_running
from chatgate.store.sqlite.outbox import (
    claim_outbox,
    insert_claimed,
    requeue_mid_send,
    undelivered,
    undelivered_in_chat,
)
from chatgate.store.sqlite.transcript import list_sessions, session_info
from support.engine_harness import PLATFORM, RecordingAdapter, make_inbound, wait_until

HISTORY = 5_000
STEP = 10
"""The progress handler runs every ``STEP`` virtual-machine instructions."""


class Steps:
    """Counts the VM steps of every connection the store opens (``sqlite3.connect`` wrapped)."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def tick(self) -> int:
        with self._lock:
            self.count += STEP
        return 0

    def wrap(self, connect: Callable[..., sqlite3.Connection]) -> Callable[..., sqlite3.Connection]:
        def counted(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn = connect(*args, **kwargs)
            conn.set_progress_handler(self.tick, STEP)
            return conn

        return counted


def seed_history(path: Path, chat_id: str, session_key: str, session_id: str) -> None:
    """``HISTORY`` answered messages in one chat: done inbox items, confirmed replies, transcript."""
    conn = sqlite3.connect(path, timeout=30.0)
    try:
        with conn:
            conn.executemany(
                "INSERT INTO inbox (transport, delivery_id, session_key, status, inbound_json,"
                " admitted_at, finished_at, outcome) VALUES ('test', ?, ?, 'done', '{}', ?, ?, 'ok')",
                [(f"old-{n}", session_key, float(n), float(n)) for n in range(HISTORY)],
            )
            conn.executemany(
                "INSERT INTO outbox (idem_key, platform, chat_id, session_key, kind, text, target_json,"
                " status, created_at, sent_at, confirmed_at) VALUES (?, ?, ?, ?, 'final', 'old', '{}',"
                " 'confirmed', ?, ?, ?)",
                [
                    (f"old-{n}", PLATFORM, chat_id, session_key, float(n), float(n), float(n))
                    for n in range(HISTORY)
                ],
            )
            conn.executemany(
                "INSERT INTO transcript (session_id, session_key, role, content, created_at)"
                " VALUES (?, ?, 'user', 'old', ?)",
                [(session_id, session_key, float(n)) for n in range(HISTORY)],
            )
    finally:
        conn.close()


async def test_a_reply_into_a_chat_with_a_long_history_costs_what_one_into_a_new_chat_costs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = Steps()
    monkeypatch.setattr(sqlite3, "connect", steps.wrap(sqlite3.connect))
    path = tmp_path / "chatgate.db"
    store = SqliteStore(path)
    adapter = RecordingAdapter()
    settings = EngineSettings(owner="t", access={PLATFORM: PlatformAccess(allow_all=True)})
    engine = build_engine(store, EchoAgent(chunk_delay_ms=0), settings, GatewayMetrics(), {PLATFORM: adapter})
    await engine.open()
    engine.start()
    sent = 0

    async def exchange(chat_id: str, text: str) -> None:
        nonlocal sent
        await engine.admission.admit(make_inbound(text, chat_id=chat_id))
        sent += 1
        await wait_until(lambda: len(adapter.delivered) >= sent, 30.0, f"the reply to {text}")
        await asyncio.sleep(0.05)  # its settlement, and the claims it wakes, commit first

    async def steps_of(chat_id: str, n: int) -> int:
        before = steps.count
        for i in range(n):
            await exchange(chat_id, f"{chat_id}-{i}")
        return steps.count - before

    try:
        await exchange("long", "first")
        await exchange("fresh", "first")
        with closing(sqlite3.connect(path)) as conn:
            key, session_id = conn.execute(
                "SELECT key, session_id FROM sessions WHERE chat_id = 'long'"
            ).fetchone()
        seed_history(path, "long", key, session_id)
        await steps_of("fresh", 3)  # both chats' statements are prepared and cached
        fresh = await steps_of("fresh", 10)
        long = await steps_of("long", 10)
        fresh_again = await steps_of("fresh", 10)
    finally:
        await engine.stop(1.0, 1.0)
        await store.close()
    assert [r.text for r in adapter.delivered[-10:]] == [f"echo: fresh-{i}" for i in range(10)]
    baseline = max(fresh, fresh_again)
    # Walking 5,000 rows of history once a message would add at least 10 steps a row.
    assert long < baseline * 1.25 + 2_000, (long, fresh, fresh_again)


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, sqlite3.Connection]]:
    """Two migrated files with the same open rows, the second with a long history besides."""
    conns = []
    for name, history in (("empty", False), ("long", True)):
        path = tmp_path / name / "chatgate.db"

        async def create(p: Path = path) -> None:
            store = SqliteStore(p)
            await store.open()
            await store.close()

        asyncio.run(create())
        conn = sqlite3.connect(path)
        conn.execute(
            "INSERT INTO sessions (key, session_id, platform, chat_id, source_json, created_at,"
            " last_activity) VALUES ('k', 's', ?, 'c', '{}', 0, 0)",
            (PLATFORM,),
        )
        if history:
            conn.commit()
            seed_history(path, "c", "k", "s")
        conn.execute(
            "INSERT INTO inbox (transport, delivery_id, session_key, status, inbound_json, admitted_at,"
            " claimed_by) VALUES ('test', 'q', 'k', 'queued', '{}', 1e9, 'me')"
        )
        conn.execute(
            "INSERT INTO outbox (idem_key, platform, chat_id, session_key, kind, text, target_json,"
            " status, created_at) VALUES ('open', ?, 'c', 'k', 'final', 'due', '{}', 'pending', 1e9)",
            (PLATFORM,),
        )
        conn.commit()
        conns.append(conn)
    yield conns[0], conns[1]
    for conn in conns:
        conn.close()


def _draft() -> OutboxDraft:
    return OutboxDraft(
        idem_key="new", platform=PLATFORM, chat_id="c", session_key="k", kind="final", text="x"
    )


QUERIES: dict[str, Callable[[sqlite3.Connection], object]] = {
    "insert_claimed": lambda c: insert_claimed(c, _draft(), 2e9),
    "claim_outbox": lambda c: claim_outbox(c, 10, 2e9),
    "undelivered_in_chat": lambda c: undelivered_in_chat(c, PLATFORM, "c"),
    "undelivered": lambda c: undelivered(c, 2e9, 1.0, 10),
    "requeue_mid_send": requeue_mid_send,
    "cancel_running": lambda c: cancel_running(c, "k", "stop", 2e9),
    "session_info": lambda c: session_info(c, "k"),
    "list_sessions": lambda c: list_sessions(c, 10),
}


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_open_and_queued_rows_are_found_without_walking_the_history(
    stores: tuple[sqlite3.Connection, sqlite3.Connection], name: str
) -> None:
    counted = []
    for conn in stores:
        steps = Steps()
        conn.set_progress_handler(steps.tick, STEP)
        with conn:
            QUERIES[name](conn)
        conn.set_progress_handler(None, STEP)
        counted.append(steps.count)
    empty, long = counted
    assert long <= empty + 200, f"{name}: {long} steps with {HISTORY} rows of history, {empty} without"
