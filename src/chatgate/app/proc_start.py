"""When a process started, and whether the process of a pid and start time still runs.

A lock record names its owner by pid and start time, so a recycled pid is never taken for
it. psutil answered both, and it cost a gateway about 0.6 MB for its whole life: at every
start it was loaded only to read the gateway's own start time and to look at the pid the
previous gateway's record names. On Linux both come from ``/proc`` here, by psutil's own
formula (``starttime`` of ``/proc/<pid>/stat`` in clock ticks, plus ``btime`` of
``/proc/stat``), so a record written by either reads the same in both; psutil is loaded
elsewhere, and to signal a process (``replace.py``).
"""

from __future__ import annotations

import os
import sys

LINUX = sys.platform.startswith("linux")
SAME_START = 0.01
"""Seconds two readings of one process's start time may differ by (float rounding)."""


def _boot_time() -> float:
    with open("/proc/stat", "rb") as stat:
        for line in stat:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    raise OSError("/proc/stat has no btime line")


def _linux_stat(pid: int | str) -> tuple[float, str] | None:
    """(start time, state letter) of ``pid``; ``None`` when it is gone or cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
        fields = text.rsplit(b")", 1)[1].split()  # after the command name, which may hold anything
        ticks = int(fields[19])  # field 22, ``starttime``; fields[0] is field 3, ``state``
        return ticks / os.sysconf("SC_CLK_TCK") + _boot_time(), fields[0].decode()
    except (OSError, ValueError, IndexError):
        return None


def own_start_time() -> float:
    """This process's start, in seconds since the epoch (psutil's ``create_time``)."""
    if LINUX and (stat := _linux_stat("self")) is not None:
        return stat[0]
    import psutil  # not Linux, or no /proc: psutil knows the other systems

    return float(psutil.Process().create_time())


def runs(pid: int, started: float) -> bool:
    """Whether the process of ``pid`` that started at ``started`` still runs. A zombie does not:
    it has exited and only waits for its parent to collect it."""
    if LINUX:
        stat = _linux_stat(pid)
        return stat is not None and abs(stat[0] - started) <= SAME_START and stat[1] != "Z"
    import psutil  # not Linux: psutil knows the other systems

    try:
        proc = psutil.Process(pid)
        return abs(proc.create_time() - started) <= SAME_START and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
