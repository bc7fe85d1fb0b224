"""/sync long polling with a durable token: admit every event, then store ``next_batch``.

The loop asks ``/sync?since=<token>``, hands the answer to the lane (which admits every
event and says whether all of it is committed), stores ``next_batch`` in the gateway's
store, and only then asks again. So

- an event is never skipped: a crash before the token is stored syncs again from the old
  token, and admission recognizes each event it already holds by its delivery id;
- everything sent while the gateway was down is in the first sync after the restart (a
  room whose gap is longer than ``timeline_limit`` is read back with ``/messages``, up to
  ``max_catch_up_events``), and is answered once;
- a new store (no token) starts with a sync whose timelines are history from before this
  gateway: its invites are handled, its messages are not answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from chatgate.domain.errors import ChatgateError, StoreUnavailable
from chatgate.domain.store_roles import Cursors
from chatgate.platforms.matrix.errors import ApiRefused, RateLimited

log = logging.getLogger(__name__)
MAX_BACKOFF = 30.0
PAGE = 100
Call = Callable[..., Awaitable[dict[str, Any]]]
Admit = Callable[[dict[str, Any], bool], Awaitable[bool]]
"""``admit(rooms, live)``: True when every event of a sync answer's ``rooms`` is committed."""


def sync_filter(timeline_limit: int) -> str:
    """Only what the gateway reads: rooms' timelines and state (members lazily), no presence,
    typing, receipts or account data."""
    return json.dumps({
        "presence": {"types": []},
        "account_data": {"types": []},
        "room": {
            "timeline": {"limit": timeline_limit},
            "state": {"lazy_load_members": True},
            "ephemeral": {"types": []},
            "account_data": {"types": []},
        },
    }, separators=(",", ":"))  # fmt: skip


class SyncRevoked(ChatgateError):
    """The guard refused the next /sync: another process of the fleet may sync now."""


