"""Which commits fsync: claims recovery can redo and 'sent' settlements commit without one,
the rest are made durable before their callers hear of them, observed on the store's real
writer connection and at its fsync of the WAL.

In WAL mode the writer connection runs at ``synchronous=NORMAL`` and the writer fsyncs the
WAL itself after a durable batch (``store/sqlite/wal_file.py``). A commit without that fsync
is in the OS's page cache once it returns and reaches the disk with the next fsync of the
WAL, which covers every frame before it: a SIGKILL loses none of them (shown below with a
child killed mid-flight), and a power cut only a tail of at most ``SYNC_LAG`` of writes whose
loss is harmless (docs/architecture.md, "Which commits fsync").
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import textwrap
import threading
import time
from typing import Any

import pytest
from msgspec.structs import replace

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.outbox import OutboxSettlement
from chatgate.store.sqlite import wal_file

NAMES = {"0": "OFF", "1": "NORMAL", "2": "FULL", "3": "EXTRA"}


class CommitLevels:
    """What reached the disk at each COMMIT of the writer connection: ``FULL`` when the
    connection's own ``synchronous`` made SQLite fsync the WAL (``FULL``/``EXTRA``) or the writer
    fsynced the WAL before its next commit, else the connection's level (``NORMAL``/``OFF``).

    It follows every ``PRAGMA synchronous = X`` the connection runs, starting from the level
    read from the connection itself when the trace is installed (the writer is idle then), and
    every ``fdatasync`` the writer makes (the real call, wrapped: it still reaches the disk),
    each checked to be of this database's ``-wal`` file (the same inode).
    """

    def __init__(self, writer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.level = NAMES[str(writer.execute("PRAGMA synchronous").fetchone()[0])]
        self._commits: list[list[Any]] = []
        self.pragmas = 0
        self.syncs: list[float] = []
        """When the writer fsynced the WAL (monotonic)."""
        self._lock = threading.Lock()
        (main,) = [
            file for _, name, file in writer.execute("PRAGMA database_list").fetchall() if name == "main"
        ]
        wal_inode = os.stat(f"{main}-wal").st_ino
        writer.set_trace_callback(self._trace)
        real = wal_file._datasync

        def datasync(fd: int) -> None:
            assert os.fstat(fd).st_ino == wal_inode, "the writer fsynced a file that is not the WAL"
            real(fd)
            with self._lock:
                self.syncs.append(time.monotonic())
                if self._commits:
                    self._commits[-1][1] = True

        monkeypatch.setattr(wal_file, "_datasync", datasync)

    def _trace(self, statement: str) -> None:  # on the writer thread
        with self._lock:
            found = re.fullmatch(r"PRAGMA synchronous = (\w+)", statement.strip())
            if found:
                self.level = NAMES.get(found[1], found[1])
                self.pragmas += 1
            elif statement.strip() == "COMMIT":
                self._commits.append([self.level, False])

    def take(self) -> list[str]:
        with self._lock:
            taken, self._commits = self._commits, []
        return ["FULL" if synced or level in ("FULL", "EXTRA") else level for level, synced in taken]


async def test_claims_cursors_and_sent_settlements_commit_at_normal_what_is_acked_or_sent_at_full(
    open_store, make, connect_seam, monkeypatch
):
    store = await open_store(connect=connect_seam)
    levels = CommitLevels(connect_seam.writer, monkeypatch)

    await store.admit(make.request("d1", "k1"))
    assert levels.take() == ["FULL"], "admission: the upstream ack waits for it"
    (claim,) = await store.claim_sessions("w", 4, 30.0, 10)
    assert levels.take() == ["NORMAL"], "session claim: recovery claims the session again"
    assert await store.renew_lease("k1", "w", 30.0)
    assert levels.take() == ["NORMAL"], "lease renewal"
    await store.set_cursor("telegram:1", "5001")
    assert levels.take() == ["NORMAL"], "cursor: a lost one refetches, admission dedupes"
    await store.set_cursor("discord:channels", '{"1": "5"}', durable=True)
    assert levels.take() == ["FULL"], "a position relaxed admissions rely on (a new channel's)"
    await store.complete_turn("w", make.outcome(claim, make.draft("r1")), 30.0, 10)
    assert levels.take() == ["FULL"], "turn commit: transcript, inbox done, the reply's row"
    (row,) = await store.claim_outbox(10)
    assert levels.take() == ["FULL"], "row claim: a send follows it (a resend of a 'sending' row is marked)"
    await store.settle_outbox([OutboxSettlement(row.id, "sent", platform_message_id="p1")])
    assert levels.take() == ["NORMAL"], "'sent': lost, the row is 'sending' again and resent marked"


async def test_a_replayable_message_is_admitted_at_normal_and_its_turn_commit_carries_it(
    open_store, make, connect_seam, monkeypatch
):
    """Discord's catch-up reads a lost message back, so its admission needs no fsync of its own;
    anything the admission replies, cancels or answers is sent on its strength and stays FULL."""
    store = await open_store(connect=connect_seam)
    levels = CommitLevels(connect_seam.writer, monkeypatch)
    await store.admit(replace(make.request("d1", "k1"), redoable=True))
    assert levels.take() == ["NORMAL"], "a plain replayable message: read back after a power cut"
    (claim,) = await store.claim_sessions("w", 4, 30.0, 10)
    await store.commit_turn("w", make.outcome(claim, make.draft("r1")), 30.0, 10, 1)
    assert levels.take() == ["NORMAL", "FULL"], (
        "the claim, then the turn commit (its fsync covers the admission)"
    )
    for request in (
        make.request("d2", "k2", reply=make.draft("cmd2", key="k2")),
        make.request("d3", "k3", cancel_queued=True),
        make.request("d4", "k4", reset_session=True),
        make.request("d5", "k5", queued=False),
    ):
        await store.admit(replace(request, redoable=True))
    assert levels.take() == ["FULL"] * 4, "a reply, a cancellation, a reset or a command is acted on at once"
    await store.admit(make.request("d6", "k6"))
    assert levels.take() == ["FULL"], "an event no adapter reads back"


async def test_a_reply_costs_one_full_commit_when_its_turn_commit_claims_it(
    open_store, make, connect_seam, monkeypatch
):
    store = await open_store(connect=connect_seam)
    await store.admit(make.request("d1", "k1"))
    (claim,) = await store.claim_sessions("w", 4, 30.0, 10)
    levels = CommitLevels(connect_seam.writer, monkeypatch)
    committed = await store.commit_turn("w", make.outcome(claim, make.draft("r1")), 30.0, 10, 1)
    assert levels.take() == ["FULL"], "the turn and its row's claim, durable before the send"
    (row,) = committed.sending
    await store.settle_outbox([OutboxSettlement(row.id, "sent", platform_message_id="p1")])
    assert levels.take() == ["NORMAL"], "the settlement: the next durable commit carries it"


async def _four_rows_sending(store, make):
    """Four replies, each the head of its own chat, claimed by one turn commit."""
    await store.admit(make.request("d1", "k1"))
    (claim,) = await store.claim_sessions("w", 4, 30.0, 10)
    drafts = [make.draft(f"r{i}", f"c{i}") for i in range(4)]
    return (await store.commit_turn("w", make.outcome(claim, *drafts), 30.0, 10, 4)).sending


async def test_a_settlement_that_is_not_sent_commits_at_full(open_store, make, connect_seam, monkeypatch):
    store = await open_store(connect=connect_seam)
    rows = await _four_rows_sending(store, make)
    assert len(rows) == 4
    levels = CommitLevels(connect_seam.writer, monkeypatch)
    later = time.time() + 60
    await store.settle_outbox([OutboxSettlement(rows[0].id, "pending", retry_at=later, counts_attempt=False)])
    await store.settle_outbox([OutboxSettlement(rows[1].id, "failed", error="refused")])
    await store.settle_outbox([OutboxSettlement(rows[2].id, "ambiguous", retry_at=later)])
    await store.settle_outbox(
        [
            OutboxSettlement(rows[3].id, "sent", platform_message_id="p3"),
            OutboxSettlement(rows[0].id, "failed"),
        ]
    )
    assert levels.take() == ["FULL"] * 4, "lost, each would have an undelivered row resent as a duplicate"


async def test_a_relaxed_commit_reaches_the_disk_within_the_sync_lag(
    open_store, make, connect_seam, monkeypatch
):
    monkeypatch.setattr("chatgate.store.sqlite.writer.SYNC_LAG", 0.3)
    store = await open_store(connect=connect_seam)
    (row, *_) = await _four_rows_sending(store, make)
    levels = CommitLevels(connect_seam.writer, monkeypatch)
    await store.settle_outbox([OutboxSettlement(row.id, "sent", platform_message_id="p0")])
    committed = time.monotonic()
    assert levels.take() == ["NORMAL"], "the settlement returned before any fsync"
    deadline = committed + 10
    while not levels.syncs:
        assert time.monotonic() < deadline, "the relaxed commit never reached the disk"
        await asyncio.sleep(0.02)
    assert levels.syncs[0] - committed >= 0.25, "not before the lag: a durable commit may come"
    await asyncio.sleep(0.6)
    assert len(levels.syncs) == 1, "nothing relaxed is left, so nothing more is done"


async def test_a_durable_commit_after_a_relaxed_one_leaves_nothing_to_sync(
    open_store, make, connect_seam, monkeypatch
):
    monkeypatch.setattr("chatgate.store.sqlite.writer.SYNC_LAG", 0.3)
    store = await open_store(connect=connect_seam)
    (first, second, *_) = await _four_rows_sending(store, make)
    levels = CommitLevels(connect_seam.writer, monkeypatch)
    await store.settle_outbox([OutboxSettlement(first.id, "sent", platform_message_id="p0")])
    await store.admit(make.request("d2", "k2"))  # its fsync covers the settlement's frames too
    assert levels.take() == ["NORMAL", "FULL"]
    await asyncio.sleep(0.8)
    assert len(levels.syncs) == 1, "only the admission's"
    await store.set_cursor("c", "1")  # a relaxed write that changes a row arms the lag again
    await store.settle_outbox([OutboxSettlement(second.id, "sent", platform_message_id="p1")])
    deadline = time.monotonic() + 10
    while len(levels.syncs) == 1:
        assert time.monotonic() < deadline, "the relaxed commits never reached the disk"
        await asyncio.sleep(0.02)


async def test_a_clean_stop_syncs_relaxed_commits_at_once(open_store, make, connect_seam, monkeypatch):
    store = await open_store(connect=connect_seam)  # the default lag: a second
    (row, *_) = await _four_rows_sending(store, make)
    levels = CommitLevels(connect_seam.writer, monkeypatch)
    await store.settle_outbox([OutboxSettlement(row.id, "sent", platform_message_id="p0")])
    started = time.monotonic()
    await store.close()
    assert len(levels.syncs) == 1 and levels.syncs[0] - started < 0.9, "the stop did not wait for the lag"


def refuse_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Make the disk refuse every fsync of the WAL, as a failing disk does; returns the tries."""
    tries: list[float] = []

    def refused(fd: int) -> None:
        tries.append(time.monotonic())
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(wal_file, "_datasync", refused)
    return tries


