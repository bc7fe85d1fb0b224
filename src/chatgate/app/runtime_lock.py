"""The state directory's runtime lock, taken by ``chatgate run`` before anything is built.

With ``--replace``, the gateway holding it is stopped first (``replace.py``, which loads
psutil: only then).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from chatgate.app.locks import FileLock, LockHeld, LockRecord, LockUnavailable, runtime_lock

log = logging.getLogger(__name__)


def acquire_runtime_lock(state_dir: Path, replace: bool, replace_timeout: float) -> FileLock:
    """The state dir's runtime lock; with ``replace``, stop the gateway holding it first."""
    lock = runtime_lock(state_dir)
    record = LockRecord.for_this_process(state_dir=str(state_dir))
    try:
        lock.acquire(record)
    except LockHeld as held:
        if not replace:
            raise
        if held.record is None:
            raise LockUnavailable(
                f"{held.path} is locked by a process that left no record; stop it by hand"
            ) from held
        from chatgate.app.replace import stop_gateway  # only to replace a gateway: psutil comes with it

        report = stop_gateway(held.record, timeout=replace_timeout)
        log.info(
            "replaced gateway pid %d in %.1fs (forced: %s, orphans reaped: %s, skipped: %s)",
            report.pid,
            report.seconds,
            report.forced,
            report.reaped,
            report.skipped,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                lock.acquire(record)
                break
            except LockHeld:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    if lock.previous is not None and not lock.previous.alive():
        log.warning(
            "the previous gateway (pid %d) did not shut down cleanly; resuming its unfinished work",
            lock.previous.pid,
        )
    return lock
