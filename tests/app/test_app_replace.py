"""Stopping a gateway whose parent reaps it late still reaps the gateway's orphans.

A supervisor (a shell, a test harness, an init that is busy) may leave the stopped gateway a
zombie for a while. A zombie's pid and start time still match its record, so the reaper must
not read it as a living parent that keeps its children: here the "gateway" is a real process
this test never reaps until the end, with a real child of its own.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil

from chatgate.app.locks import LockRecord
from chatgate.app.replace import stop_gateway

GATEWAY = (
    "import subprocess, sys, time; "
    "c = subprocess.Popen(['sleep', '600']); open(sys.argv[1], 'w').write(str(c.pid)); "
    "time.sleep(600)"
)


def _wait_for(path: Path) -> int:
    deadline = time.monotonic() + 30
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, "the stand-in gateway never started its child"
        time.sleep(0.01)
    return int(path.read_text())


def test_a_stopped_gateway_left_a_zombie_does_not_spare_its_orphaned_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    gateway = subprocess.Popen([sys.executable, "-c", GATEWAY, str(pid_file)])
    try:
        child = psutil.Process(_wait_for(pid_file))
        proc = psutil.Process(gateway.pid)
        record = LockRecord(gateway.pid, proc.create_time(), [], "test", time.time())
        # Nothing here calls gateway.wait() before stop_gateway returns: the gateway stays a zombie.
        report = stop_gateway(record, timeout=30, child_grace=3.0)
        assert proc.status() == psutil.STATUS_ZOMBIE, "the stand-in was reaped early; the test proves nothing"
        assert report.stopped
        assert report.reaped == [child.pid] and report.skipped == []
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    finally:
        gateway.kill()
        gateway.wait()