async def test_a_failed_fsync_refuses_every_later_write_until_a_restart(
    open_store, make, connect_seam, monkeypatch, caplog
):
    store = await open_store(connect=connect_seam)
    await store.admit(make.request("d0", "k0"))
    working = wal_file._datasync
    tries = refuse_fsyncs(monkeypatch)
    with pytest.raises(StoreUnavailable, match=r"refused to fsync .*Input/output error.*restart chatgate"):
        await store.admit(make.request("d1", "k1"))
    assert "refused to fsync" in caplog.text
    monkeypatch.setattr(wal_file, "_datasync", working)  # the disk answers again: too late
    with pytest.raises(StoreUnavailable, match="restart chatgate"):
        await store.admit(make.request("d1", "k1"))  # the redelivery: never acked without an fsync
    with pytest.raises(StoreUnavailable, match="restart chatgate"):
        await store.set_cursor("c", "1")  # relaxed writes too: their frames would follow lost ones
    assert len(tries) == 1
    await store.close()
    store = await open_store()  # the restart: what the disk has is trusted again
    again = await store.admit(make.request("d1", "k1"))
    assert not again.new, "the committed row was on the disk after all: recognized, not run twice"
    assert (await store.admit(make.request("d2", "k2"))).new


async def test_a_failed_fsync_after_the_lag_refuses_every_later_write(
    open_store, make, connect_seam, monkeypatch
):
    monkeypatch.setattr("chatgate.store.sqlite.writer.SYNC_LAG", 0.2)
    store = await open_store(connect=connect_seam)
    (row, *_) = await _four_rows_sending(store, make)
    tries = refuse_fsyncs(monkeypatch)
    await store.settle_outbox([OutboxSettlement(row.id, "sent", platform_message_id="p0")])
    deadline = time.monotonic() + 10
    while not tries:
        assert time.monotonic() < deadline, "the lag's fsync never came"
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.6)
    assert len(tries) == 1, "final: not tried again"
    with pytest.raises(StoreUnavailable, match="restart chatgate"):
        await store.admit(make.request("d2", "k2"))


