"""A kill is not the message's fault, and a crash leaves no trace in the chat.

Deaths are real for the store: an owner claims (a turn starts, a preview is recorded)
and is never heard of again; the next owner runs the start-up ``recover``. The platform
is the editable double of ``test_engine_streaming`` (what a user would see).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING

from test_engine_streaming import EditablePlatformDouble, SlowWriter

from chatgate.domain.outbound import PREVIEW_CURSOR, Delivered, DeliveryResult
from chatgate.engine.ratelimit import RateBudget
from chatgate.engine.streaming import StreamConsumer
from support.engine_harness import wait_until
from support.store_values import outcome

if TYPE_CHECKING:
    from support.engine_harness import Harness, MakeHarness


async def _crash(h: Harness, owner: str) -> None:
    """``owner`` claimed whatever it could and died; the next owner recovers."""
    await h.store.recover(owner + "-successor")


async def test_a_death_is_blamed_only_on_the_isolated_turn_not_on_the_turns_beside_it(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness(start=False, owner="survivor")
    await h.send("suspect", chat_id="a", delivery_id="a1")
    for n in range(2):  # in flight at two deaths (with nothing else): a suspect from now on
        (claim,) = await h.store.claim_sessions(f"dead-{n}", 10, 30.0, 1)
        assert not claim.isolated
        await _crash(h, f"dead-{n}")
    await h.send("bystander", chat_id="b", delivery_id="b1")
    claims = await h.store.claim_sessions("dead-2", 10, 30.0, 1)
    assert {c.items[0].inbound.source.chat_id: c.isolated for c in claims} == {"a": True, "b": False}
    await _crash(h, "dead-2")
    crashes = dict(h.query("SELECT delivery_id, crashes FROM inbox ORDER BY seq"))
    assert crashes == {"a1": 1, "b1": 0}, "the bystander in flight at the same death is not blamed"


async def test_at_most_one_suspect_runs_at_a_time_the_others_wait_for_it(make_harness: MakeHarness) -> None:
    h = await make_harness(start=False, owner="survivor")
    for chat in ("a", "b", "c"):
        await h.send("m", chat_id=chat, delivery_id=f"{chat}1")
    for n in range(2):
        assert len(await h.store.claim_sessions(f"dead-{n}", 10, 30.0, 1)) == 3
        await _crash(h, f"dead-{n}")
    (first,) = await h.store.claim_sessions("w", 10, 30.0, 1, 1)
    assert first.isolated
    assert await h.store.claim_sessions("w", 10, 30.0, 1, 0) == [], "suspects wait while one runs"


async def test_a_message_in_flight_at_kills_while_others_run_isolated_is_answered_not_given_up(
    make_harness: MakeHarness,
) -> None:
    """Kill after kill lands while ten chats' turns run; a suspect runs isolated beside them and
    finishes between kills (as a real turn does). Only isolated turns are ever blamed, and every
    message is answered, none given up."""
    h = await make_harness(start=False, owner="survivor")
    chats = [f"c{i}" for i in range(10)]
    for chat in chats:
        await h.send(f"hello {chat}", chat_id=chat, delivery_id=f"{chat}-1")
    for n in range(10):
        claims = await h.store.claim_sessions(f"dead-{n}", 10, 30.0, 1, 1)
        for claim in claims:
            if claim.isolated:  # it finished before the next kill: a clean turn of its own
                await h.store.complete_turn(f"dead-{n}", outcome(claim), 30.0, 0)
        await _crash(h, f"dead-{n}")
    blamed = h.query("SELECT delivery_id, crashes, status FROM inbox WHERE crashes > 0")
    assert blamed == [], "an external kill is never blamed on a message that ran isolated and finished"
    await h.start()
    await wait_until(lambda: h.query("SELECT COUNT(*) FROM inbox WHERE status = 'queued'") == [(0,)], 10)
    assert h.query("SELECT DISTINCT outcome FROM inbox WHERE outcome = 'given_up'") == []


async def test_a_start_claims_recoverable_work_at_once_not_after_a_poll_interval(
    make_harness: MakeHarness,
) -> None:
    """The work was admitted by a predecessor (nothing in this process woke the scheduler)."""
    before = await make_harness(start=False, owner="predecessor")
    await before.send("left by a predecessor", delivery_id="p1")
    await before.stop()
    h = await make_harness(start=False, owner="survivor", scheduler={"poll_interval": 3600.0})
    await h.start()
    assert await h.finals("c1", 1) == ["echo: left by a predecessor"]


async def _die_mid_stream(h: Harness, platform: EditablePlatformDouble) -> str:
    """What a process killed mid-stream leaves: its claim, and a preview message it recorded."""
    await h.send("hello", delivery_id="h1")
    (claim,) = await h.store.claim_sessions("dead", 10, 30.0, 1)
    shown = await platform.send_message("c1", "answer to hel" + PREVIEW_CURSOR, {}, None)
    assert isinstance(shown, Delivered) and shown.platform_message_id
    assert await h.store.record_preview("dead", claim.session_key, shown.platform_message_id)
    return shown.platform_message_id


async def test_a_preview_left_by_a_killed_process_becomes_the_notice_and_no_cursor_stays(
    make_harness: MakeHarness,
) -> None:
    platform = EditablePlatformDouble("always", "succeed")
    h = await make_harness(agent=SlowWriter(8, 0.02), adapter=platform, owner="survivor", start=False)
    stale = await _die_mid_stream(h, platform)
    await h.start()
    await h.delivered("answer to hello: " + " ".join(f"word{i}" for i in range(8)), timeout=20)
    shown = list(platform.rendered.items())
    assert not any(t.endswith(PREVIEW_CURSOR) for _, t in shown), shown
    assert shown[0] == (stale, shown[0][1]) and shown[0][1].startswith("The gateway restarted"), shown
    assert len(shown) == 2 and shown[1][1].startswith("answer to hello"), platform.history


async def test_the_resume_notice_is_shown_before_anything_the_resumed_turn_shows(
    make_harness: MakeHarness,
) -> None:
    """No preview was recorded (the process died before it streamed): the notice is a new
    message, and the resumed turn's preview waits for it."""
    platform = EditablePlatformDouble("always", "succeed")
    h = await make_harness(agent=SlowWriter(8, 0.02), adapter=platform, owner="survivor", start=False)
    await h.send("hello", delivery_id="h1")
    await h.store.claim_sessions("dead", 10, 30.0, 1)
    await h.start()  # recover() and run
    await h.delivered("answer to hello: " + " ".join(f"word{i}" for i in range(8)), timeout=20)
    sends = [text for op, _, text in platform.history if op == "send"]
    assert sends[0].startswith("The gateway restarted"), platform.history
    assert len(sends) == 2 and sends[1].endswith(PREVIEW_CURSOR), platform.history
    assert list(platform.rendered.values())[1].startswith("answer to hello"), platform.rendered


