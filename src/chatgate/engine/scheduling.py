"""What the scheduler is told: its settings, and the port its turn commits hand claimed
replies to (``DeliveryWorker`` implements it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

import msgspec

from chatgate.domain.outbox import OutboxRow

BusyPolicy = Literal["queue", "interrupt"]


class SchedulerSettings(msgspec.Struct, frozen=True):
    max_concurrent_turns: int = 64
    lease_seconds: float = 30.0
    poll_interval: float = 1.0
    busy_policy: BusyPolicy = "queue"
    interrupt_batch: int = 20
    turns_before_yield: int = 4
    retry_base: float = 0.5
    retry_max: float = 60.0
    suspect_delay: float = 5.0
    """Seconds after the start before a suspect may run isolated: a death soon after a start
    (a burst of kills, a restart loop) lands on whatever runs first, so nothing is blamed then."""


class Sends(Protocol):
    """Where a turn's commit hands the rows it claimed for delivery (``DeliveryWorker``)."""

    def reserve(self, wanted: int) -> int:
        """Room for up to ``wanted`` rows, promised until ``hand_over``; how many."""
        ...

    def hand_over(self, reserved: int, rows: Sequence[OutboxRow]) -> None:
        """The commit is over: deliver ``rows`` (none if it failed) and free the rest of the room."""
        ...