async def test_a_write_deferred_by_a_failed_fsync_never_runs_a_second_time(
    open_store, make, connect_seam, monkeypatch, query
):
    store = await open_store(connect=connect_seam)
    (row, *_) = await _four_rows_sending(store, make)
    working = wal_file._datasync
    refuse_fsyncs(monkeypatch)
    wait = OutboxSettlement(row.id, "pending", retry_at=time.time() + 60, counts_attempt=False)
    with pytest.raises(StoreUnavailable):
        await store.settle_outbox([wait])  # committed (attempt given back), then the fsync failed
    assert query("SELECT status, attempts FROM outbox WHERE id = ?", row.id) == [("pending", 0)]
    monkeypatch.setattr(wal_file, "_datasync", working)
    with pytest.raises(StoreUnavailable, match="restart chatgate"):
        await store.set_cursor("c", "1")
    await asyncio.sleep(1.5)  # deferred writes are tried every second while any wait
    await store.close()  # and once more as the writer stops
    assert query("SELECT status, attempts FROM outbox WHERE id = ?", row.id) == [("pending", 0)], (
        "the settlement ran again: its attempt given back twice"
    )


async def test_a_batch_with_any_durable_write_commits_at_full(open_store, make, connect_seam, monkeypatch):
    store = await open_store(connect=connect_seam)
    await store.admit(make.request("d0", "k0"))
    levels = CommitLevels(connect_seam.writer, monkeypatch)
    async with connect_seam.writer_paused(store):  # the plug is a lease renewal: NORMAL
        claims = asyncio.ensure_future(store.claim_sessions("w", 4, 30.0, 10))
        admit = asyncio.ensure_future(store.admit(make.request("d1", "k1")))
        cursor = asyncio.ensure_future(store.set_cursor("c", "1"))
    await asyncio.gather(claims, admit, cursor)
    assert levels.take() == ["NORMAL", "FULL"], "the plug alone, then claim + admission + cursor together"
    await store.set_cursor("c", "2")
    await store.set_cursor("c", "3")
    assert levels.take() == ["NORMAL", "NORMAL"]
    assert levels.pragmas == 0, "the connection stays at NORMAL: the writer fsyncs, not SQLite"


