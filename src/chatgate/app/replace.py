"""Stopping a running gateway: for ``chatgate stop`` and ``chatgate run --replace``.

Only a process verified by pid *and* start time is ever signalled, so a
recycled pid is never hit. Descendants are snapshotted while the gateway is
alive; after it is gone, those left orphaned (their parent died) are reaped.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field

import msgspec
import psutil

from chatgate.app.locks import LockRecord
from chatgate.app.proc_start import runs

log = logging.getLogger(__name__)


@dataclass
class StopReport:
    pid: int
    was_running: bool
    stopped: bool
    forced: bool = False
    seconds: float = 0.0
    reaped: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)


class _Snapshot(msgspec.Struct, frozen=True):
    proc: psutil.Process
    start: float
    parent_pid: int
    parent_start: float | None


def _snapshot(root: psutil.Process) -> list[_Snapshot]:
    found = []
    for child in root.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            parent = child.parent()
            found.append(
                _Snapshot(child, child.create_time(), child.ppid(), parent.create_time() if parent else None)
            )
    return found


def _alive(pid: int, start: float | None) -> bool:
    """The process of this pid and start time runs (a zombie is dead: it only waits to be reaped,
    and a supervisor may reap the stopped gateway late, which must not spare its orphans)."""
    return start is not None and runs(pid, start)


def _wait_gone(record: LockRecord, timeout: float) -> bool:
    """Wait until the process named by pid + start time is gone (a zombie counts as gone)."""
    deadline = time.monotonic() + timeout
    while record.alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _terminate(proc: psutil.Process, grace: float) -> None:
    with contextlib.suppress(psutil.NoSuchProcess):
        proc.terminate()
        try:
            proc.wait(grace)
        except psutil.TimeoutExpired:
            proc.kill()
            with contextlib.suppress(psutil.TimeoutExpired):
                proc.wait(grace)


def stop_gateway(
    record: LockRecord, *, timeout: float = 60.0, force: bool = True, child_grace: float = 3.0
) -> StopReport:
    started = time.monotonic()
    proc = record.process()
    report = StopReport(pid=record.pid, was_running=proc is not None, stopped=proc is None)
    if proc is None:
        return report
    descendants = _snapshot(proc)
    with contextlib.suppress(psutil.NoSuchProcess):
        proc.terminate()
    if not _wait_gone(record, timeout):
        if not force:
            report.seconds = time.monotonic() - started
            return report
        log.warning("gateway pid %d did not stop within %.0fs; killing it", record.pid, timeout)
        report.forced = True
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
        _wait_gone(record, 10.0)
    report.stopped = not record.alive()
    _reap_orphans(descendants, report, child_grace)
    report.seconds = time.monotonic() - started
    return report


def _reap_orphans(descendants: list[_Snapshot], report: StopReport, grace: float) -> None:
    """Terminate descendants whose parent is gone; leave those whose parent still lives."""
    pending = list(descendants)
    progress = True
    while pending and progress:
        progress = False
        for snap in list(pending):
            if not _alive(snap.proc.pid, snap.start):
                pending.remove(snap)
                progress = True
            elif not _alive(snap.parent_pid, snap.parent_start):
                _terminate(snap.proc, grace)
                report.reaped.append(snap.proc.pid)
                pending.remove(snap)
                progress = True
    report.skipped = [snap.proc.pid for snap in pending]
