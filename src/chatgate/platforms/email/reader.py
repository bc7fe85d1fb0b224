"""The mailbox reader: new mail in UID order, each admitted, then the cursor moves past it.

The cursor is a ``Cursors`` entry holding the mailbox's UIDVALIDITY, the last UID handled
and that mail's INTERNALDATE. It is stored only after every mail up to that UID was admitted
(or recognised as not for the agent), so

- a crash before the cursor is stored reads those mails again, and admission recognises each
  by its delivery id (the Message-ID): answered once;
- a restart reads from the stored UID: mail that arrived while the gateway was down is answered;
- a first start (no cursor) begins with the first mail dated (INTERNALDATE) since a minute
  before the adapter started: the mail already there is old, and is not answered;
- a **UIDVALIDITY change** (the server renumbered the mailbox: a restore, a migration) makes
  the stored UID meaningless. The reader then looks only at mail whose INTERNALDATE is at most
  ``RENUMBER_MARGIN`` before the last one handled, and starts below the first of those: the
  mail handled before keeps its Message-ID, so admission recognises it and it is not answered
  again; a mail without a Message-ID from before that date is skipped.

Between rounds it waits in IDLE (or polls every ``poll_seconds`` where the server has no IDLE
or the config turns it off); IDLE is renewed every ``poll_seconds`` too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from email.utils import format_datetime

import msgspec

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.store_roles import Cursors
from chatgate.platforms.email.imap import Envelope, ImapConnection, ImapError, Selected

log = logging.getLogger(__name__)
CHUNK = 50
"""Mails fetched per round trip (their bodies within ``CHUNK_BYTES``)."""
CHUNK_BYTES = 8_000_000
RENUMBER_MARGIN = 600.0
"""Seconds before the last handled mail's date that a UIDVALIDITY change looks back (clocks of
delivery agents differ; the overlap is recognised by Message-ID)."""
FIRST_START_MARGIN = 60.0
"""A first start also answers mail dated this long before it: INTERNALDATE has whole seconds, and
the server's clock is not ours."""
MAX_BACKOFF = 60.0


class Cursor(msgspec.Struct, frozen=True):
    uidvalidity: int
    uid: int
    at: float
    """INTERNALDATE of mail ``uid`` (or the time of the first start)."""

    def dump(self) -> str:
        return json.dumps({"uidvalidity": self.uidvalidity, "uid": self.uid, "at": self.at})

    @classmethod
    def load(cls, text: str | None) -> Cursor | None:
        if not text:
            return None
        try:
            data = json.loads(text)
            return cls(int(data["uidvalidity"]), int(data["uid"]), float(data["at"]))
        except (ValueError, KeyError, TypeError):
            log.warning("the stored email cursor is unreadable (%r): starting afresh", text[:100])
            return None


class Fetched(msgspec.Struct, frozen=True):
    """One new mail as the handler gets it."""

    envelope: Envelope
    raw: bytes | None
    """The mail, or None when it is over ``max_bytes`` (not downloaded)."""
    uidvalidity: int
    before_renumbering: bool = False
    """Dated before the last mail handled under an older UIDVALIDITY (see the module doc)."""


Handler = Callable[[list[Fetched]], Awaitable[int | None]]
"""Admit a batch; return the lowest UID that must be read again (not committed), or None."""


class ReaderSettings(msgspec.Struct, frozen=True):
    mailbox: str
    cursor_name: str
    max_bytes: int
    idle: bool
    poll_seconds: float