async def test_a_store_configured_below_full_never_raises_a_commit(
    open_store, make, connect_seam, monkeypatch
):
    store = await open_store(connect=connect_seam, synchronous="OFF")
    levels = CommitLevels(connect_seam.writer, monkeypatch)
    await store.admit(make.request("d1", "k1"))
    await store.claim_sessions("w", 4, 30.0, 10)
    await store.set_cursor("c", "1")
    assert levels.take() == ["OFF", "OFF", "OFF"]
    assert levels.pragmas == 0 and levels.syncs == [], "the configured OFF: no fsync by anyone"


_CURSOR_FOREVER = textwrap.dedent(
    r"""
    import asyncio, sys
    from chatgate.store.sqlite import SqliteStore

    async def main(path):
        store = SqliteStore(path)
        await store.open()
        i = 0
        while True:  # only redoable writes: no commit of this child ever fsyncs the WAL
            i += 1
            await store.set_cursor("poll", str(i))
            sys.stdout.write(f"{i}\n")  # only after the commit returned
            sys.stdout.flush()

    asyncio.run(main(sys.argv[1]))
    """
)


async def test_a_sigkill_loses_no_normal_commit(open_store, db_path, query):
    db_path.parent.mkdir(parents=True)
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CURSOR_FOREVER, str(db_path), stdout=asyncio.subprocess.PIPE
    )
    assert child.stdout is not None
    last = 0
    try:
        while last < 300:
            line = await asyncio.wait_for(child.stdout.readline(), 60)
            assert line, "the child exited early"
            last = int(line)
    finally:
        child.send_signal(signal.SIGKILL)  # mid-flight: a cursor is being committed right now
        rest = await asyncio.wait_for(child.stdout.read(), 60)
        await child.wait()
    assert child.returncode == -signal.SIGKILL
    for line in rest.decode().split("\n")[:-1]:  # complete lines only
        last = int(line)
    store = await open_store()  # recovers the WAL the killed writer left
    stored = await store.get_cursor("poll")
    assert stored is not None and int(stored) >= last, f"acknowledged {last}, the file holds {stored}"


