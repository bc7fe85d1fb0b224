"""Streaming previews and honest finals over a scriptable editable platform.

The platform double is the seam: it keeps what a user would see (``rendered``:
message id -> text) and can be told to fail edits midway, refuse edits, drop
preview edits while acknowledging them, or fail sends before succeeding. The
stream consumer, the outbox and the delivery worker are the real ones.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

import pytest
from msgspec.structs import replace

from chatgate.agents.base import AgentEvent, AgentRequest, Final, TextDelta
from chatgate.domain.outbound import PREVIEW_CURSOR, Capabilities, Delivered, DeliveryResult, Rejected
from chatgate.domain.outbox import OutboxRow
from chatgate.engine.ports import deliver_final
from chatgate.engine.streaming import TYPING_DELAY
from support.engine_harness import RecordingAdapter, wait_until

if TYPE_CHECKING:
    from support.engine_harness import MakeHarness

EditMode = Literal["always", "fail_midway", "impossible", "acked_not_rendered"]
SendMode = Literal["succeed", "fail_then_succeed"]
FinalMode = Literal["edit_preview", "fresh_message"]
StreamMode = Literal["clean", "cancelled"]


class EditablePlatformDouble(RecordingAdapter):
    """What a user of an editable platform would see, with scriptable misbehaviour."""

    def __init__(self, edits: EditMode, sends: SendMode, max_length: int = 4096) -> None:
        super().__init__()
        self.capabilities = Capabilities(
            edit=edits != "impossible", drafts=False, max_length=max_length, edit_interval=0.02
        )
        self.edits_mode = edits
        self.sends_mode = sends
        self.rendered: dict[str, str] = {}
        self.history: list[tuple[str, str, str]] = []  # (op, message id, text)
        self._ids = itertools.count(1)
        self._sends_to_fail = 1 if sends == "fail_then_succeed" else 0
        self._edits_ok = 2 if edits == "fail_midway" else None

    async def send_message(
        self, chat_id: str, text: str, target: Mapping[str, str], reply_to: str | None
    ) -> DeliveryResult:
        if self._sends_to_fail:
            self._sends_to_fail -= 1
            raise ConnectionError("platform unreachable")
        message_id = f"m{next(self._ids)}"
        self.rendered[message_id] = text
        self.history.append(("send", message_id, text))
        return Delivered(message_id)

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, target: Mapping[str, str]
    ) -> DeliveryResult:
        if self.edits_mode == "impossible":
            return Rejected("this platform cannot edit messages")
        if self._edits_ok is not None:
            if self._edits_ok == 0:
                return Rejected("message can no longer be edited")
            self._edits_ok -= 1
        self.history.append(("edit", message_id, text))
        if self.edits_mode == "acked_not_rendered" and text.endswith(PREVIEW_CURSOR):
            return Delivered(message_id)  # acknowledged, silently dropped (a throttled preview)
        self.rendered[message_id] = text
        return Delivered(message_id)

    async def send_typing(self, chat_id: str, target: Mapping[str, str]) -> None:
        self.history.append(("typing", "", ""))

    async def delete_message(self, chat_id: str, message_id: str, target: Mapping[str, str]) -> bool:
        self.history.append(("delete", message_id, ""))
        return self.rendered.pop(message_id, None) is not None

    async def deliver(self, row: OutboxRow) -> DeliveryResult:
        self.calls.append(row)
        result = await deliver_final(self, row, "(possible repeat) ")
        if isinstance(result, Delivered):
            self.delivered.append(replace(row, platform_message_id=result.platform_message_id))
        return result


class SlowWriter:
    """An agent that writes its reply in small pieces, slowly enough for previews."""

    name = "slow-writer"

    def __init__(self, pieces: int, delay: float) -> None:
        self.pieces = pieces
        self.delay = delay
        self.started = asyncio.Event()

    async def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]:
        text = request.messages[-1].text
        reply = f"answer to {text}: " + " ".join(f"word{i}" for i in range(self.pieces))
        step = max(1, len(reply) // self.pieces)
        for start in range(0, len(reply), step):
            self.started.set()
            await asyncio.sleep(self.delay)
            yield TextDelta(reply[start : start + step])
        yield Final(reply)

    async def aclose(self) -> None:
        return None


def _final_rows(h: Any) -> list[tuple[str, str, str | None]]:
    return h.query("SELECT status, text, platform_message_id FROM outbox WHERE kind = 'final' ORDER BY id")


@pytest.mark.parametrize("stream", ["clean", "cancelled"])
@pytest.mark.parametrize("final_mode", ["edit_preview", "fresh_message"])
@pytest.mark.parametrize("sends", ["succeed", "fail_then_succeed"])
@pytest.mark.parametrize("edits", ["always", "fail_midway", "impossible", "acked_not_rendered"])
async def test_a_recorded_final_is_exactly_what_the_platform_shows_last(
    make_harness: MakeHarness, edits: EditMode, sends: SendMode, final_mode: FinalMode, stream: StreamMode
) -> None:
    platform = EditablePlatformDouble(edits, sends)
    pieces, delay = (12, 0.03) if final_mode == "edit_preview" else (1, 0.0)
    agent = SlowWriter(pieces, delay)
    h = await make_harness(agent=agent, adapter=platform)

    if stream == "cancelled":
        await h.send("first", delivery_id="first")
        await asyncio.wait_for(agent.started.wait(), 10)
        await asyncio.sleep(delay * 4)
        await h.send("/stop", delivery_id="stop")
    await h.send("second", delivery_id="second")
    await h.finals("c1", 1, timeout=20)
    await h.delivery.flush(5)

    rows = _final_rows(h)
    sent = [(text, mid) for status, text, mid in rows if status == "sent"]
    assert sent, rows
    for text, message_id in sent:
        # The heart of it: recorded as delivered => that exact text is what the user sees.
        assert platform.rendered.get(message_id) == text, (text, platform.history)
    assert all(status in ("sent", "failed") for status, _, _ in rows), rows
    finals = [text for text, _ in sent]
    for text in finals:
        shown = [m for m, t in platform.rendered.items() if t == text]
        assert len(shown) == 1, f"final rendered {len(shown)} times: {platform.history}"
    assert not any(t.endswith(PREVIEW_CURSOR) for t in platform.rendered.values()), platform.rendered
    if stream == "cancelled":
        assert not any(t.startswith("answer to first") and " …(stopped)" not in t for t in finals)
    if final_mode == "edit_preview" and edits == "always" and sends == "succeed" and stream == "clean":
        # The final took over the streamed preview instead of adding a message.
        assert len(platform.rendered) == 1 and platform.history[0][0] == "send"
        assert any(op == "edit" for op, _, _ in platform.history)


async def test_previews_never_show_before_an_interval_and_stay_prefix_stable(
    make_harness: MakeHarness,
) -> None:
    platform = EditablePlatformDouble("always", "succeed")
    h = await make_harness(agent=SlowWriter(20, 0.03), adapter=platform)
    await h.send("hello", delivery_id="p1")
    (final,) = await h.finals("c1", 1, timeout=20)
    previews = [t for op, _, t in platform.history if op in ("send", "edit") and t.endswith(PREVIEW_CURSOR)]
    assert len(previews) >= 2, platform.history
    bare = [p.removesuffix(PREVIEW_CURSOR) for p in previews]
    for earlier, later in itertools.pairwise([*bare, final]):
        assert later.startswith(earlier), (earlier, later)


async def test_a_long_final_arrives_as_ordered_parts_within_the_limit(make_harness: MakeHarness) -> None:
    platform = EditablePlatformDouble("always", "succeed", max_length=120)
    h = await make_harness(agent=SlowWriter(60, 0.0), adapter=platform)
    await h.send("long one", delivery_id="long")
    await h.finals("c1", 2, timeout=20)
    await h.delivery.flush(5)
    rows = _final_rows(h)
    assert len(rows) >= 3 and all(status == "sent" for status, _, _ in rows), rows
    assert all(len(text) <= 120 for _, text, _ in rows)
    # Room is left for the duplicate marker, so a resent part still fits.
    assert all(len("(possible repeat) " + text) <= 120 for _, text, _ in rows)
    expected = "answer to long one: " + " ".join(f"word{i}" for i in range(60))
    assert "".join(text for _, text, _ in rows) == expected
    shown = [platform.rendered[mid] for _, _, mid in rows]
    assert shown == [text for _, text, _ in rows]


async def test_silence_marker_sends_nothing_and_records_why(make_harness: MakeHarness) -> None:
    class Silent(SlowWriter):
        async def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]:
            for piece in ("NO_", "REP", "LY"):
                await asyncio.sleep(0.03)
                yield TextDelta(piece)
            yield Final("NO_REPLY")

    platform = EditablePlatformDouble("always", "succeed")
    h = await make_harness(agent=Silent(1, 0), adapter=platform)
    await h.send("say nothing", delivery_id="quiet")
    await wait_until(lambda: h.inbox("quiet")[0] == "done", 10, "the silent turn to finish")
    assert h.inbox("quiet")[2] == "silent"
    assert h.query("SELECT COUNT(*) FROM outbox WHERE kind = 'final'") == [(0,)]
    assert not any(t.startswith("NO_") for t in platform.rendered.values()), platform.history


async def test_a_final_mid_send_at_a_crash_is_shown_again_once_with_the_duplicate_marker(
    make_harness: MakeHarness,
) -> None:
    """The crash is a real one for the store: the row is left 'sending' by an owner that never
    settles it, and a new owner runs the restart recovery the gateway runs at start."""
    platform = EditablePlatformDouble("impossible", "succeed")
    crashed = await make_harness(agent="echo", adapter=platform, start=False)
    await crashed.store.recover(crashed.owner)
    await crashed.admission.admit(crashed.inbound("hello", delivery_id="c1"))
    (claim,) = await crashed.store.claim_sessions(crashed.owner, 1, 30.0, 1)
    outcome = await crashed.runner.run(claim)
    await crashed.store.complete_turn(crashed.owner, outcome, 30.0, 1)
    (row,) = await crashed.store.claim_outbox(10)  # marked 'sending' ...
    await deliver_final(platform, row, "(possible repeat) ")  # ... shown once, then the process dies
    await crashed.store.close()

    h = await make_harness(agent="echo", adapter=platform)  # the restart: recover() then deliver
    await h.finals("c1", 1)
    shown = sorted(platform.rendered.values())
    assert shown == ["(possible repeat) echo: hello", "echo: hello"], platform.history
    assert h.query("SELECT status, possibly_duplicate FROM outbox") == [("sent", 1)]


async def test_a_final_never_attempted_before_a_crash_is_shown_once_without_a_marker(
    make_harness: MakeHarness,
) -> None:
    platform = EditablePlatformDouble("impossible", "succeed")
    crashed = await make_harness(agent="echo", adapter=platform, start=False)
    await crashed.store.recover(crashed.owner)
    await crashed.admission.admit(crashed.inbound("hello", delivery_id="c1"))
    (claim,) = await crashed.store.claim_sessions(crashed.owner, 1, 30.0, 1)
    await crashed.store.complete_turn(crashed.owner, await crashed.runner.run(claim), 30.0, 1)
    await crashed.store.close()  # dies after the commit, before any delivery

    h = await make_harness(agent="echo", adapter=platform)
    await h.finals("c1", 1)
    assert list(platform.rendered.values()) == ["echo: hello"]


async def test_an_agent_that_crashes_mid_stream_leaves_no_cursor_behind(make_harness: MakeHarness) -> None:
    class Crashes(SlowWriter):
        async def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]:
            for piece in ("partial ", "answer ", "then "):
                await asyncio.sleep(0.05)
                yield TextDelta(piece)
            raise RuntimeError("agent bug")

    platform = EditablePlatformDouble("always", "succeed")
    h = await make_harness(agent=Crashes(1, 0), adapter=platform, scheduler={"retry_base": 30.0})
    await h.send("boom", delivery_id="boom")
    await wait_until(lambda: any("(stopped)" in t for t in platform.rendered.values()), 10, "the cleanup")
    assert platform.rendered, platform.history
    assert not any(t.endswith(PREVIEW_CURSOR) for t in platform.rendered.values()), platform.rendered


async def test_a_finished_turn_stopped_before_its_commit_leaves_no_cursor_behind(
    make_harness: MakeHarness,
) -> None:
    """/stop lands between the agent's last word and the commit: the result is discarded, and the
    preview it streamed is closed instead of keeping its cursor forever."""
    from chatgate.domain.errors import LeaseLost

    platform = EditablePlatformDouble("always", "succeed")
    h = await make_harness(agent=SlowWriter(12, 0.03), adapter=platform, start=False)
    await h.store.recover(h.owner)
    await h.admission.admit(h.inbound("first", delivery_id="first"))
    (claim,) = await h.store.claim_sessions(h.owner, 1, 30.0, 1)
    outcome = await h.runner.run(claim)
    assert any(t.endswith(PREVIEW_CURSOR) for t in platform.rendered.values()), "a preview was streamed"
    await h.admission.admit(h.inbound("/stop", delivery_id="stop"))  # cancels the item
    with pytest.raises(LeaseLost):
        await h.store.complete_turn(h.owner, outcome, 30.0, 1)
    await h.runner.discard(outcome)
    assert not any(t.endswith(PREVIEW_CURSOR) for t in platform.rendered.values()), platform.rendered
    assert any(t.endswith("…(stopped)") for t in platform.rendered.values()), platform.rendered


class SilentThinker:
    """An agent that says nothing for a while (a slow tool, a wait for a human), then answers."""

    name = "silent-thinker"

    def __init__(self, silence: float) -> None:
        self.silence = silence

    async def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]:
        await asyncio.sleep(self.silence)
        yield Final("done thinking")

    async def aclose(self) -> None:
        return None


async def test_typing_is_kept_alive_through_a_silent_turn_and_stops_with_it(
    make_harness: MakeHarness,
) -> None:
    platform = EditablePlatformDouble("always", "succeed")
    platform.capabilities = replace(platform.capabilities, typing=True)
    h = await make_harness(
        agent=SilentThinker(0.6), adapter=platform, turns={"typing_interval": 0.05, "typing_delay": 0}
    )
    await h.send("think hard")
    await wait_until(lambda: _final_rows(h) and _final_rows(h)[0][0] == "sent", 10, "the final")
    typing = [e for e in platform.history if e[0] == "typing"]
    assert len(typing) >= 4, platform.history  # refreshed while nothing was shown, not sent once
    await asyncio.sleep(0.3)  # six intervals: a keeper left running would add more
    assert [e for e in platform.history if e[0] == "typing"] == typing


async def test_a_turn_that_answers_at_once_sends_no_typing_indicator(make_harness: MakeHarness) -> None:
    # The reply is the sign of life; an indicator would only take the platform slot ahead of it.
    platform = EditablePlatformDouble("always", "succeed")
    platform.capabilities = replace(platform.capabilities, typing=True)
    h = await make_harness(agent=SilentThinker(0.0), adapter=platform)
    await h.send("quick one")
    await wait_until(lambda: _final_rows(h) and _final_rows(h)[0][0] == "sent", 10, "the final")
    await asyncio.sleep(TYPING_DELAY + 0.3)  # past the delay: a keeper left running would type now
    assert [e[0] for e in platform.history] == ["send"], platform.history


async def test_a_silent_turn_shows_typing_after_the_delay_and_before_its_reply(
    make_harness: MakeHarness,
) -> None:
    platform = EditablePlatformDouble("always", "succeed")
    platform.capabilities = replace(platform.capabilities, typing=True)
    typed_at: list[float] = []
    send_typing = platform.send_typing

    async def stamped(chat_id: str, target: Mapping[str, str]) -> None:
        typed_at.append(time.monotonic())
        await send_typing(chat_id, target)

    platform.send_typing = stamped  # type: ignore[method-assign]
    h = await make_harness(agent=SilentThinker(1.5), adapter=platform)
    sent = time.monotonic()
    await h.send("think hard")
    await wait_until(lambda: _final_rows(h) and _final_rows(h)[0][0] == "sent", 10, "the final")
    ops = [e[0] for e in platform.history]
    assert ops[0] == "typing" and ops[-1] == "send", ops  # shown while silent, before the reply
    assert typed_at[0] - sent >= TYPING_DELAY - 0.05, typed_at[0] - sent  # not at once: after the delay
