"""Durable offsets: committed before acknowledged, resumed from the store, never skipping the backlog."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from telegram_double import (
    BOT_ID,
    BotApiDouble,
    Gateways,
    User,
    echo_of,
    private,
    telegram_config,
)

from chatgate.domain.errors import StoreUnavailable
from chatgate.platforms.telegram.poller import CURSOR_EVERY
from chatgate.store.sqlite import SqliteStore, wal_file
from chatgate.store.sqlite import inbox as inbox_module
from chatgate.store.sqlite.writer import GroupCommitWriter

ADA = User(4242, "Ada", "Lovelace", username="ada")
FEW = [User(4300 + n, f"Few{n}") for n in range(3)]
CURSOR = f"telegram:{BOT_ID}:offset"


def _texts(double: BotApiDouble, chat_id: int) -> list[str]:
    return [m.text for m in double.view(chat_id)]


async def test_a_cold_start_answers_the_backlog_telegram_holds(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    for n, user in enumerate(FEW):
        await double.push_message(private(user), user, f"before start {n}")
    await gateways.start(telegram_config(double, tmp_path, telegram={"allow_users": [u.id for u in FEW]}))
    await double.wait_for(lambda: len(double.all_sent()) >= 3, what="the backlog answered")
    assert [_texts(double, u.id) for u in FEW] == [[echo_of(f"before start {n}")] for n in range(3)]
    assert double.offsets[0] is None, "a cold start must not pass an offset (that would skip the backlog)"


async def test_drop_pending_updates_skips_the_backlog_and_answers_what_comes_after(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    for n in range(3):
        await double.push_message(private(ADA), ADA, f"stale {n}")
    config = telegram_config(
        double, tmp_path, telegram={"allow_users": [ADA.id], "drop_pending_updates": True}
    )
    gateway = await gateways.start(config)
    await double.wait_for(lambda: double.confirmed_below > 0, what="the backlog dropped")
    await double.push_message(private(ADA), ADA, "fresh")
    await double.wait_for(lambda: len(double.view(ADA.id)) >= 1)
    await double.wait_for(lambda: double.confirmed_below == double.next_update_id)
    assert _texts(double, ADA.id) == [echo_of("fresh")]
    assert await gateway.store.queue_depth() == 0


async def test_a_restart_resumes_from_the_stored_offset_and_repeats_nothing(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    config = telegram_config(double, tmp_path, telegram={"allow_users": [ADA.id, *(u.id for u in FEW)]})
    first = await gateways.start(config)
    for n, user in enumerate(FEW[:2]):
        await double.push_message(private(user), user, f"one {n}")
    await double.wait_for(lambda: len(double.all_sent()) >= 2)
    stored = await _stored_offset(first.store, double.next_update_id)
    # From now on Telegram "never hears" confirmations: only our stored offset keeps old updates away.
    double.keep_confirmed = True
    double.confirmed_below = 0
    await gateways.stop(first)
    calls_before = len(double.offsets)

    second = await gateways.start(config)
    await double.push_message(private(ADA), ADA, "two")
    await double.wait_for(lambda: len(double.all_sent()) >= 3)
    assert double.offsets[calls_before] == int(stored), "the restart did not resume from the stored offset"
    assert [_texts(double, u.id) for u in FEW[:2]] == [[echo_of("one 0")], [echo_of("one 1")]]
    assert _texts(double, ADA.id) == [echo_of("two")]
    assert await _stored_offset(second.store, double.next_update_id) == str(double.next_update_id)


async def _stored_offset(store: Any, wanted: int, timeout: float = 15.0) -> str | None:
    """The stored offset once it reaches ``wanted`` (it is stored at most once a second, and at
    the next empty poll), or what is stored when ``timeout`` runs out."""
    deadline = time.monotonic() + timeout
    while True:
        stored = await store.get_cursor(CURSOR)
        if stored == str(wanted) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    return stored


async def test_a_burst_stores_the_offset_about_once_a_second_and_the_last_one_when_it_ends(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[str] = []
    set_cursor = SqliteStore.set_cursor

    async def counted(store: SqliteStore, name: str, value: str) -> None:
        await set_cursor(store, name, value)
        if name == CURSOR:
            writes.append(value)

    monkeypatch.setattr(SqliteStore, "set_cursor", counted)
    people = [User(4400 + n, f"Burst{n}") for n in range(12)]  # one chat each: no chat's pace
    config = telegram_config(double, tmp_path, telegram={"allow_users": [u.id for u in people]})
    gateway = await gateways.start(config)
    started = time.monotonic()
    for n, user in enumerate(people):  # one update per poll: each is answered before the next comes
        await double.push_message(private(user), user, f"burst {n}")
        await double.wait_for(lambda n=n: len(double.all_sent()) > n)
    batches = len(double.offsets) - 1
    elapsed = time.monotonic() - started
    assert len(writes) <= 1 + elapsed / CURSOR_EVERY, (writes, batches, elapsed)
    assert await _stored_offset(gateway.store, double.next_update_id) == str(double.next_update_id)
    assert writes[-1] == str(double.next_update_id)  # the last one, at the next empty poll


class InboxSwitch:
    """sqlite3 connections that refuse INSERT INTO inbox while blocked (the storage seam)."""

    def __init__(self) -> None:
        self.blocked = threading.Event()
        self.denied = 0

    def connect(self, path: str) -> sqlite3.Connection:
        conn = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=30.0, cached_statements=0
        )
        conn.set_authorizer(self._authorize)
        return conn

    def _authorize(self, action: int, arg1: str | None, *_: str | None) -> int:
        if action == sqlite3.SQLITE_INSERT and arg1 == "inbox" and self.blocked.is_set():
            self.denied += 1
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK


async def test_an_update_that_could_not_be_committed_is_not_acknowledged_and_is_answered_once_later(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    switch = InboxSwitch()
    store = SqliteStore(tmp_path / "state" / "chatgate.db", connect=switch.connect)
    gateway = await gateways.start(
        telegram_config(double, tmp_path, telegram={"allow_users": [ADA.id]}), store=store
    )
    switch.blocked.set()
    update_id, _ = await double.push_message(private(ADA), ADA, "while the disk refuses")
    polls = double.get_updates_calls
    await double.wait_for(
        lambda: switch.denied >= 2 and double.get_updates_calls >= polls + 1, what="retries"
    )
    assert double.confirmed_below <= update_id, "an update that was not committed was acknowledged"
    assert double.offsets[-1] == update_id, "the poller moved past an update it could not commit"
    assert await gateway.store.get_cursor(CURSOR) == str(update_id)

    switch.blocked.clear()
    await double.wait_for(lambda: len(double.view(ADA.id)) >= 1, what="answered after the disk recovered")
    await double.wait_for(lambda: double.confirmed_below == update_id + 1)
    assert _texts(double, ADA.id) == [echo_of("while the disk refuses")]
    assert await gateway.store.get_cursor(CURSOR) == str(update_id + 1)


async def test_store_cursors_are_absent_until_set_overwritten_in_place_and_survive_a_reopen(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cursors.db"
    store = SqliteStore(path)
    await store.open()
    try:
        assert await store.get_cursor("telegram:1:offset") is None
        await store.set_cursor("telegram:1:offset", "10")
        await store.set_cursor("telegram:1:offset", "11")
        await store.set_cursor("telegram:2:offset", "5")
        assert await store.get_cursor("telegram:1:offset") == "11"
    finally:
        await store.close()
    reopened = SqliteStore(path)
    await reopened.open()
    try:
        assert await reopened.get_cursor("telegram:1:offset") == "11"
        assert await reopened.get_cursor("telegram:2:offset") == "5"
    finally:
        await reopened.close()
    with pytest.raises(StoreUnavailable):
        await reopened.get_cursor("telegram:1:offset")


class Timeline:
    """One ordered record of what the offset's promise is about: the admission (logged inside
    its transaction), every fsync of the WAL (the real call, then logged) and the end of every
    transaction (with whether it was durable), all on the writer thread; every ``getUpdates``
    and ``sendMessage`` the double serves."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, Any, float]] = []
        admit = inbox_module.admit

        def admitted(conn: sqlite3.Connection, request: Any, now: float) -> Any:
            self._add("admit", (request.inbound.text, request.relaxed))
            return admit(conn, request, now)

        real = wal_file._datasync

        def datasync(fd: int) -> None:
            real(fd)
            self._add("fsync", None)

        transaction = GroupCommitWriter._transaction

        def committed(writer: GroupCommitWriter, conn: sqlite3.Connection, fns: Any, *, durable: bool) -> Any:
            results = transaction(writer, conn, fns, durable=durable)
            self._add("commit", durable)  # after its fsync, if it made one
            return results

        get_updates, send = BotApiDouble._m_getUpdates, BotApiDouble._m_sendMessage

        async def polled(double: BotApiDouble, params: dict[str, Any]) -> Any:
            self._add("poll", int(params["offset"]) if "offset" in params else None)
            return await get_updates(double, params)

        async def sent(double: BotApiDouble, params: dict[str, Any]) -> Any:
            self._add("send", params.get("text"))
            return await send(double, params)

        monkeypatch.setattr(inbox_module, "admit", admitted)
        monkeypatch.setattr(wal_file, "_datasync", datasync)
        monkeypatch.setattr(GroupCommitWriter, "_transaction", committed)
        monkeypatch.setattr(BotApiDouble, "_m_getUpdates", polled)
        monkeypatch.setattr(BotApiDouble, "_m_sendMessage", sent)

    def _add(self, kind: str, detail: Any) -> None:
        self.events.append((kind, detail, time.monotonic()))

    def first(self, kind: str, after: int = 0, detail: Any = ...) -> int:
        """Where the first ``kind`` event at or after ``after`` is (with ``detail``, if given)."""
        return next(
            i
            for i, (k, d, _) in enumerate(self.events)
            if i >= after and k == kind and (detail is ... or d == detail)
        )

    def confirming_poll(self, update_id: int) -> int:
        """Where the first poll that confirms ``update_id`` (an offset above it) is."""
        return next(
            i for i, (k, d, _) in enumerate(self.events) if k == "poll" and d is not None and d > update_id
        )


