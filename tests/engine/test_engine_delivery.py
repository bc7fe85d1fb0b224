"""The delivery worker: order per chat, independence across chats, retries and failures."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
import time
from typing import TYPE_CHECKING, Any

from chatgate.domain.outbound import Capabilities, Deferred, DeliveryResult, Rejected, RetryLater
from chatgate.domain.outbox import OutboxRow
from chatgate.engine.delivery import DeliverySettings, DeliveryWorker
from chatgate.engine.metrics import GatewayMetrics
from chatgate.store.sqlite import SqliteStore
from chatgate.store.sqlite.database import default_connect
from support.engine_harness import RecordingAdapter, wait_until

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from support.engine_harness import MakeHarness

    Wait = Callable[..., Awaitable[Any]]


def deliveries(h: Any, outcome: str) -> float:
    return float(h.metric("chatgate_deliveries_total", platform="test", outcome=outcome))


async def test_a_deferred_row_stays_open_and_later_rows_of_its_chat_wait_behind_it_in_order(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness()
    offline = {"X"}

    def script(row: OutboxRow) -> DeliveryResult | None:
        return Deferred("client offline", retry_in=0.02) if row.chat_id in offline else None

    h.adapter.script = script
    for text in ("a1", "a2", "a3"):
        await h.send(text, chat_id="X")
    await wait(lambda: h.query("SELECT COUNT(*) FROM outbox WHERE chat_id = 'X'") == [(3,)])
    seen = len(h.adapter.calls)
    await wait(lambda: len(h.adapter.calls) >= seen + 2, message="a1 deferred again")

    assert {r.text for r in h.adapter.calls} == {"echo: a1"}, "only the head of the chat is tried"
    assert h.outbox("echo: a1")[0][0] in ("pending", "sending")
    assert h.outbox("echo: a2") == [("pending", 0, "final")]
    assert h.outbox("echo: a3") == [("pending", 0, "final")]
    await h.send("y1", chat_id="Y")
    await h.delivered("echo: y1")  # another chat is not held up
    assert h.adapter.texts("X") == []

    offline.clear()
    assert await h.finals("X", 3) == ["echo: a1", "echo: a2", "echo: a3"]
    assert deliveries(h, "deferred") >= 3
    await wait(lambda: h.query("SELECT status FROM outbox") == [("sent",)] * 4, message="all settled sent")


async def test_retry_later_for_one_chat_does_not_delay_other_chats(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness()

    def script(row: OutboxRow) -> DeliveryResult | None:
        return RetryLater("429 too many requests", retry_after=60.0) if row.chat_id == "X" else None

    h.adapter.script = script
    await h.send("x1", chat_id="X")
    await wait(lambda: h.adapter.calls_for("echo: x1"), message="x1 attempted")
    for i in range(3):
        await h.send(f"y{i}", chat_id="Y")

    assert await h.finals("Y", 3) == ["echo: y0", "echo: y1", "echo: y2"]
    assert len(h.adapter.calls_for("echo: x1")) == 1, "x1 waits for its retry_after"
    assert h.outbox("echo: x1") == [("pending", 1, "final")]
    assert deliveries(h, "retry") == 1


async def test_a_rejected_row_is_marked_failed_counted_and_does_not_block_its_chat(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness()

    def script(row: OutboxRow) -> DeliveryResult | None:
        return Rejected("message is too long") if row.text == "echo: bad" else None

    h.adapter.script = script
    await h.send("bad")
    await h.send("good")

    assert await h.finals("c1", 1) == ["echo: good"]
    await h.delivery.flush(5)  # the adapter answered; wait until the worker settled both rows
    assert h.outbox("echo: bad") == [("failed", 1, "final")]
    assert h.query("SELECT last_error FROM outbox WHERE text = 'echo: bad'") == [("message is too long",)]
    assert len(h.adapter.calls_for("echo: bad")) == 1, "a rejection is not retried"
    assert deliveries(h, "failed") == 1
    assert deliveries(h, "sent") == 1


async def test_an_adapter_that_raises_is_retried_until_the_row_is_delivered_once(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness()
    failures = {"left": 2}

    def script(row: OutboxRow) -> DeliveryResult | None:
        if row.text == "echo: flaky" and failures["left"] > 0:
            failures["left"] -= 1
            raise ConnectionError("socket closed")
        return None

    h.adapter.script = script
    await h.send("flaky")

    await h.delivered("echo: flaky")
    await wait(lambda: h.outbox("echo: flaky")[0][0] == "sent", message="settled as sent")
    assert len(h.adapter.calls_for("echo: flaky")) == 3
    assert [r.text for r in h.adapter.delivered] == ["echo: flaky"]
    assert h.outbox("echo: flaky") == [("sent", 3, "final")]
    assert deliveries(h, "retry") == 2
    assert deliveries(h, "sent") == 1


def always_raise_for(text: str) -> Callable[[OutboxRow], DeliveryResult | None]:
    def script(row: OutboxRow) -> DeliveryResult | None:
        if row.text == text:
            raise ConnectionError("platform unreachable")
        return None

    return script


async def test_an_adapter_that_keeps_raising_ends_failed_and_the_chat_moves_on(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness(delivery={"max_attempts": 3})
    h.adapter.script = always_raise_for("echo: doomed")
    await h.send("doomed")
    await h.send("after")

    assert await h.finals("c1", 1) == ["echo: after"]
    assert h.outbox("echo: doomed")[0][0] == "failed"
    assert deliveries(h, "failed") == 1
    assert "echo: doomed" not in [r.text for r in h.adapter.delivered]


async def test_a_row_that_keeps_failing_is_tried_exactly_max_attempts_times(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness(delivery={"max_attempts": 3})
    h.adapter.script = always_raise_for("echo: doomed")
    await h.send("doomed")
    await h.send("after")
    await h.finals("c1", 1)

    assert len(h.adapter.calls_for("echo: doomed")) == 3
    assert h.outbox("echo: doomed") == [("failed", 3, "final")]


async def test_a_rate_limit_never_spends_an_attempt_even_past_max_attempts(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(delivery={"max_attempts": 2})
    limited: list[float] = []

    def script(row: OutboxRow) -> DeliveryResult | None:
        if len(limited) < 5:  # more 429s than the row has attempts
            limited.append(time.monotonic())
            return RetryLater("429: retry after 0.05s", retry_after=0.05, scope="chat")
        return None

    h.adapter.script = script
    await h.send("patient")
    await h.delivered("echo: patient")

    assert len(h.adapter.calls_for("echo: patient")) == 6
    await wait(lambda: h.outbox("echo: patient") == [("sent", 1, "final")], message="sent on its 1st attempt")
    assert deliveries(h, "rate_limited") == 5 and deliveries(h, "failed") == 0


async def test_a_hung_send_in_one_chat_does_not_hold_up_other_chats(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness(delivery={"send_timeout": 30.0})
    release = asyncio.Event()

    async def script(row: OutboxRow) -> DeliveryResult | None:
        if row.chat_id == "X":
            await release.wait()  # a platform call that hangs (until the send timeout)
        return None

    h.adapter.script = script
    await h.send("x1", chat_id="X")
    await wait(lambda: h.adapter.calls_for("echo: x1"), message="x1 in flight")
    await h.send("y1", chat_id="Y")
    try:
        await h.delivered("echo: y1", timeout=3.0)
    finally:
        release.set()


async def test_the_delivery_worker_stops_even_when_woken_just_before(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "delivery.db")
    await store.open()
    worker = DeliveryWorker(store, {}, GatewayMetrics(), DeliverySettings(poll_interval=30.0))
    worker.start()
    await asyncio.sleep(0)  # one loop step: the worker is now parked on its wake event
    task = worker._task
    worker.wake()  # e.g. a turn committed ...
    stopping = asyncio.ensure_future(worker.stop())  # ... as shutdown began
    try:
        await asyncio.wait_for(asyncio.shield(stopping), 3.0)
    finally:
        if task is not None and not task.done():
            task.cancel()  # clean up after the bug: a second cancel gets through
        await asyncio.gather(stopping, return_exceptions=True)
        await store.close()


async def test_a_429_penalizes_only_its_chat_whose_messages_then_arrive_in_order(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness()
    penalized: list[float] = []
    x_calls: list[float] = []

    def script(row: OutboxRow) -> DeliveryResult | None:
        if row.chat_id == "X":
            x_calls.append(time.monotonic())
            if not penalized:
                penalized.append(x_calls[-1])
                return RetryLater("429: retry after 1.5s", retry_after=1.5, scope="chat")
        return None

    h.adapter.script = script
    for i in range(3):
        await h.send(f"x{i}", chat_id="X")
    await wait(lambda: penalized, message="the 429")
    for i in range(5):
        await h.send(f"y{i}", chat_id="Y")
    # Not h.finals: its flush waits for X's row too, which waits for its slot in its own task.
    await wait(lambda: len(h.adapter.texts("Y")) >= 5, message="Y's five finals")
    assert h.adapter.texts("Y") == [f"echo: y{i}" for i in range(5)]
    assert h.adapter.texts("X") == [], "X waits out its penalty while Y flows"

    assert await h.finals("X", 3, timeout=20) == ["echo: x0", "echo: x1", "echo: x2"]
    assert len(x_calls) == 4, "x0 twice (penalized, then delivered), x1 and x2 once"
    assert x_calls[1] - penalized[0] >= 1.5, "nothing went to X before its retry_after ran out"


async def test_rows_older_than_max_age_are_abandoned_unless_the_client_pulls_them(
    make_harness: MakeHarness,
) -> None:
    from chatgate.domain.outbound import Capabilities

    pushed = await make_harness(delivery={"max_age": 0.0}, db="pushed.db")
    await pushed.send("too late")
    await wait_until(lambda: pushed.outbox("echo: too late") == [("failed", 1, "final")], 10, "expiry")
    assert pushed.adapter.texts() == []
    assert deliveries(pushed, "expired") == 1

    pulling = await make_harness(delivery={"max_age": 0.0}, db="pulled.db")
    pulling.adapter.capabilities = Capabilities(confirms_receipt=True)
    await pulling.send("worth the wait")
    assert await pulling.finals("c1", 1) == ["echo: worth the wait"]


class ClaimTrace:
    """``connect`` for ``SqliteStore``: the real connections, each traced; ``claimed`` lists the
    ids of outbox rows the delivery worker's own claims (``claim_outbox``'s UPDATE) took."""

    def __init__(self) -> None:
        self.claimed: list[int] = []

    def __call__(self, path: str) -> sqlite3.Connection:
        conn = default_connect(path)
        conn.set_trace_callback(self._trace)
        return conn

    def _trace(self, statement: str) -> None:
        found = re.match(r"UPDATE outbox SET possibly_duplicate = MAX.* WHERE id = (\d+)", statement.strip())
        if found:
            self.claimed.append(int(found[1]))


async def test_a_reply_heading_its_chat_is_claimed_by_the_turns_commit_and_sent_with_no_claim_of_its_own(
    make_harness: MakeHarness,
) -> None:
    trace = ClaimTrace()
    h = await make_harness(connect=trace)
    for i in range(3):
        await h.send(f"m{i}", chat_id=f"C{i}")
    for i in range(3):
        row = await h.delivered(f"echo: m{i}")
        assert (row.status, row.attempts, row.possibly_duplicate) == ("sending", 1, False)
    await h.delivery.flush(5)
    assert h.query("SELECT status, attempts FROM outbox") == [("sent", 1)] * 3
    assert trace.claimed == [], "every reply went from its turn's commit to the send"


async def test_with_no_room_in_delivery_a_reply_is_recorded_pending_and_claimed_by_delivery_as_before(
    make_harness: MakeHarness, wait: Wait
) -> None:
    trace = ClaimTrace()
    h = await make_harness(connect=trace, delivery={"batch": 1, "send_timeout": 30.0})
    release = asyncio.Event()

    async def script(row: OutboxRow) -> DeliveryResult | None:
        if row.chat_id == "X":
            await release.wait()  # holds the worker's only slot
        return None

    h.adapter.script = script
    await h.send("x1", chat_id="X")
    await wait(lambda: h.adapter.calls_for("echo: x1"), message="x1 in flight")
    await h.send("y1", chat_id="Y")
    await wait(lambda: h.outbox("echo: y1") == [("pending", 0, "final")], message="y1 recorded, unclaimed")
    assert h.adapter.calls_for("echo: y1") == []
    release.set()
    row = await h.delivered("echo: y1")
    assert row.attempts == 1 and row.id in trace.claimed, "claimed by the worker once it had room"


async def test_a_reply_claimed_by_its_commit_that_must_wait_long_for_its_rate_slot_goes_back_to_pending(
    make_harness: MakeHarness, wait: Wait
) -> None:
    """Over ``max_inline_wait`` a claimed reply is rescheduled, its attempt given back, as any
    claimed row: the commit's claim changes nothing about pacing."""
    paced = RecordingAdapter()
    paced.capabilities = Capabilities(drafts=True, chat_min_interval=0.6)
    h = await make_harness(adapter=paced, delivery={"max_inline_wait": 0.0})
    await h.send("a1", chat_id="X")
    first = await h.delivered("echo: a1")
    assert first.attempts == 1
    await h.send("a2", chat_id="X")
    await wait(lambda: deliveries(h, "rate_limited") >= 1, message="a2 waited for its slot")
    second = await h.delivered("echo: a2", timeout=10.0)
    assert second.attempts == 1, "waiting for the rate limit spent no attempt"


