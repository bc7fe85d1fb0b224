"""Long polling with a durable offset: commit every update, then advance.

The loop calls ``getUpdates(offset, timeout)`` itself, hands each batch to
``handle`` (which admits every update and says which ones must be fetched
again), stores the next offset in the
gateway's store, and only then asks for more: the next ``getUpdates`` with the
higher offset is what confirms the batch to Telegram. So

- an update is confirmed upstream only after its admission committed;
- a crash before the cursor is stored refetches the batch, and admission
  recognizes each redelivered update by its delivery id (``<bot id>:<update id>``);
- a restart resumes from the stored offset; a cold start (no offset stored)
  takes every update Telegram still holds, unless ``drop_pending_updates``.

The offset is stored at most once a ``CURSOR_EVERY`` seconds (and when a poll comes back
empty, which a shortened long poll makes happen about that soon, and at stop): a busy bot
otherwise paid a store write per batch. A stored offset that lags is harmless: Telegram
forgets what the next ``getUpdates`` confirmed, and returns only what is still unconfirmed
to a poll from an older offset, which admission deduplicates.

An update that cannot be decoded, or whose type is unsupported, is logged and
skipped; its id still advances the offset so it is not fetched forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from chatgate.domain.errors import ChatgateError, MaybeSent, StoreUnavailable
from chatgate.domain.store_roles import Cursors
from chatgate.platforms.telegram.errors import ApiRefused, Call
from chatgate.platforms.telegram.models import Update, parse_update

log = logging.getLogger(__name__)
MAX_BACKOFF = 30.0
CURSOR_EVERY = 1
"""Seconds between two stores of the offset while updates keep coming (and the long poll's
timeout while one waits to be stored: getUpdates takes whole seconds)."""
REQUEST_TIMEOUT = 20


class Raw(msgspec.Struct, frozen=True):
    """One entry of a getUpdates answer: decoded, or the reason it could not be."""

    update_id: int
    update: Update | None
    error: str | None = None


Handler = Callable[[list[Raw]], Awaitable[int | None]]
"""Admit a batch; return the lowest update id that must be fetched again, or ``None``."""


def split_raw(result: Any) -> list[Raw]:
    """A getUpdates result, update by update: one malformed update does not hide the others."""
    if not isinstance(result, list):
        return []
    items = []
    for entry in result:
        update_id = entry.get("update_id") if isinstance(entry, dict) else None
        if not isinstance(update_id, int) or isinstance(update_id, bool):
            log.warning("skipping a Telegram update without an update_id")
            continue
        try:
            items.append(Raw(update_id, parse_update(entry)))
        except msgspec.ValidationError as exc:
            items.append(Raw(update_id, None, f"malformed update ({str(exc)[:200]})"))
    return items


class PollingRevoked(ChatgateError):
    """The guard refused the next getUpdates: another process of the fleet may poll now."""


class Poller:
    def __init__(
        self,
        call: Call,
        store: Cursors,
        cursor_name: str,
        handle: Handler,
        *,
        poll_timeout: int,
        allowed_updates: list[str],
        drop_pending: bool,
        on_connect: Callable[[], Awaitable[None]],
        on_state: Callable[[bool, str], None],
        redact: Callable[[str], str],
    ) -> None:
        self._call = call
        self._store = store
        self.cursor_name = cursor_name
        self._handle = handle
        self._timeout = poll_timeout
        self._allowed = allowed_updates
        self._drop_pending = drop_pending
        self._on_connect = on_connect
        self._on_state = on_state
        self._redact = redact
        self.offset: int | None = None
        self._loaded = False
        self._dropped = False
        self.guard: Callable[[], Awaitable[bool]] | None = None
        """Asked before every getUpdates (a fleet's lock): False stops the loop instead."""
        self._stopping = False
        self._stop_event = asyncio.Event()
        self._fetching = False
        self._task: asyncio.Task[None] | None = None
        self._stored_at = float("-inf")
        self._stored: int | None = None
        """The offset last stored (None: none by this poller yet)."""

    def skip_drop(self) -> None:
        """Never drop pending updates: this poller starts after the gateway's start-up (a fleet
        standby taking over), and what Telegram holds arrived while the fleet ran."""
        self._dropped = True

    def start(self) -> None:
        self._loaded = False  # another process of the fleet may have moved the offset meanwhile
        self._stopping = False
        self._stop_event.clear()
        self._task = asyncio.create_task(self._run(), name="chatgate-telegram-poll")

    def stop(self) -> None:
        """Stop asking for updates: a long poll in flight is abandoned (nothing in it was confirmed)."""
        self._stopping = True
        self._stop_event.set()
        if self._task is not None and self._fetching:
            self._task.cancel()

    async def wait_stopped(self, timeout: float) -> None:
        """Let the batch being admitted finish (then its offset is stored), within ``timeout``."""
        task, self._task = self._task, None
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        if done:
            await self._store_offset(at_once=True)

    async def _store_offset(self, at_once: bool) -> None:
        """Store the offset if it moved, unless one was stored less than ``CURSOR_EVERY`` ago."""
        offset = self.offset
        if offset is None or offset == self._stored:
            return
        now = time.monotonic()
        if not at_once and now - self._stored_at < CURSOR_EVERY:
            return
        try:
            await self._store.set_cursor(self.cursor_name, str(offset))
        except StoreUnavailable as exc:
            # Safe to go on: every update below the offset is committed in the inbox, so a
            # restart from an older stored offset only refetches what admission deduplicates.
            log.warning("could not store the Telegram offset %d: %s", offset, exc)
            return
        self._stored, self._stored_at = offset, now

    async def _pause(self, seconds: float) -> None:
        """Sleep, but wake up at once when stopped."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop_event.wait(), seconds)

    async def _run(self) -> None:
        backoff = 1.0
        connected = False
        while not self._stopping:
            try:
                if not connected:
                    await self._connect()
                    connected = True
                await self._poll_once()
                backoff = 1.0
            except asyncio.CancelledError:
                if self._stopping:
                    return
                raise
            except PollingRevoked:
                log.warning("telegram polling stopped: this process no longer holds the bot's fleet lock")
                self._stopping = True
                return
            except ApiRefused as exc:
                if exc.code != 429:
                    await self._failed(exc, backoff)
                    backoff = min(MAX_BACKOFF, backoff * 2)
                    continue
                wait = exc.retry_after if exc.retry_after is not None else backoff
                self._on_state(True, f"getUpdates flood control: waiting {wait:.0f}s")
                await self._pause(wait)
            except Exception as exc:  # the loop must survive anything a poll can throw
                await self._failed(exc, backoff)
                backoff = min(MAX_BACKOFF, backoff * 2)

    async def _failed(self, exc: Exception, backoff: float) -> None:
        reason = self._redact(f"{type(exc).__name__}: {exc}")
        code = exc.code if isinstance(exc, ApiRefused) else None
        if code in (401, 404):  # an unknown token is a 401; a wrong api_base or a mangled token a 404
            reason = f"the bot token was refused ({reason}); check platforms.telegram.token_env and api_base"
            backoff = max(backoff, MAX_BACKOFF)
        elif code == 409:
            reason = f"another client is polling this bot or a webhook is set ({reason})"
        self._on_state(False, reason)
        log.warning("telegram polling failed, retrying in %.0fs: %s", backoff, reason)
        await self._pause(backoff)

    async def _connect(self) -> None:
        """getMe (and the caller's start-up calls), the stored offset, and the optional drop."""
        self._fetching = True
        try:
            await self._on_connect()
        finally:
            self._fetching = False
        if not self._loaded:
            stored = await self._store.get_cursor(self.cursor_name)
            self.offset = self._stored = int(stored) if stored else None
            if self._drop_pending and not self._dropped:
                await self._drop()
            self._dropped = self._loaded = True

    async def _may_poll(self) -> None:
        """Raise ``PollingRevoked`` unless the guard allows a getUpdates now (inside ``_fetching``:
        a stop during the check cancels it)."""
        if self.guard is not None and not await self.guard():
            raise PollingRevoked()

    async def _drop(self) -> None:
        self._fetching = True
        try:
            await self._may_poll()
            last = split_raw(
                await self._call(
                    "getUpdates", REQUEST_TIMEOUT, offset=-1, timeout=0, allowed_updates=self._allowed
                )
            )
        finally:
            self._fetching = False
        if last:
            self.offset = max(u.update_id for u in last) + 1
            await self._store.set_cursor(self.cursor_name, str(self.offset))
            self._stored = self.offset
            log.info("dropped pending Telegram updates (platforms.telegram.drop_pending_updates)")

    async def _fetch(self) -> list[Raw]:
        self._fetching = True
        try:
            await self._may_poll()
            # An offset not stored yet shortens the long poll, so a quiet moment stores it soon.
            wait = self._timeout if self.offset == self._stored else min(self._timeout, CURSOR_EVERY)
            result = await self._call(
                "getUpdates",
                wait + 15,
                offset=self.offset,
                timeout=wait,
                allowed_updates=self._allowed,
            )
        finally:
            self._fetching = False
        if not isinstance(result, list):
            kind = type(result).__name__
            raise MaybeSent(f"getUpdates: unreadable answer from Telegram (a {kind}, not a list)")
        return split_raw(result)

    async def _poll_once(self) -> None:
        items = await self._fetch()
        self._on_state(True, "polling")
        if self._stopping or not items:
            await self._store_offset(at_once=True)  # a quiet moment: store what is left
            return
        items.sort(key=lambda r: r.update_id)
        retry_from = await self._handle(items)
        following = retry_from if retry_from is not None else items[-1].update_id + 1
        if self.offset is None or following > self.offset:
            self.offset = following
            await self._store_offset(at_once=False)
        if retry_from is not None:
            await self._pause(1.0)  # storage trouble: give it a moment before fetching again
