"""Suite-wide pytest hooks."""

from __future__ import annotations

import compileall
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from support.assert_cache import rewrite_test_modules_once
from support.browser import chromium_server, connected_chromium, reused_context
from support.loop_guard import tasks_left_running

# the worker's Chromium, its connection and its reused context, shared by support.browser's fixtures
__all__ = ["chromium_server", "connected_chromium", "reused_context"]

# The suite spends most of its time waiting on gateway subprocesses, sockets and real
# services rather than computing: with one worker per core a 2-core machine ran at about
# half its CPU, and at two per core still about half idle. Three per core fill the waits
# (figures in docs/contributing.md); every test is written to hold under that load (the
# flake hunt runs it with a burner on every core).
WORKERS_PER_CORE = 3


ROOT = Path(__file__).resolve().parent.parent
SOURCES = (ROOT / "src", ROOT / "tools" / "relaysim" / "src")


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile the project's sources once, before any worker starts, as pip does when it
    installs a wheel. The checkout is an editable install, and where ``PYTHONDONTWRITEBYTECODE``
    is set (these machines set it) no import writes a ``.pyc``: every gateway subprocess the
    suite starts would compile each chatgate module again, about 0.13 s of CPU per start.
    Likewise each worker would rewrite every test module's asserts (``support/assert_cache.py``)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # the controller, or a run without xdist
        for tree in SOURCES:
            compileall.compile_dir(tree, quiet=1)
        if getattr(config.option, "numprocesses", None):  # workers gain; one process rewrites as it imports
            rewrite_test_modules_once(ROOT / "tests")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """What ``-n auto`` means for this suite."""
    return WORKERS_PER_CORE * (os.cpu_count() or 1)


def _groups(item: pytest.Item) -> str:
    names = {
        str(m.args[0] if m.args else m.kwargs.get("name", "default"))
        for m in item.iter_markers("xdist_group")
    }
    return "_".join(sorted(names))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep ``--dist loadgroup`` grouping on pytest 9.2: xdist 3.8 marks a test's group by
    appending ``@group`` to its legacy ``_nodeid``, which pytest 9.2's structured node ids no
    longer read (pytest-dev/pytest-xdist#1386), so every ``xdist_group`` was silently ignored and
    the benchmarks, the chaos tests and the PostgreSQL backend tests ran side by side. A no-op
    where xdist's own suffix took effect."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist workers only
        return
    for item in items:
        groups = _groups(item)
        if groups and not item.nodeid.endswith(f"@{groups}"):
            from _pytest.nodeid import NodeId  # pytest >= 9.2 (older pytest took xdist's suffix)

            item._id = NodeId.parse(f"{item.nodeid}@{groups}")


@pytest.fixture(autouse=True)
async def _no_task_left_running() -> AsyncIterator[None]:
    """The worker's one event loop outlives each test: what a test leaves running is cancelled
    after it, and a left task running the project's code fails it (``support/loop_guard.py``)."""
    async with tasks_left_running() as blamed:
        yield
    if blamed:
        pytest.fail(
            f"the test left {len(blamed)} task(s) running, cancelled now: {', '.join(blamed)}."
            " Whatever started them must stop them (a fixture's teardown, a harness's stop)."
        )
