"""Group commit: concurrent writes share a transaction, and "committed" means durable."""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap

from chatgate.store.sqlite import SqliteStore


class Commits:
    """The store's on_commit callback: one entry per transaction, the number of writes in it."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def __call__(self, size: int, seconds: float) -> None:
        assert seconds >= 0
        self.sizes.append(size)


async def test_concurrent_admissions_share_commits_and_all_are_durable(open_store, make, query, db_path):
    commits = Commits()
    store = await open_store(on_commit=commits)
    results = await asyncio.gather(
        *(store.admit(make.request(f"d{i}", f"k{i % 10}", f"m{i}", chat_id=f"c{i % 10}")) for i in range(500))
    )
    assert all(r.new for r in results)
    assert len({r.seq for r in results}) == 500
    assert sum(commits.sizes) == 500
    assert len(commits.sizes) < 500, "every admission paid for its own commit"
    # Durable before the results were handed out: an independent connection sees them all ...
    assert query("SELECT COUNT(*) FROM inbox") == [(500,)]
    await store.close()
    # ... and so does a new store on the same file.
    again = await open_store()
    assert await again.queue_depth() == 500


async def test_writes_queued_behind_a_running_commit_are_committed_together(
    open_store, make, connect_seam, query
):
    commits = Commits()
    store = await open_store(connect=connect_seam, on_commit=commits)
    async with connect_seam.writer_paused(store):
        tasks = [
            asyncio.ensure_future(store.admit(make.request(f"d{i}", f"k{i % 7}", chat_id=f"c{i % 7}")))
            for i in range(500)
        ]
    results = await asyncio.gather(*tasks)
    assert all(r.new for r in results)
    assert commits.sizes == [1, 500]  # the paused write alone, then all 500 in one transaction
    assert query("SELECT COUNT(*) FROM inbox WHERE status = 'queued'") == [(500,)]


async def test_without_group_commit_every_write_is_its_own_commit(open_store, make, connect_seam, query):
    commits = Commits()
    store = await open_store(connect=connect_seam, on_commit=commits, group_commit=False)
    async with connect_seam.writer_paused(store):
        tasks = [asyncio.ensure_future(store.admit(make.request(f"d{i}"))) for i in range(50)]
    results = await asyncio.gather(*tasks)
    assert [r.seq for r in results] == sorted(r.seq for r in results)
    assert commits.sizes == [1] * 51
    assert query("SELECT COUNT(*) FROM inbox") == [(50,)]


async def test_max_batch_caps_the_writes_in_one_transaction(open_store, make, connect_seam):
    commits = Commits()
    store = await open_store(connect=connect_seam, on_commit=commits, max_batch=16)
    async with connect_seam.writer_paused(store):
        tasks = [asyncio.ensure_future(store.admit(make.request(f"d{i}"))) for i in range(40)]
    await asyncio.gather(*tasks)
    assert commits.sizes == [1, 16, 16, 8]


async def test_results_of_a_batch_follow_submission_order(open_store, make, connect_seam):
    store = await open_store(connect=connect_seam)
    async with connect_seam.writer_paused(store):
        tasks = [asyncio.ensure_future(store.admit(make.request(f"d{i}", "k1"))) for i in range(30)]
    results = await asyncio.gather(*tasks)
    seqs = [r.seq for r in results]
    assert seqs == sorted(seqs) and len(set(seqs)) == 30
    (claim,) = await store.claim_sessions("w", 1, 30.0, 100)
    assert [i.inbound.delivery_id for i in claim.items] == [f"d{i}" for i in range(30)]


_ADMIT_FOREVER = textwrap.dedent(
    r"""
    import asyncio, sys
    from chatgate.domain.inbound import Inbound
    from chatgate.domain.source import Source
    from chatgate.domain.inbox import AdmitRequest
    from chatgate.store.sqlite import SqliteStore

    async def main(path):
        store = SqliteStore(path)
        await store.open()

        async def one(i):
            src = Source(platform="webchat", chat_id=f"c{i % 7}", user_id="u1")
            inbound = Inbound("webchat", f"d{i}", src, f"m{i}")
            result = await store.admit(AdmitRequest(inbound, f"k{i % 7}"))
            sys.stdout.write(f"d{i} {result.seq}\n")  # only after the commit returned
            sys.stdout.flush()

        i = 0
        while True:
            await asyncio.gather(*(one(i + j) for j in range(25)))
            i += 25

    asyncio.run(main(sys.argv[1]))
    """
)


async def test_every_admission_acknowledged_before_sigkill_is_in_the_file_afterwards(
    open_store, db_path, query
):
    db_path.parent.mkdir(parents=True)
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _ADMIT_FOREVER, str(db_path), stdout=asyncio.subprocess.PIPE
    )
    assert child.stdout is not None
    acked: dict[str, int] = {}
    try:
        while len(acked) < 300:
            line = await asyncio.wait_for(child.stdout.readline(), 60)
            assert line, "the child exited early"
            delivery_id, seq = line.decode().split()
            acked[delivery_id] = int(seq)
    finally:
        child.send_signal(signal.SIGKILL)  # mid-flight: admissions are being committed right now
        rest = await asyncio.wait_for(child.stdout.read(), 60)
        await child.wait()
    assert child.returncode == -signal.SIGKILL
    for line in rest.decode().split("\n")[:-1]:  # complete lines only
        delivery_id, seq = line.split()
        acked[delivery_id] = int(seq)

    store: SqliteStore = await open_store()  # recovers the WAL of the killed writer
    stored = dict(query("SELECT delivery_id, seq FROM inbox"))
    missing = {d: s for d, s in acked.items() if stored.get(d) != s}
    assert not missing, f"{len(missing)} acknowledged admissions lost or changed: {sorted(missing)[:5]}"
    assert await store.queue_depth() == len(stored) >= len(acked)


async def test_a_commit_hook_that_raises_is_logged_and_the_writer_goes_on(open_store, make, caplog):
    """The hook (the metrics') runs on the only writer thread: had it killed the thread, every
    later write would wait for ever."""
    calls: list[int] = []

    def broken(size: int, seconds: float) -> None:
        calls.append(size)
        raise RuntimeError("a metrics bug")

    store = await open_store(on_commit=broken)
    first = await asyncio.wait_for(store.admit(make.request("d1", "k1")), 10)
    second = await asyncio.wait_for(store.admit(make.request("d2", "k2")), 10)
    assert first.new and second.new
    assert len(calls) >= 2
    assert "the writer's commit hook failed" in caplog.text
