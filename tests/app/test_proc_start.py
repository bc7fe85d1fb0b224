"""A process's start time read from /proc is psutil's, so lock records read the same either way.

Real processes: this one, a child that runs, and a child that exited but is not yet collected
(a zombie). psutil is the reference here, as it is what older records were written with.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from chatgate.app import proc_start
from chatgate.app.locks import LockRecord

pytestmark = pytest.mark.skipif(not proc_start.LINUX, reason="the /proc reading is Linux's")


def test_own_start_time_is_psutils() -> None:
    assert abs(proc_start.own_start_time() - psutil.Process().create_time()) <= proc_start.SAME_START


def test_a_running_child_runs_and_a_wrong_start_time_is_another_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = psutil.Process(child.pid).create_time()
        assert proc_start.runs(child.pid, started)
        assert not proc_start.runs(child.pid, started - 5), "a recycled pid must not pass for its old owner"
    finally:
        child.kill()
        child.wait()
    assert not proc_start.runs(child.pid, started), "a collected child is gone"


def test_a_zombie_does_not_run() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = psutil.Process(child.pid).create_time()
    deadline = time.monotonic() + 30
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:  # exited, not yet collected
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    try:
        assert not proc_start.runs(child.pid, started)
    finally:
        child.wait()


def test_a_record_of_this_process_names_it_alive() -> None:
    record = LockRecord.for_this_process()
    assert record.pid == os.getpid() and record.alive()
    assert record.process() is not None
    assert not LockRecord(record.pid, record.start_time - 5, [], "x", 0.0).alive()
