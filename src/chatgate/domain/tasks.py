"""Task ownership helpers.

A generic asyncio rule, not an engine stage: the engine and the adapters both own
tasks they must stop for sure, so the helper lives where both layers may import it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel tasks and wait until each is really done.

    One ``cancel()`` is not always enough on Python 3.11: ``asyncio.wait_for``
    swallows a cancellation that races with its inner future completing, and a
    ``while True`` loop around it then keeps running. So cancel again until the
    task has finished.
    """
    pending = {t for t in tasks if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.1)
