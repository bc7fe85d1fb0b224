"""The outbox delivery worker: at-least-once to the adapter, which confirms.

Rows are claimed head-of-chat only (the store never hands out a row while an
earlier one of the same chat is still open), so each chat's messages arrive in
order while different chats are delivered concurrently.

Rows reach the worker two ways: its own claims (``claim_outbox``), and the rows a
turn's commit claimed in its own transaction (``Leases.commit_turn``), which the
scheduler hands over (``reserve`` before the commit, ``hand_over`` after it) so
that a reply needs no claim commit of its own. Both are delivered alike.

A row whose rate slot is near books it and waits for it in its own task (a claimed row holds
its chat's order anyway); one whose slot is further (``horizon``) goes back to ``pending`` and
a timer stands at the time it falls due (``engine/due_rows.py``), never a poll (issue 33).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Sequence

import msgspec

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.outbound import (
    PREVIEW_KEY,
    Ambiguous,
    Deferred,
    Delivered,
    DeliveryResult,
    Rejected,
    RetryLater,
)
from chatgate.domain.outbox import OutboxRow, OutboxSettlement
from chatgate.domain.outfiles import OutFile
from chatgate.domain.store_roles import OutboxClaims
from chatgate.domain.tasks import cancel_and_wait
from chatgate.engine.due_rows import DueRows
from chatgate.engine.file_sends import BlobReader, send_file
from chatgate.engine.metrics import GatewayMetrics
from chatgate.engine.ports import Adapter, editable
from chatgate.engine.ratelimit import RateBudget
from chatgate.engine.typing_indicators import TypingIndicators

log = logging.getLogger(__name__)


MAX_TYPED_ROWS = 10_000


class DeliverySettings(msgspec.Struct, frozen=True):
    batch: int = 256
    send_timeout: float = 30.0
    max_attempts: int = 8
    retry_base: float = 1.0
    retry_max: float = 300.0
    unknown_platform_retry: float = 60.0
    max_age: float = 24 * 3600.0
    """Rows older than this are abandoned (logged, failed) instead of delivered late."""
    max_inline_wait: float = 10.0
    """A rate-limit wait up to this long happens in the row's task; longer ones reschedule the row.
    On a platform with a rate, the horizon is shorter still: the slots of half a ``batch``
    (``horizon``), so one busy platform never holds the whole worker."""
    poll_interval: float = 1.0
    """Only a fallback: rows this worker put back wake it by a timer at their due time."""
    typing_after: float = 0.5
    """A final that must wait longer than this for its rate slot shows a typing indicator first."""


class DeliveryWorker:
    """Claims due rows and delivers each in a task of its own.

    A slow or hung send holds up only its own chat (the store never hands out a
    chat's next row while one is being sent); every other chat keeps flowing.
    """

    def __init__(
        self,
        store: OutboxClaims,
        adapters: dict[str, Adapter],
        metrics: GatewayMetrics,
        settings: DeliverySettings = DeliverySettings(),
        budget: RateBudget | None = None,
        typist: TypingIndicators | None = None,
        blobs: BlobReader | None = None,
        duplicate_marker: str = "",
    ) -> None:
        self._store = store
        self._blobs = blobs
        """Where a file row's bytes are read (the store's media role); None: files are refused."""
        self._duplicate_marker = duplicate_marker
        self._budget = budget or RateBudget()
        self._typist = typist
        self._typed: OrderedDict[int, None] = OrderedDict()
        """Rows that announced their wait already (a rescheduled row must not book another)."""
        self._last_sent: OrderedDict[tuple[str, str], float] = OrderedDict()
        """When each chat last got a message from this worker (wall clock), most recent last."""
        self._adapters = adapters
        self._metrics = metrics
        self.settings = settings
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._inflight: set[asyncio.Task[None]] = set()
        self._reserved = 0
        """Room promised to turn commits that may hand rows over (``reserve``)."""
        self._stopping = False
        self._due = DueRows(self._wake.set)
        self._pacing: dict[int, OutboxRow] = {}
        """Rows whose task waits for their rate slot: not handed to the adapter yet."""
        self._backlog = True
        """Due rows may be left unclaimed for want of room: a settlement then claims again."""

    def start(self) -> None:
        self._stopping = False
        self._task = asyncio.create_task(self._loop(), name="chatgate-delivery")

    def wake(self) -> None:
        self._wake.set()

    def reserve(self, wanted: int) -> int:
        """Promise room for up to ``wanted`` rows a turn's commit is about to claim; returns how
        many (0 when the worker is full or stopping). The worker's own claims leave that room
        free until the commit's ``hand_over``, so a row claimed in the commit always has a task."""
        if self._stopping or wanted <= 0:
            return 0
        room = self.settings.batch - len(self._inflight) - self._reserved
        granted = max(0, min(wanted, room))
        self._reserved += granted
        return granted

    def hand_over(self, reserved: int, rows: Sequence[OutboxRow]) -> None:
        """The commit that ``reserve``d ``reserved`` is over: deliver the ``rows`` it claimed (at
        most ``reserved``; none if it failed), as if this worker had claimed them."""
        self._reserved = max(0, self._reserved - reserved)
        if self._stopping:
            if rows:  # stop() cancels sends anyway: these are resent after a restart, like theirs
                log.info("delivery stopping; %d claimed row(s) are resent after a restart", len(rows))
            return
        for row in rows:
            self._start(row)

    async def stop(self) -> None:
        """Stop claiming and cancel in-flight sends (their rows are resent after a restart)."""
        self._stopping = True
        self._due.cancel()
        unsent = list(self._pacing.values())  # cancelled before their send: nothing went
        tasks = [*self._inflight, *([self._task] if self._task else [])]
        await cancel_and_wait(tasks)
        self._task = None
        await self._put_back_unsent(unsent)

    async def _put_back_unsent(self, rows: list[OutboxRow]) -> None:
        """Rows cancelled while waiting for their slot go back to ``pending`` (attempt given
        back): left ``sending``, a restart would resend them flagged as possible repeats."""
        if not rows:
            return
        back = [
            OutboxSettlement(r.id, "pending", error="stopped before its rate slot", counts_attempt=False)
            for r in rows
        ]
        try:
            await asyncio.wait_for(self._store.settle_outbox(back), 5.0)
        except (TimeoutError, StoreUnavailable) as exc:
            log.warning("%d unsent row(s) stay claimed (%s); resent after a restart", len(rows), exc)

    async def flush(self, timeout: float) -> None:
        """Deliver what is due now, for at most ``timeout`` seconds (used at shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._inflight:
                await asyncio.wait(set(self._inflight), timeout=max(0.0, deadline - time.monotonic()))
                continue
            try:
                claimed = await asyncio.wait_for(self._claim(), max(0.01, deadline - time.monotonic()))
            except (TimeoutError, StoreUnavailable):
                return
            if claimed == 0 and not self._inflight:  # the loop may have claimed what we did not
                return

    async def _loop(self) -> None:
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.poll_interval):
                    await self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            try:
                if await self._claim():
                    self._wake.set()
            except StoreUnavailable as exc:
                log.warning("delivery paused: %s", exc)

    async def _claim(self) -> int:
        room = self.settings.batch - len(self._inflight) - self._reserved
        if room <= 0:
            self._backlog = True
            return 0  # a settlement wakes the worker again; the due timer waits for that
        started = time.time()
        rows = await self._store.claim_outbox(room)
        self._backlog = len(rows) >= room
        self._due.claimed(started)
        for row in rows:
            self._start(row)
        return len(rows)

    def _start(self, row: OutboxRow) -> None:
        task = asyncio.create_task(self._deliver_and_settle(row), name=f"chatgate-deliver:{row.id}")
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _deliver_and_settle(self, row: OutboxRow) -> None:
        settlement = await self._deliver(row)
        more = True
        try:
            more = await self._store.settle_outbox([settlement])
        except StoreUnavailable as exc:
            log.warning(
                "could not record delivery of outbox row %d (%s); it is recorded once the store writes"
                " again (on PostgreSQL: sent again, marked as a possible duplicate)", row.id, exc,
            )  # fmt: skip
        if more or self._backlog:
            self._wake.set()  # the chat's next row may be due now, or room for a row left waiting
        if settlement.status in ("pending", "ambiguous") and settlement.retry_at is not None:
            self._due.add(settlement.retry_at)  # a timer at its due time, whatever the wait

    def _retry_at(self, row: OutboxRow) -> float:
        delay = min(self.settings.retry_max, self.settings.retry_base * 2 ** max(0, row.attempts - 1))
        return float(time.time() + delay * (0.5 + random.random() / 2))

    async def _deliver(self, row: OutboxRow) -> OutboxSettlement:
        age = time.time() - row.created_at
        adapter = self._adapters.get(row.platform)
        # A client that confirms receipt pulls what it missed when it comes back: never too late.
        pulls = adapter is not None and adapter.capabilities.confirms_receipt
        if age > self.settings.max_age and not pulls:
            log.warning(
                "outbox row %d is %.0fs old (limit %.0fs); abandoned instead of delivered late",
                row.id, age, self.settings.max_age, extra={"session_key": row.session_key},
            )  # fmt: skip
            self._metrics.deliveries.labels(row.platform, "expired").inc()
            return OutboxSettlement(row.id, "failed", error=f"expired after {age:.0f}s")
        if adapter is None:
            log.warning("no adapter for platform %r; outbox row %d waits", row.platform, row.id)
            self._metrics.deliveries.labels(row.platform, "no_adapter").inc()
            return OutboxSettlement(
                row.id,
                "pending",
                retry_at=time.time() + self.settings.unknown_platform_retry,
                error=f"platform {row.platform!r} is not enabled",
                counts_attempt=False,
            )
        waited = await self._pace(row)
        if waited is not None:
            return waited
        file = OutFile.from_target(row.target, row.text)
        try:
            blobs, marker = self._blobs, self._duplicate_marker
            send = send_file(adapter, row, file, blobs, marker) if file is not None else adapter.deliver(row)
            # An upload gets a second per MB on top of a send's timeout.
            timeout = self.settings.send_timeout + (file.size / 1_000_000 if file is not None else 0.0)
            async with asyncio.timeout(timeout):  # wait_for would run the send in a task of its own
                result = await send
        except TimeoutError:
            result = Ambiguous(f"no answer within {timeout:.0f}s")
        except Exception as exc:  # an adapter bug or transport error must not stop delivery
            result = RetryLater(f"{type(exc).__name__}: {exc}", 0.0)
        return self._settle(row, result)

    async def _pace(self, row: OutboxRow) -> OutboxSettlement | None:
        """Book the row's slot and wait for it; a settlement when it must wait longer instead.

        The slot is booked in the same step that finds it, so rows claimed together get
        successive slots rather than one shared wait (``engine/ratelimit.py``).
        """
        ahead = self._budget.delay(row.platform, row.chat_id)
        if ahead > self.settings.typing_after:
            self._announce_wait(row, ahead)
        if ahead > self.horizon(row.platform):
            return self._rate_limited(row, ahead, "rate limited")
        wait = self._budget.take(row.platform, row.chat_id)
        self._pacing[row.id] = row
        try:
            while wait > 0:  # only this row's task waits; other chats keep going
                await asyncio.sleep(wait)
                wait = self._budget.depart(row.platform)
        finally:
            del self._pacing[row.id]
        held = self._budget.held(row.platform, row.chat_id)
        if held > 0:  # the platform asked for a pause while this row waited for its slot
            return self._rate_limited(row, held, "rate limited by the platform")
        return None

    def _announce_wait(self, row: OutboxRow, ahead: float) -> None:
        """A reply that must wait for its rate slot shows typing meanwhile, in an earlier free slot
        (its turn was too quick to show any: ``StreamConsumer`` types only after a delay)."""
        adapter = self._adapters.get(row.platform)
        if self._typist is None or adapter is None or row.kind != "final" or row.target.get(PREVIEW_KEY):
            return  # no typist, or a preview already shows this reply coming
        if row.id in self._typed:
            return
        if self._last_sent.get((row.platform, row.chat_id), float("-inf")) >= row.created_at:
            # The chat got a message after this reply was ready: it is not silent. At saturation
            # every reply waits, and an indicator before each took half the budget (issue 33).
            return
        self._typed[row.id] = None
        if len(self._typed) > MAX_TYPED_ROWS:
            self._typed.popitem(last=False)
        platform = editable(adapter)
        if platform is None or not adapter.capabilities.typing:
            return
        target = {k: str(v) for k, v in row.target.items()}
        # Only an indicator that shows at least ``typing_after`` before the reply is worth a call:
        # one that would go with it (the window is full until then) only spends the reply's room.
        patience = ahead - self.settings.typing_after
        self._typist.announce(platform, row.platform, row.chat_id, target, patience=patience)

    def horizon(self, platform: str) -> float:
        """How far ahead a row may book its slot and wait in its task: ``max_inline_wait``, and
        on a platform with a rate no further than half a ``batch`` of its slots (Telegram's
        30/s: 4.3 s), so its waiting rows leave the other half of the worker to other platforms."""
        rate = self._budget.limits(platform).max_rate
        share = self.settings.batch / 2 / rate if rate else self.settings.max_inline_wait
        return min(self.settings.max_inline_wait, share)

    def _rate_limited(self, row: OutboxRow, wait: float, reason: str) -> OutboxSettlement:
        """Back to ``pending`` until its slot is within the ``horizon`` again (due half a horizon
        before the wait is over, so it books while the slots ahead are still taken: no idle gap);
        waiting for a rate limit is not an attempt."""
        self._metrics.deliveries.labels(row.platform, "rate_limited").inc()
        early = min(wait, self.horizon(row.platform) / 2)
        return OutboxSettlement(
            row.id, "pending", retry_at=time.time() + wait - early, error=reason, counts_attempt=False
        )

    def _sent_to(self, row: OutboxRow) -> None:
        key = (row.platform, row.chat_id)
        self._last_sent[key] = time.time()
        self._last_sent.move_to_end(key)
        if len(self._last_sent) > MAX_TYPED_ROWS:
            self._last_sent.popitem(last=False)

    def _settle(self, row: OutboxRow, result: DeliveryResult) -> OutboxSettlement:
        if isinstance(result, Delivered):
            self._sent_to(row)
            self._metrics.deliveries.labels(row.platform, "sent").inc()
            self._metrics.delivery_seconds.labels(row.platform, row.kind).observe(
                max(0.0, time.time() - row.created_at)
            )
            return OutboxSettlement(row.id, "sent", platform_message_id=result.platform_message_id)
        if isinstance(result, Deferred):
            self._metrics.deliveries.labels(row.platform, "deferred").inc()
            return OutboxSettlement(
                row.id,
                "pending",
                retry_at=time.time() + result.retry_in,
                error=result.reason,
                counts_attempt=False,
            )
        if isinstance(result, RetryLater) and result.scope is not None:
            scope = self._budget.penalize(row.platform, row.chat_id, result.retry_after, result.scope)
            log.info(
                "outbox row %d waits %.3gs for the %s's rate limit: %s",
                row.id, result.retry_after, scope, result.reason, extra={"session_key": row.session_key},
            )  # fmt: skip
            return self._rate_limited(row, result.retry_after, result.reason)
        if isinstance(result, Rejected) or row.attempts >= self.settings.max_attempts:
            log.error(
                "outbox row %d failed for good after %d attempt(s): %s",
                row.id, row.attempts, result.reason, extra={"session_key": row.session_key},
            )  # fmt: skip
            self._metrics.deliveries.labels(row.platform, "failed").inc()
            return OutboxSettlement(row.id, "failed", error=result.reason)
        log.warning("delivery of outbox row %d will be retried: %s", row.id, result.reason)
        if isinstance(result, Ambiguous):
            # The platform may have shown it: the retry carries the duplicate marker.
            self._metrics.deliveries.labels(row.platform, "ambiguous").inc()
            return OutboxSettlement(row.id, "ambiguous", retry_at=self._retry_at(row), error=result.reason)
        self._metrics.deliveries.labels(row.platform, "retry").inc()
        retry_at = max(self._retry_at(row), time.time() + result.retry_after)
        return OutboxSettlement(row.id, "pending", retry_at=retry_at, error=result.reason)