class WriterGate(ClaimTrace):
    """``ClaimTrace`` that can also hold the writer (the first connection) at the BEGIN of its
    next transaction, so that writes issued meanwhile wait behind it."""

    def __init__(self) -> None:
        super().__init__()
        self._first = True
        self.armed = threading.Event()
        self.paused = threading.Event()
        self.resume = threading.Event()

    def __call__(self, path: str) -> sqlite3.Connection:
        if not self._first:
            return super().__call__(path)
        self._first = False
        # No statement cache: the authorizer sees every BEGIN (a cached statement is not re-authorized).
        conn = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=30.0, cached_statements=0
        )
        conn.set_trace_callback(self._trace)
        conn.set_authorizer(self._authorize)
        return conn

    def _authorize(self, action: int, arg1: str | None, *_: object) -> int:
        if action == sqlite3.SQLITE_TRANSACTION and arg1 == "BEGIN" and self.armed.is_set():
            self.armed.clear()
            self.paused.set()
            self.resume.wait(30)
        return sqlite3.SQLITE_OK


async def test_a_reply_claimed_by_a_commit_that_outlived_its_cancelled_turn_is_still_sent(
    make_harness: MakeHarness, wait: Wait
) -> None:
    """The scheduler stops while a turn's commit waits in the writer's queue: the commit still
    commits (it cannot be taken back) and the reply it claimed goes to delivery, not to a restart."""
    gate = WriterGate()
    h = await make_harness(connect=gate)
    turn = h.agent.hold("m1")
    await h.send("m1", chat_id="X")
    await wait(lambda: h.agent.running("m1"), message="the turn runs")
    gate.armed.set()
    plug = asyncio.ensure_future(h.store.renew_lease("plug", "plug", 1.0))
    assert await asyncio.to_thread(gate.paused.wait, 30), "the writer never reached BEGIN"
    turn.set()
    await wait(lambda: h.agent.turns_with("m1")[0].state == "done", message="the turn ended")
    for _ in range(20):  # its commit is queued behind the held writer
        await asyncio.sleep(0.01)
    stopping = asyncio.ensure_future(h.scheduler.stop())  # it cancels the worker again and again
    await wait(stopping.done, message="the scheduler stopped while the commit still waits")
    gate.resume.set()
    await plug
    row = await h.delivered("echo: m1")
    assert row.attempts == 1 and gate.claimed == [], "handed over by the commit, not claimed again"


