"""Lock files: one holder at a time, released on death, never leaking the credential."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from chatgate.app.locks import FileLock, LockHeld, LockRecord, credential_lock, is_held, read_record


def test_a_second_holder_of_the_same_credential_is_refused_with_the_owner_named(tmp_path: Path) -> None:
    first = credential_lock(tmp_path, "telegram", "123:secret-token")
    first.acquire(LockRecord.for_this_process())
    second = credential_lock(tmp_path, "telegram", "123:secret-token")
    with pytest.raises(LockHeld) as err:
        second.acquire(LockRecord.for_this_process())
    assert err.value.record is not None and err.value.record.pid == LockRecord.for_this_process().pid
    other = credential_lock(tmp_path, "telegram", "456:another-token")
    other.acquire(LockRecord.for_this_process())
    first.release()
    second.acquire(LockRecord.for_this_process())
    second.release()
    other.release()


def test_credential_lock_names_and_contents_never_contain_the_credential(tmp_path: Path) -> None:
    lock = credential_lock(tmp_path, "relay", "super-secret-value")
    lock.acquire(LockRecord.for_this_process())
    try:
        assert "super-secret-value" not in lock.path.name
        assert "super-secret-value" not in lock.path.read_text()
    finally:
        lock.release()


async def test_lock_is_released_when_its_holder_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "held.lock"
    script = (
        "import sys, time; from pathlib import Path; from chatgate.app.locks import FileLock, LockRecord; "
        f"FileLock(Path({str(path)!r}), 'test').acquire(LockRecord.for_this_process()); "
        "print('held', flush=True); time.sleep(600)"
    )
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE
    )
    assert holder.stdout is not None
    assert (await asyncio.wait_for(holder.stdout.readline(), 30)).strip() == b"held"
    assert is_held(path)
    record = read_record(path)
    assert record is not None and record.pid == holder.pid and record.process() is not None
    with pytest.raises(LockHeld):
        FileLock(path, "test").acquire(LockRecord.for_this_process())
    holder.kill()
    await holder.wait()
    assert not is_held(path)
    mine = FileLock(path, "test")
    mine.acquire(LockRecord.for_this_process())
    assert mine.previous is not None and mine.previous.pid == holder.pid
    mine.release()


def test_unreadable_garbage_in_a_lock_file_does_not_stop_a_takeover(tmp_path: Path) -> None:
    path = tmp_path / "garbage.lock"
    path.write_bytes(b"\xff\x00 not json")
    lock = FileLock(path, "test")
    lock.acquire(LockRecord.for_this_process())
    assert lock.previous is None
    assert read_record(path) is not None
    lock.release()


def test_a_reader_never_sees_an_empty_record_while_the_holder_rewrites_it(tmp_path: Path) -> None:
    """`status` and `--replace` read the record (``read_record``) while a starting gateway rewrites it."""
    import threading

    path = tmp_path / "gateway.lock"
    lock = FileLock(path, "gateway")
    lock.acquire(LockRecord.for_this_process(http="127.0.0.1:8765", state_dir="x" * 300))
    stop = threading.Event()
    unreadable: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            if read_record(path) is None:
                unreadable.append(path.read_text())

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(600):  # alternate a long and a short record
            extra = {"state_dir": "x" * 300} if i % 2 else {}
            lock.update(LockRecord.for_this_process(**extra))
    finally:
        stop.set()
        thread.join()
        lock.release()
    assert unreadable == []
    assert read_record(path) is None  # released: the record is cleared