class Reader:
    def __init__(
        self,
        connect: Callable[[], Awaitable[ImapConnection]],
        store: Cursors,
        handle: Handler,
        settings: ReaderSettings,
        on_state: Callable[[bool, str], None],
        after_batch: Callable[[ImapConnection], Awaitable[None]],
    ) -> None:
        self._connect = connect
        self._store = store
        self._handle = handle
        self._settings = settings
        self._on_state = on_state
        self._after_batch = after_batch
        self.cursor: Cursor | None = None
        self._loaded = False
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._conn: ImapConnection | None = None
        self._started_at = time.time()

    def start(self) -> None:
        self._started_at = time.time()
        self._stop.clear()
        self._task = asyncio.create_task(self._run(), name="chatgate-email-reader")

    def stop(self) -> None:
        """Stop reading: an IDLE wait ends at once; a batch being admitted finishes."""
        self._stop.set()

    async def wait_stopped(self, timeout: float) -> None:
        task, self._task = self._task, None
        if task is not None:
            done, _ = await asyncio.wait({task}, timeout=timeout)
            if not done:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._drop_connection()

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    async def _run(self) -> None:
        backoff = 1.0
        while not self._stop.is_set():
            try:
                if self._conn is None:
                    self._conn = await self._connect()
                    self._on_state(True, "connected")
                again = await self._round(self._conn)
                backoff = 1.0
                if not again and not self._stop.is_set():
                    await self._wait(self._conn)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the loop must survive anything a round can throw
                if not isinstance(exc, ImapError | StoreUnavailable):
                    log.exception("email: unexpected failure reading %s", self._settings.mailbox)
                await self._drop_connection()
                self._on_state(False, str(exc))
                log.warning(
                    "email: reading %s failed, retrying in %.0fs: %s", self._settings.mailbox, backoff, exc
                )
                await self._pause(backoff)
                backoff = min(MAX_BACKOFF, backoff * 2)

    async def _wait(self, conn: ImapConnection) -> None:
        if self._settings.idle and conn.idle_capable:
            await conn.idle(self._settings.poll_seconds, self._stop)
        else:
            await self._pause(self._settings.poll_seconds)

    async def _load(self, conn: ImapConnection, selected: Selected) -> Cursor:
        if not self._loaded:
            self.cursor = Cursor.load(await self._store.get_cursor(self._settings.cursor_name))
            self._loaded = True
        if self.cursor is None:
            start = await self._first_dated_since(conn, selected, self._started_at - FIRST_START_MARGIN)
            await self._commit(Cursor(selected.uidvalidity, start, self._started_at))
            log.info(
                "email: first start on %s: answering mail from UID %d on (older mail is not answered)",
                self._settings.mailbox, start + 1,
            )  # fmt: skip
        assert self.cursor is not None
        return self.cursor

    async def _first_dated_since(self, conn: ImapConnection, selected: Selected, since: float) -> int:
        """The UID just below the first mail whose INTERNALDATE is ``since`` or later."""
        # SINCE compares dates in the server's time zone: a day earlier, then the exact filter
        day = format_datetime(datetime.fromtimestamp(since - 86400, UTC)).split(" ")[1:4]
        candidates = await conn.search("SINCE", "-".join(day))
        recent = [e for e in await conn.envelopes(candidates) if e.internaldate >= since]
        return (recent[0].uid - 1) if recent else max(0, selected.uidnext - 1)

    async def _commit(self, cursor: Cursor) -> None:
        await self._store.set_cursor(self._settings.cursor_name, cursor.dump())
        self.cursor = cursor

    async def _renumbered(self, conn: ImapConnection, old: Cursor, selected: Selected) -> Cursor:
        """The cursor under a new UIDVALIDITY: just below the first mail not older than the last one
        handled (less the margin)."""
        since = old.at - RENUMBER_MARGIN
        start = await self._first_dated_since(conn, selected, since)
        log.warning(
            "email: %s was renumbered (UIDVALIDITY %d -> %d): reading from UID %d, mail dated since %s;"
            " what was answered before is recognised by its Message-ID",
            self._settings.mailbox, old.uidvalidity, selected.uidvalidity, start + 1,
            datetime.fromtimestamp(since, UTC).isoformat(timespec="seconds"),
        )  # fmt: skip
        cursor = Cursor(selected.uidvalidity, start, old.at)
        await self._commit(cursor)
        return cursor

    async def _round(self, conn: ImapConnection) -> bool:
        """Read and admit everything new; True when new mail arrived meanwhile (look again)."""
        selected = await conn.select(self._settings.mailbox)
        cursor = await self._load(conn, selected)
        renumbered_at: float | None = None
        if cursor.uidvalidity != selected.uidvalidity:
            renumbered_at = cursor.at
            cursor = await self._renumbered(conn, cursor, selected)
        conn.saw_exists = False
        uids = [u for u in await conn.search("UID", f"{cursor.uid + 1}:*") if u > cursor.uid]
        self._on_state(True, f"reading {self._settings.mailbox}")
        for start in range(0, len(uids), CHUNK):
            if self._stop.is_set():
                return False
            if not await self._batch(conn, uids[start : start + CHUNK], selected, renumbered_at):
                await self._pause(1.0)  # storage trouble: give it a moment, then read again
                return True
        return conn.saw_exists

    async def _batch(
        self, conn: ImapConnection, uids: list[int], selected: Selected, renumbered_at: float | None
    ) -> bool:
        envelopes = await conn.envelopes(uids)
        wanted = [e.uid for e in envelopes if e.size <= self._settings.max_bytes]
        bodies: dict[int, bytes] = {}
        group: list[int] = []
        total = 0
        for uid, size in ((e.uid, e.size) for e in envelopes if e.uid in wanted):
            if group and total + size > CHUNK_BYTES:
                bodies.update(await conn.bodies(group))
                group, total = [], 0
            group.append(uid)
            total += size
        bodies.update(await conn.bodies(group))
        fetched = [
            Fetched(
                e,
                bodies.get(e.uid),
                selected.uidvalidity,
                renumbered_at is not None and e.internaldate < renumbered_at,
            )
            for e in envelopes
            if e.size > self._settings.max_bytes or e.uid in bodies
        ]
        retry_from = await self._handle(fetched) if fetched else None
        done = [e for e in envelopes if retry_from is None or e.uid < retry_from]
        if done:
            last = done[-1]
            await self._commit(Cursor(selected.uidvalidity, last.uid, last.internaldate or time.time()))
            await self._after_batch(conn)
        return retry_from is None