async def test_every_row_put_back_has_a_timer_at_its_due_time_not_the_poll(
    make_harness: MakeHarness, wait: Wait
) -> None:
    """Issue 33, item 2: only the earliest put-back row had a timer (and none beyond a poll
    interval); the others waited for the next poll. With the poll an hour away, three chats told
    to wait three different times must each still be delivered, each when its wait is over."""
    h = await make_harness(delivery={"poll_interval": 3600.0, "max_inline_wait": 0.0})
    waits = {"X": 0.3, "Y": 0.9, "Z": 1.6}
    told: dict[str, float] = {}
    sent: dict[str, float] = {}

    def script(row: OutboxRow) -> DeliveryResult | None:
        if row.chat_id not in told:
            told[row.chat_id] = time.monotonic()
            return RetryLater("429", retry_after=waits[row.chat_id], scope="channel")
        sent[row.chat_id] = time.monotonic()
        return None

    h.adapter.script = script
    for chat in waits:
        await h.send(f"{chat.lower()}1", chat_id=chat)
    for chat in waits:
        row = await h.delivered(f"echo: {chat.lower()}1", timeout=20.0)
        assert row.attempts == 1, "waiting for the 429 spent no attempt"
    for chat, wait_s in waits.items():
        assert sent[chat] - told[chat] >= wait_s, f"{chat} went before its retry_after ran out"


async def test_a_row_waiting_for_its_slot_when_delivery_stops_goes_back_unflagged(
    make_harness: MakeHarness, wait: Wait
) -> None:
    """A row waits for its rate slot in its own task (up to the horizon), claimed but not sent:
    stopping then must not leave it ``sending``, which a restart resends as a possible repeat."""
    paced = RecordingAdapter()
    paced.capabilities = Capabilities(drafts=True, chat_min_interval=5.0)
    h = await make_harness(adapter=paced)
    await h.send("a1", chat_id="X")
    await h.delivered("echo: a1")
    await h.send("a2", chat_id="X")
    await wait(lambda: h.outbox("echo: a2") == [("sending", 1, "final")], message="a2 waits for its slot")
    await h.scheduler.stop()
    await h.delivery.stop()

    assert h.adapter.texts("X") == ["echo: a1"]
    rows = h.query("SELECT status, attempts, possibly_duplicate FROM outbox WHERE text = 'echo: a2'")
    assert rows == [("pending", 0, 0)]
