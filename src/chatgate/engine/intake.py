"""The engine's intake: one admission path and one failure policy for every lane.

An adapter decodes, calls ``submit`` and acknowledges upstream by the answer; it
never retries a storage failure itself and never decides what to do with a
payload it could not decode. Both are decided here, the same for every lane:

- a storage outage is retried with capped backoff for as long as the lane can
  wait (its ``patience``), then answered ``Unavailable`` (do not acknowledge);
- a decode failure, a refusal and an event that keeps failing for an unknown
  reason are recorded in the store's rejected log with their reason and answered
  ``Refused`` (acknowledge: it will never be admitted, and nothing is dropped
  silently). If even the record cannot be written the answer is ``Unavailable``.

An event marked ``replayable`` may be admitted without an fsync of its own (a power cut
could take it), so a lane that marks events its platform redelivers until they are
acknowledged acknowledges them only once ``settle`` says every admission is on the disk.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from chatgate.domain.errors import ChatgateError, StoreUnavailable
from chatgate.domain.inbound import Inbound
from chatgate.domain.store_roles import Rejections
from chatgate.engine.metrics import GatewayMetrics
from chatgate.engine.ports import (
    WAIT_BRIEFLY,
    Admitted,
    IntakeAnswer,
    Refused,
    Unavailable,
    Undecodable,
)

log = logging.getLogger(__name__)


class AdmissionRefused(ChatgateError):
    """An inbound event that will not be admitted, with a code adapters can show."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class InboundSink(Protocol):
    async def admit(self, inbound: Inbound) -> Admitted:
        """Commit ``inbound``; raises ``AdmissionRefused`` or ``StoreUnavailable``."""
        ...

    async def make_durable(self) -> None:
        """Return once every admission so far is on the disk; raises ``StoreUnavailable``."""
        ...


RETRY_SECONDS = (0.05, 0.2, 0.5, 1.0, 2.0, 5.0)
"""Pauses between tries while the store is unavailable (the last one repeats)."""
MAX_UNEXPECTED_TRIES = 3
"""An event whose admission keeps failing for an unknown reason (a bug) is recorded and
refused after this many tries, so one event can never stop a lane."""
EXCERPT_CHARS = 500


class EngineIntake:
    def __init__(
        self,
        sink: InboundSink,
        rejected: Rejections,
        metrics: GatewayMetrics | None = None,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._sink = sink
        self._rejected = rejected
        self._metrics = metrics
        self._sleep = sleep

    async def submit(self, event: Inbound | Undecodable, *, patience: float = WAIT_BRIEFLY) -> IntakeAnswer:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + patience
        if isinstance(event, Undecodable):
            log.warning(
                "unsupported %s delivery: %s",
                event.transport,
                event.reason,
                extra={
                    "transport": event.transport,
                    "delivery_id": event.delivery_id,
                    "reason": event.reason,
                },
            )
            self._count(event.platform or event.transport, "unsupported")
            refused = Refused("unsupported", event.reason)
            return await self._record(
                event.transport, event.delivery_id, event.reason, event.excerpt, refused, deadline
            )
        attempt = unexpected = 0
        while True:
            try:
                return await self._sink.admit(event)
            except AdmissionRefused as exc:
                refused = Refused(exc.code, exc.message)
                reason = f"{exc.code}: {exc.message}"
                return await self._record(
                    event.transport, event.delivery_id, reason, _excerpt(event), refused, deadline
                )
            except StoreUnavailable as exc:
                pause = RETRY_SECONDS[min(attempt, len(RETRY_SECONDS) - 1)]
                attempt += 1
                if loop.time() + pause > deadline:
                    log.warning("%s %s not saved: %s", event.transport, event.delivery_id, exc)
                    return Unavailable(f"not saved: {exc}")
                log.info("store unavailable (%s); retrying %s in %.2fs", exc, event.delivery_id, pause)
                await self._sleep(pause)
            except Exception as exc:
                unexpected += 1
                log.exception(
                    "admitting %s %s failed (try %d)", event.transport, event.delivery_id, unexpected
                )
                if unexpected < MAX_UNEXPECTED_TRIES:
                    continue
                self._count(event.source.platform, "internal_error")
                refused = Refused("internal_error", "this message could not be handled; it was recorded")
                reason = f"internal error after {unexpected} tries: {exc!r}"[:300]
                return await self._record(
                    event.transport, event.delivery_id, reason, _excerpt(event), refused, deadline
                )

    async def settle(self) -> bool:
        """Whether every event admitted so far is on the disk (``False``: do not acknowledge them)."""
        try:
            await self._sink.make_durable()
        except StoreUnavailable as exc:
            log.warning("admitted events are not durable yet; not acknowledging them: %s", exc)
            return False
        return True

    async def _record(
        self,
        transport: str,
        delivery_id: str | None,
        reason: str,
        excerpt: str,
        answer: Refused,
        deadline: float,
    ) -> IntakeAnswer:
        """Keep what will be acknowledged without being admitted; ``Unavailable`` if we cannot."""
        loop = asyncio.get_running_loop()
        attempt = 0
        while True:
            try:
                await self._rejected.record_rejected(transport, delivery_id, reason, excerpt[:EXCERPT_CHARS])
                return answer
            except StoreUnavailable as exc:
                pause = RETRY_SECONDS[min(attempt, len(RETRY_SECONDS) - 1)]
                attempt += 1
                if loop.time() + pause > deadline:
                    log.warning("cannot record a rejected %s delivery yet (%s)", transport, exc)
                    return Unavailable(f"not recorded: {exc}")
                await self._sleep(pause)

    def _count(self, platform: str, code: str) -> None:
        if self._metrics is not None:
            self._metrics.refused.labels(platform or "unknown", code).inc()


def _excerpt(event: Inbound) -> str:
    # ASCII escapes: a lone surrogate in the text cannot break the record itself.
    return ascii(event.text[:EXCERPT_CHARS])
