"""Per-key queues: work for different keys runs concurrently, for one key in arrival order.

An adapter that reads one stream of deliveries (a relay socket, a batch of Telegram
updates) hands each to ``put`` under its chat's key, or to ``try_put`` from a callback that
cannot wait. Deliveries of different chats are then admitted concurrently, so their commits
share one group commit, while one chat's (hence one session's) deliveries are admitted
exactly in the order they arrived. At most ``max_pending`` works are queued or running: a
``put`` beyond that waits its turn, a ``try_put`` queues nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

Work = Callable[[], Awaitable[None]]


class PerKeyQueues:
    def __init__(self, max_pending: int = 1024, name: str = "lane") -> None:
        self._queues: dict[str, deque[Work]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._room = max_pending
        self._waiting: deque[tuple[str, Work, asyncio.Future[None]]] = deque()
        """Work that found no room, in arrival order: it is queued as room frees, before any newer."""
        self._name = name
        self._idle = asyncio.Event()
        self._idle.set()

    async def put(self, key: str, work: Work) -> None:
        """Queue ``work`` behind the key's earlier work; waits while ``max_pending`` are queued."""
        if self._take_room(key, work):
            return
        queued = asyncio.get_running_loop().create_future()
        entry = (key, work, queued)
        self._waiting.append(entry)
        try:
            await queued
        except asyncio.CancelledError:
            if queued.cancelled() and entry in self._waiting:  # never queued: it goes with the put
                self._waiting.remove(entry)
            raise

    def try_put(self, key: str, work: Work) -> bool:
        """``put`` for a caller that cannot wait (a client library's synchronous callback): with no
        room it queues nothing and says so, and the caller decides what becomes of the work."""
        return self._take_room(key, work)

    def _take_room(self, key: str, work: Work) -> bool:
        """Queue ``work`` now if there is room and no older work waits for it."""
        if self._room <= 0 or self._waiting:
            return False
        self._room -= 1
        self._enqueue(key, work)
        return True

    def _enqueue(self, key: str, work: Work) -> None:
        queue = self._queues.get(key)
        if queue is not None:
            queue.append(work)
            return
        self._queues[key] = deque([work])
        self._idle.clear()
        task = asyncio.create_task(self._drain(key), name=f"{self._name}:{key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _release(self) -> None:
        """A work is done: its room goes to the oldest waiting work, if any."""
        while self._waiting:
            key, work, queued = self._waiting.popleft()
            if queued.cancelled():
                continue  # its put was cancelled while it waited
            self._enqueue(key, work)
            queued.set_result(None)
            return
        self._room += 1

    async def _drain(self, key: str) -> None:
        queue = self._queues[key]
        try:
            while queue:
                work = queue[0]
                try:
                    await work()
                except asyncio.CancelledError:
                    task = asyncio.current_task()
                    if task is None or task.cancelling():
                        raise  # this queue is being closed
                    # A cancellation from inside the work (a future it awaited was cancelled): its
                    # room must come back, or a lane fed by ``try_put`` would stay full for good.
                    log.error("%s %s: work was cancelled from inside; the next one goes on", self._name, key)
                except Exception:
                    log.exception("%s %s: work failed", self._name, key)  # the work owns its errors
                queue.popleft()
                self._release()
        finally:
            self._queues.pop(key, None)
            if not self._queues:
                self._idle.set()

    @property
    def pending(self) -> int:
        return sum(len(q) for q in self._queues.values()) + len(self._waiting)

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def aclose(self) -> None:
        """Cancel what is queued or running (it was never acknowledged) and wait for it."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._queues.clear()
        for _, _, queued in self._waiting:
            if not queued.done():
                queued.cancel()
        self._waiting.clear()
        self._idle.set()
