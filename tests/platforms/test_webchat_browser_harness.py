"""The browser tests' Chromium is stopped whole: its launch server, the node driver under it and
Chromium's own processes. Stopping only the Python launcher left the rest running after every
test session (18 Chromium processes from one two-worker run, dozens by the end of a day)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from support.browser import CHROMIUM, launch_server, stop_group

pytestmark = pytest.mark.browser


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def test_stopping_the_launch_server_ends_every_process_of_its_group(tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing")
    proc, endpoint = launch_server(tmp_path)
    group = os.getpgid(proc.pid)
    assert endpoint.startswith("ws://") and group == proc.pid, "not a process group of its own"
    children = [line for line in os.popen(f"pgrep -g {group}").read().split() if int(line) != proc.pid]
    assert children, "the launcher started no driver: nothing here would test the group"
    stop_group(proc)
    deadline = time.monotonic() + 10
    while _group_alive(group) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _group_alive(group), os.popen(f"ps -o pid,cmd -g {group}").read()