class _LateFirstSend(EditablePlatformDouble):
    """The platform shows the first send at once but answers it only after ``delay``."""

    def __init__(self, delay: float) -> None:
        super().__init__("always", "succeed")
        self.delay = delay
        self.slow = True

    async def send_message(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        result = await super().send_message(chat_id, text, target, reply_to)
        if self.slow:
            self.slow = False
            await asyncio.sleep(self.delay)
        return result


async def test_a_first_preview_answered_after_the_call_timeout_is_adopted_not_orphaned() -> None:
    from chatgate.domain.source import Source

    platform = _LateFirstSend(0.12)
    consumer = StreamConsumer(
        platform,  # type: ignore[arg-type]
        Source(platform="test", chat_id="c1", chat_type="dm"),
        None,
        RateBudget(),
        draft_interval=0.0,
        call_timeout=0.05,
    )
    await consumer.begin()
    text = ""
    for word in ("one ", "two ", "three ", "four ", "five ", "six ", "seven "):
        text += word
        await asyncio.sleep(0.03)
        await consumer.update(text)
    await consumer.close()
    assert consumer.state.message_id == "m1", platform.history
    ops = [op for op, _, _ in platform.history]
    assert ops.count("send") == 1 and "edit" in ops, "adopted: edited on, never a second message"


async def test_no_suspect_runs_isolated_until_the_process_has_lived_a_while(
    make_harness: MakeHarness,
) -> None:
    """A death right after a start (a burst of kills, a restart loop) must not land on a suspect."""
    h = await make_harness(start=False, owner="survivor", scheduler={"suspect_delay": 3600.0})
    await h.send("suspect", chat_id="a", delivery_id="a1")
    for n in range(2):
        await h.store.claim_sessions(f"dead-{n}", 10, 30.0, 1)
        await _crash(h, f"dead-{n}")
    await h.start()
    await h.send("fresh", chat_id="b", delivery_id="b1")
    assert await h.finals("b", 1) == ["echo: fresh"]
    assert h.query("SELECT status, isolated FROM inbox WHERE delivery_id = 'a1'") == [("queued", 0)]
