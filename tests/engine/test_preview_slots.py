"""A preview whose rate slot is taken books the next one instead of being skipped (issue 33, item 3).

The stream consumer and the rate budget are the real ones; the platform is a small double
that records each call. The budget's schedule is what the checks read (which call went,
with which text, and what the budget still holds), never a timer around the code.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping

from chatgate.domain.outbound import PREVIEW_CURSOR, Capabilities, Delivered, DeliveryResult
from chatgate.domain.source import Source
from chatgate.engine.ratelimit import PlatformLimits, RateBudget
from chatgate.engine.streaming import TYPING_PATIENCE, StreamConsumer
from support.engine_harness import wait_until

PLATFORM = "paced"


class Recorder:
    """An editable platform that shows what it is sent."""

    platform = PLATFORM

    def __init__(self, edit_interval: float, typing: bool = False) -> None:
        self.capabilities = Capabilities(edit=True, drafts=False, edit_interval=edit_interval, typing=typing)
        self.history: list[tuple[str, str]] = []
        self._ids = itertools.count(1)

    async def send_message(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        self.history.append(("send", text))
        return Delivered(f"m{next(self._ids)}")

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        self.history.append(("edit", text))
        return Delivered(message_id)

    async def send_typing(self, chat_id: str, target: Mapping[str, str]) -> None:
        return None

    async def delete_message(self, chat_id: str, message_id: str, target: Mapping[str, str]) -> bool:
        return True


def _consumer(platform: Recorder, budget: RateBudget) -> StreamConsumer:
    return StreamConsumer(
        platform,  # type: ignore[arg-type]
        Source(platform=PLATFORM, chat_id="c1", chat_type="dm"),
        None,
        budget,
        typing_delay=3600.0,
    )


async def test_a_preview_behind_another_call_waits_for_its_slot_and_shows_the_newest_text() -> None:
    budget = RateBudget()
    budget.configure(PLATFORM, PlatformLimits(max_rate=1.0))  # one call a window
    platform = Recorder(edit_interval=2.0)
    consumer = _consumer(platform, budget)
    budget.take(PLATFORM, "someone else")  # this window is taken: the next slot is ~1 s away
    await consumer.update("one", force=True)
    await consumer.update("one two", force=True)
    await consumer.update("one two three")
    assert platform.history == [], "went before its slot"
    await wait_until(lambda: platform.history, 10, "the booked preview")
    assert platform.history == [("send", "one two three" + PREVIEW_CURSOR)], "one call, the newest text"
    await consumer.close()
    assert consumer.state.message_id == "m1"


async def test_the_final_overtakes_a_preview_still_waiting_and_gets_its_slot_back() -> None:
    budget = RateBudget()
    budget.configure(PLATFORM, PlatformLimits(chat_min_interval=3.0, max_rate=1.0))
    platform = Recorder(edit_interval=5.0)
    consumer = _consumer(platform, budget)
    budget.take(PLATFORM, "someone else")  # the next platform slot is a second away
    at = time.monotonic()
    free = budget.delay(PLATFORM, "c1", now=at)
    await consumer.update("a reply", force=True)  # booked: within one interval (5 s)
    assert abs(budget.delay(PLATFORM, "c1", now=at) - (free + 3.0)) < 1e-9  # its interval after the preview
    await consumer.close()  # the turn ended first: the final wins
    assert platform.history == [], "a preview went after its turn ended"
    assert budget.delay(PLATFORM, "c1", now=at) == free, "the final would wait behind a ghost preview"


async def test_a_first_preview_books_as_far_ahead_as_typing_and_later_ones_one_interval() -> None:
    """The first preview is the turn's sign of life, worth a slot as far ahead as a typing
    indicator takes (``typing_every``, 4 s); a later one is not worth more than an interval."""
    budget = RateBudget()
    budget.configure(PLATFORM, PlatformLimits(max_rate=0.2))  # 5 s between calls
    platform = Recorder(edit_interval=0.5)
    consumer = _consumer(platform, budget)
    budget.take(PLATFORM, "someone else")  # the next slot is 5 s away: further than typing's 4 s
    at = time.monotonic()
    before = budget.delay(PLATFORM, "c2", now=at)
    await consumer.update("a reply", force=True)
    assert budget.delay(PLATFORM, "c2", now=at) == before, "booked a slot it would not wait for"
    await consumer.close()

    budget = RateBudget()
    budget.configure(PLATFORM, PlatformLimits(max_rate=1.0))  # 1 s between calls
    platform = Recorder(edit_interval=0.5)
    consumer = _consumer(platform, budget)
    await consumer.update("one", force=True)  # the platform is free: sent at once
    assert platform.history == [("send", "one" + PREVIEW_CURSOR)]
    at = time.monotonic()
    before = budget.delay(PLATFORM, "c2", now=at)  # ~1 s: more than one interval away
    await consumer.update("one two", force=True)
    assert budget.delay(PLATFORM, "c2", now=at) == before, "an edit booked further than an interval"
    await consumer.close()
    assert platform.history == [("send", "one" + PREVIEW_CURSOR)]


def _typing_consumer(budget: RateBudget) -> StreamConsumer:
    """A turn on a platform that shows typing, asking for an indicator as soon as it begins."""
    return StreamConsumer(
        Recorder(edit_interval=1.0, typing=True),  # type: ignore[arg-type]
        Source(platform=PLATFORM, chat_id="c3", chat_type="dm"),
        None,
        budget,
        typing_delay=0.0,
    )


async def test_a_turns_typing_indicator_takes_only_a_near_slot_leaving_the_later_ones_to_previews() -> None:
    """A hundred turns at once on a 20/s platform booked their indicators up to 4 s ahead, so the
    budget was full of typing until the finals and no reply showed a preview (issue 33, item 3).
    An indicator now books only a slot within ``TYPING_PATIENCE``."""
    budget = RateBudget()
    budget.configure(PLATFORM, PlatformLimits(max_rate=1.0))  # one call a window
    busy = _typing_consumer(budget)
    budget.take(PLATFORM, "someone else")  # the next slot is a window away: further than the patience
    at = time.monotonic()
    before = budget.delay(PLATFORM, "c4", now=at)
    assert before > TYPING_PATIENCE
    await busy.begin()
    assert budget.delay(PLATFORM, "c4", now=at) == before, "an indicator booked a slot a window ahead"
    await busy.close()

    idle = RateBudget()
    idle.configure(PLATFORM, PlatformLimits(max_rate=1.0))
    free = _typing_consumer(idle)
    await free.begin()  # the slot is free now: the indicator takes it
    assert idle.delay(PLATFORM, "c4") > 0.5, "no indicator was booked on an idle platform"
    await free.close()
