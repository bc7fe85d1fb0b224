"""The gateway's parts in one ordered list: each is closed once, in the reverse of its start.

``Lifetime.enter`` records a part's close as soon as the part is started, so a start that
fails part-way closes exactly what it had opened (newest first), and a stop is the same
unwinding. One part's failing close is logged and does not keep the others open.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

log = logging.getLogger(__name__)

Close = Callable[[], Awaitable[object]]


class Lifetime:
    def __init__(self) -> None:
        self._stack = AsyncExitStack()
        self.parts: list[str] = []
        """What is open now, in start order (for the log and the tests)."""

    def opened(self, name: str, close: Close) -> None:
        """``name`` is running: ``close`` ends it, after every part started later has ended."""
        self.parts.append(name)
        self._stack.push_async_callback(self._close, name, close)

    async def _close(self, name: str, close: Close) -> None:
        try:
            await close()
        except Exception:
            log.exception("closing %s failed; closing the rest", name)
        finally:
            self.parts.remove(name)

    async def aclose(self) -> None:
        """Close every open part, newest first (idempotent)."""
        await self._stack.aclose()