_DIE_AFTER_THE_COMMIT = textwrap.dedent(
    r"""
    import asyncio, os, signal, sys
    from chatgate.domain.history import HistoryEntry
    from chatgate.domain.inbound import Inbound
    from chatgate.domain.inbox import AdmitRequest
    from chatgate.domain.outbox import OutboxDraft
    from chatgate.domain.source import Source
    from chatgate.domain.turns import TurnOutcome
    from chatgate.store.sqlite import SqliteStore

    async def main(path):
        store = SqliteStore(path)
        await store.open()
        source = Source(platform="telegram", chat_id="42", chat_type="dm", user_id="u1")
        inbound = Inbound(transport="telegram", delivery_id="u1", source=source, text="hi", message_ref="m1")
        await store.admit(AdmitRequest(inbound=inbound, session_key="k1"))
        (claim,) = await store.claim_sessions("dead", 1, 30.0, 1)
        final = OutboxDraft("final:1", "telegram", "42", "k1", "final", "hello", "m1", {"chat_id": "42"})
        said = (HistoryEntry("assistant", "hello"),)
        outcome = TurnOutcome("k1", claim.session_id, (claim.items[0].seq,), said, (final,), "ok")
        (row,) = (await store.commit_turn("dead", outcome, 30.0, 1, 1)).sending
        sys.stdout.write(f"{row.id}\n")
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)  # after the commit, before any send or settlement

    asyncio.run(main(sys.argv[1]))
    """
)


async def test_a_process_killed_between_the_commit_that_claimed_its_reply_and_the_send_resends_it_once(
    open_store, db_path
):
    db_path.parent.mkdir(parents=True)
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _DIE_AFTER_THE_COMMIT, str(db_path), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(child.communicate(), 60)
    assert child.returncode == -signal.SIGKILL
    row_id = int(out.decode())
    store = await open_store()
    await store.recover("next")
    (resent,) = await store.claim_outbox(10)
    assert (resent.id, resent.text, resent.possibly_duplicate, resent.attempts) == (row_id, "hello", True, 2)
    assert await store.claim_outbox(10) == []
    await store.settle_outbox([OutboxSettlement(resent.id, "sent", platform_message_id="p1")])
    await store.recover("after")
    assert await store.claim_outbox(10) == [], "resent once"