class SyncLoop:
    def __init__(
        self, call: Call, cursors: Cursors, connect: Callable[[], Awaitable[str]], admit: Admit, *,
        timeout: int, timeline_limit: int, max_catch_up: int, on_state: Callable[[bool, str], None],
    ) -> None:  # fmt: skip
        self._call, self._cursors, self._connect, self._admit = call, cursors, connect, admit
        self.cursor_name = ""
        """Known once ``connect`` (the sign-in) has named the account."""
        self._timeout, self._limit, self._max_catch_up = timeout, timeline_limit, max_catch_up
        self._on_state = on_state
        self.token: str | None = None
        self._loaded = False
        self._stopping = False
        self._stop_event = asyncio.Event()
        self._fetching = False
        self._task: asyncio.Task[None] | None = None
        self.syncs = 0
        self.guard: Callable[[], Awaitable[bool]] | None = None
        """Asked before every /sync (a fleet's lock): False stops the loop instead."""

    def start(self) -> None:
        self.token = None  # read from the store again: another process of the fleet may have moved it
        self._loaded = False
        self._stopping = False
        self._stop_event.clear()
        self._task = asyncio.create_task(self._run(), name="chatgate-matrix-sync")

    def stop(self) -> None:
        """Stop asking: a long poll in flight is abandoned (nothing in it was admitted)."""
        self._stopping = True
        self._stop_event.set()
        if self._task is not None and self._fetching:
            self._task.cancel()

    async def wait_stopped(self, timeout: float) -> None:
        """Let the batch being admitted finish (then its token is stored), within ``timeout``."""
        task, self._task = self._task, None
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop_event.wait(), seconds)

    async def _run(self) -> None:
        backoff = 1.0
        while not self._stopping:
            try:
                if not self._loaded:  # inside the loop: a homeserver or store down at start is asked again
                    self.cursor_name = await self._connect()
                    self.token = await self._cursors.get_cursor(self.cursor_name)
                    self._loaded = True
                await self._once()
                backoff = 1.0
            except asyncio.CancelledError:
                if self._stopping:
                    return
                raise
            except SyncRevoked:
                log.warning("Matrix sync stopped: this process no longer holds the account's fleet lock")
                self._stopping = True
                return
            except RateLimited as exc:
                self._on_state(True, f"/sync rate limited: waiting {exc.retry_after:.1f}s")
                await self._pause(exc.retry_after)
            except Exception as exc:  # the loop must survive anything a sync can throw
                reason = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, ApiRefused) and exc.status == 401:
                    reason = f"the access token was refused ({reason}); check platforms.matrix"
                    backoff = max(backoff, MAX_BACKOFF)
                self._on_state(False, reason)
                log.warning("Matrix sync failed, retrying in %.0fs: %s", backoff, reason)
                await self._pause(backoff)
                backoff = min(MAX_BACKOFF, backoff * 2)

    async def _sync(self) -> dict[str, Any]:
        from chatgate.platforms.matrix.api import path  # aiohttp: loaded once the adapter starts

        live = self.token is not None
        query = {
            "filter": sync_filter(self._limit if live else 1),
            "timeout": str(self._timeout * 1000 if live else 0),
        }
        if self.token:
            query["since"] = self.token
        self._fetching = True
        try:
            if self.guard is not None and not await self.guard():
                raise SyncRevoked()
            return await self._call("GET", path("sync"), query=query, timeout=self._timeout + 30)
        finally:
            self._fetching = False

    async def _once(self) -> None:
        answer = await self._sync()
        self.syncs += 1
        self._on_state(True, "syncing")
        following = answer.get("next_batch")
        if self._stopping or not isinstance(following, str):
            return
        live = self.token is not None
        found = answer.get("rooms")
        rooms: dict[str, Any] = found if isinstance(found, dict) else {}
        if live:
            await self._fill_gaps(rooms)
        if not await self._admit(rooms, live):
            await self._pause(1.0)  # storage trouble: give it a moment, then the same token again
            return
        self.token = following
        try:
            await self._cursors.set_cursor(self.cursor_name, following)
        except StoreUnavailable as exc:
            # Safe to go on: everything before this token is committed in the inbox, so a restart
            # from an older stored token only syncs again what admission deduplicates.
            log.warning("could not store the Matrix sync token: %s", exc)

    async def _fill_gaps(self, rooms: dict[str, Any]) -> None:
        """A room whose timeline is ``limited`` missed events between our token and the answer:
        read them back (oldest first) and put them before the timeline."""
        joined = rooms.get("join")
        for room_id, room in (joined if isinstance(joined, dict) else {}).items():
            timeline = room.get("timeline") if isinstance(room, dict) else None
            if (
                not isinstance(timeline, dict)
                or not timeline.get("limited")
                or not timeline.get("prev_batch")
            ):
                continue
            missed = await self._read_back(str(room_id), str(timeline["prev_batch"]))
            if missed:
                log.info("Matrix room %s: read back %d events the sync answer left out", room_id, len(missed))
            events = timeline.get("events")
            timeline["events"] = missed + (events if isinstance(events, list) else [])

    async def _read_back(self, room_id: str, start: str) -> list[dict[str, Any]]:
        from chatgate.platforms.matrix.api import path  # (idem)

        found: list[dict[str, Any]] = []
        cursor: str | None = start
        while cursor and len(found) < self._max_catch_up:
            query = {"dir": "b", "from": cursor, "limit": str(PAGE)}
            if self.token:
                query["to"] = self.token
            # A failure raises: the token is not stored, and the next sync reads the gap again.
            page = await self._call("GET", path("rooms", room_id, "messages"), query=query)
            chunk = page.get("chunk")
            events = [e for e in chunk if isinstance(e, dict)] if isinstance(chunk, list) else []
            found.extend(events)
            following = page.get("end")
            cursor = following if isinstance(following, str) and events and following != cursor else None
        if len(found) >= self._max_catch_up:
            log.warning("Matrix room %s: only the last %d missed events are read back (max_catch_up_events)",
                        room_id, self._max_catch_up)  # fmt: skip
        found.reverse()
        return found[-self._max_catch_up :] if self._max_catch_up else []
