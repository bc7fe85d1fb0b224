"""Run a store rule inside SQLite's writer thread.

A rule written once for both backends (``pairing_rules``, ``approval_rules``, ``task_rules``,
``schedule_rules``) is a coroutine over its backend's statements: on PostgreSQL each statement
awaits asyncpg; on SQLite each is a plain call on the writer's (or a reader's) connection
wrapped in ``async def``, so the rule never really suspends. ``run_inline`` drives such a
coroutine to its end in the calling thread, inside the transaction that thread has open,
with no event loop (the SQLite writer thread has none, and must not block one).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class SuspendedRule(RuntimeError):
    """A rule awaited something that did not complete at once: a SQLite statement must not do I/O
    through the event loop (it runs in the writer thread, inside its transaction)."""


def run_inline(rule: Coroutine[Any, Any, T]) -> T:
    """The rule's result; its exception propagates (the transaction it ran in rolls back)."""
    try:
        rule.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    rule.close()
    raise SuspendedRule(f"{rule!r} suspended; SQLite statements must complete at once")