async def test_a_message_is_admitted_without_an_fsync_and_confirmed_after_the_next_one(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Telegram hands back every update below the offset, so a message's admission needs no
    fsync of its own, as long as the offset confirming it waits for one. Here the turn takes
    over a second (the echo agent's chunks are slowed), so its commit cannot be what carries
    the admission before the offset moves: the writer's own fsync after the linger must."""
    timeline = Timeline(monkeypatch)
    slow = {"echo": {"chunk_delay_ms": 600}}
    await gateways.start(telegram_config(double, tmp_path, telegram={"allow_users": [ADA.id]}, agent=slow))
    update_id, _ = await double.push_message(private(ADA), ADA, "hi")
    await double.wait_for(lambda: _texts(double, ADA.id) == [echo_of("hi")], what="answered")
    events = timeline.events
    admitted = timeline.first("admit", detail=("hi", True))
    own = timeline.first("commit", after=admitted)  # the admission's transaction ended
    synced = timeline.first("fsync", after=admitted)
    confirmed = timeline.confirming_poll(update_id)
    replied = timeline.first("send")  # the preview or the reply: the first thing the user sees
    assert events[own][1] is False and own < synced, "the admission was fsynced by itself"
    assert synced < confirmed, "confirmed to Telegram before an fsync carried the admission"
    assert confirmed < replied, "the offset waited for the turn instead of the writer's fsync"


async def test_with_drop_pending_updates_a_message_is_fsynced_before_its_turn(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start that drops what Telegram holds would not get back an admission a power cut took."""
    timeline = Timeline(monkeypatch)
    config = telegram_config(
        double, tmp_path, telegram={"allow_users": [ADA.id], "drop_pending_updates": True}
    )
    await gateways.start(config)
    await double.wait_for(lambda: len(double.offsets) >= 2, what="polling after the drop")
    await double.push_message(private(ADA), ADA, "kept")
    await double.wait_for(lambda: _texts(double, ADA.id) == [echo_of("kept")], what="answered")
    admitted = timeline.first("admit", detail=("kept", False))
    own = timeline.first("commit", after=admitted)
    assert timeline.events[own][1] is True, "the admission's transaction was not durable"
    assert timeline.first("fsync", after=admitted) < own, "its commit returned before its fsync"


async def test_a_refused_fsync_leaves_the_message_unconfirmed_and_unanswered(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await gateways.start(telegram_config(double, tmp_path, telegram={"allow_users": [ADA.id]}))
    tries: list[float] = []

    def refused(fd: int) -> None:
        tries.append(time.monotonic())
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(wal_file, "_datasync", refused)
    update_id, _ = await double.push_message(private(ADA), ADA, "on a failing disk")
    polls = double.get_updates_calls
    await double.wait_for(lambda: tries and double.get_updates_calls >= polls + 2, what="refetched")
    assert double.confirmed_below <= update_id, "confirmed a message no fsync carried to the disk"
    assert double.view(ADA.id) == [], "answered on the strength of a commit that may be lost"
