"""Suite-wide pytest hooks."""

from __future__ import annotations

import os

import pytest

# The suite spends most of its time waiting on gateway subprocesses, sockets and real
# services rather than computing: with one worker per core a 2-core machine ran at about
# half its CPU. Two workers per core fill the waits; every test is written to hold under
# that load (the flake hunt runs it with a burner on every core).
WORKERS_PER_CORE = 2


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """What ``-n auto`` means for this suite."""
    return WORKERS_PER_CORE * (os.cpu_count() or 1)
