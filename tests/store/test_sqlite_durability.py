"""Which commits fsync: claims recovery can redo commit at ``synchronous=NORMAL``, the rest
at the configured level (FULL by default), observed on the store's real writer connection.

In WAL mode a NORMAL commit is in the OS's page cache once it returns and reaches the disk
with the next fsync of the WAL, which a later FULL commit does for every frame before it:
a SIGKILL loses none of them (shown below with a child killed mid-flight), and a power cut
only a tail of claims that recovery redoes (docs/architecture.md, "Which commits fsync").
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys
import textwrap
import threading
from typing import Any

from chatgate.domain.outbox import OutboxSettlement

NAMES = {"0": "OFF", "1": "NORMAL", "2": "FULL", "3": "EXTRA"}


class CommitLevels:
    """A trace of the writer connection: the ``synchronous`` level in force at each COMMIT.

    It follows every ``PRAGMA synchronous = X`` the connection runs, starting from the level
    read from the connection itself when the trace is installed (the writer is idle then).
    """

    def __init__(self, writer: Any) -> None:
        self.level = NAMES[str(writer.execute("PRAGMA synchronous").fetchone()[0])]
        self.commits: list[str] = []
        self.pragmas = 0
        self._lock = threading.Lock()
        writer.set_trace_callback(self._trace)

    def _trace(self, statement: str) -> None:  # on the writer thread
        with self._lock:
            found = re.fullmatch(r"PRAGMA synchronous = (\w+)", statement.strip())
            if found:
                self.level = NAMES.get(found[1], found[1])
                self.pragmas += 1
            elif statement.strip() == "COMMIT":
                self.commits.append(self.level)

    def take(self) -> list[str]:
        with self._lock:
            taken, self.commits = self.commits, []
        return taken


async def test_claims_and_cursors_commit_at_normal_everything_acknowledged_or_sent_at_full(
    open_store, make, connect_seam
):
    store = await open_store(connect=connect_seam)
    levels = CommitLevels(connect_seam.writer)

    await store.admit(make.request("d1", "k1"))
    assert levels.take() == ["FULL"], "admission: the upstream ack waits for it"
    (claim,) = await store.claim_sessions("w", 4, 30.0, 10)
    assert levels.take() == ["NORMAL"], "session claim: recovery claims the session again"
    assert await store.renew_lease("k1", "w", 30.0)
    assert levels.take() == ["NORMAL"], "lease renewal"
    await store.set_cursor("telegram:1", "5001")
    assert levels.take() == ["NORMAL"], "cursor: a lost one refetches, admission dedupes"
    await store.complete_turn("w", make.outcome(claim, make.draft("r1")), 30.0, 10)
    assert levels.take() == ["FULL"], "turn commit: transcript, inbox done, the reply's row"
    (row,) = await store.claim_outbox(10)
    assert levels.take() == ["FULL"], "row claim: a send follows it (a resend of a 'sending' row is marked)"
    await store.settle_outbox([OutboxSettlement(row.id, "sent", platform_message_id="p1")])
    assert levels.take() == ["FULL"], "settlement"


async def test_a_turn_commit_that_claims_its_reply_is_one_full_commit_and_the_send_needs_no_other(
    open_store, make, connect_seam
):
    store = await open_store(connect=connect_seam)
    await store.admit(make.request("d1", "k1"))
    (claim,) = await store.claim_sessions("w", 4, 30.0, 10)
    levels = CommitLevels(connect_seam.writer)
    committed = await store.commit_turn("w", make.outcome(claim, make.draft("r1")), 30.0, 10, 1)
    assert levels.take() == ["FULL"], "the turn and its row's claim, durable before the send"
    (row,) = committed.sending
    await store.settle_outbox([OutboxSettlement(row.id, "sent", platform_message_id="p1")])
    assert levels.take() == ["FULL"], "settlement: the only other commit of the reply"


async def test_a_batch_with_any_durable_write_commits_at_full(open_store, make, connect_seam):
    store = await open_store(connect=connect_seam)
    await store.admit(make.request("d0", "k0"))
    levels = CommitLevels(connect_seam.writer)
    async with connect_seam.writer_paused(store):  # the plug is a lease renewal: NORMAL
        claims = asyncio.ensure_future(store.claim_sessions("w", 4, 30.0, 10))
        admit = asyncio.ensure_future(store.admit(make.request("d1", "k1")))
        cursor = asyncio.ensure_future(store.set_cursor("c", "1"))
    await asyncio.gather(claims, admit, cursor)
    assert levels.take() == ["NORMAL", "FULL"], "the plug alone, then claim + admission + cursor together"
    await store.set_cursor("c", "2")
    await store.set_cursor("c", "3")
    assert levels.take() == ["NORMAL", "NORMAL"]
    assert levels.pragmas == 3, "the level is set only when it changes"


async def test_a_store_configured_below_full_never_raises_a_commit(open_store, make, connect_seam):
    store = await open_store(connect=connect_seam, synchronous="OFF")
    levels = CommitLevels(connect_seam.writer)
    await store.admit(make.request("d1", "k1"))
    await store.claim_sessions("w", 4, 30.0, 10)
    await store.set_cursor("c", "1")
    assert levels.take() == ["OFF", "OFF", "OFF"]
    assert levels.pragmas == 0


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
