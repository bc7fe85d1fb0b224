"""One event loop serves a whole test worker (``asyncio_default_test_loop_scope = "session"``), so
a task a test leaves running would go on running into the next tests. A per-test loop used to
hide that: closing it cancelled whatever was left. ``tasks_left_running`` puts the cancel back,
after each test, and names what was left, so the test that leaked is the one that fails.

Tasks a session-scoped fixture starts on purpose (Playwright's connection to the worker's
Chromium) are registered with ``outlive_tests`` and never counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Set
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OURS = tuple(str(ROOT / part) for part in ("src", "tests", "tools", "bench"))

CANCEL_TIMEOUT = 10.0
"""How long a left task gets to finish its cancellation before the test fails saying so."""

_long_lived: weakref.WeakSet[asyncio.Task[object]] = weakref.WeakSet()


def outlive_tests(before: Set[asyncio.Task[object]]) -> None:
    """Every task started since ``before`` lives as long as the worker (a session fixture's)."""
    _long_lived.update(asyncio.all_tasks() - set(before))


def _name(task: asyncio.Task[object]) -> str:
    coro = task.get_coro()
    return getattr(coro, "__qualname__", None) or repr(coro)


def _ours(task: asyncio.Task[object]) -> bool:
    """Running the project's own code (the gateway's, or a test's): its owner had to cancel it."""
    code = getattr(task.get_coro(), "cr_code", None)
    return code is not None and code.co_filename.startswith(OURS)


async def _left(before: Set[asyncio.Task[object]]) -> list[asyncio.Task[object]]:
    for _ in range(3):  # callbacks that finish a task on the next iterations
        await asyncio.sleep(0)
    current = asyncio.current_task()
    return [
        t
        for t in asyncio.all_tasks() - set(before)
        if t is not current and not t.done() and t not in _long_lived
    ]


@contextlib.asynccontextmanager
async def tasks_left_running() -> AsyncIterator[list[str]]:
    """Around a test: afterwards, cancel (and await) what it left running; the yielded list then
    names the left tasks whose code is the project's own, which a shutdown path should have
    cancelled. A library's task (a fake server's connection handler, a client's reconnect) is
    cancelled without blame: the test that started the library owns it, not the gateway."""
    before = asyncio.all_tasks()
    blamed: list[str] = []
    yield blamed
    left = await _left(before)
    if not left:
        return
    blamed.extend(sorted(_name(t) for t in left if _ours(t)))
    for task in left:
        task.cancel()
    _, stuck = await asyncio.wait(left, timeout=CANCEL_TIMEOUT)
    blamed.extend(f"{_name(t)} (still running {CANCEL_TIMEOUT:g}s after its cancel)" for t in stuck)
