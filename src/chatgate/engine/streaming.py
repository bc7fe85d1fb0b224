"""The stream consumer: shows a turn's reply while the agent writes it.

Draft-capable adapters (the web chat) get prefix-stable drafts. Editable
platforms get one preview message that is edited at most once per
``edit_interval``, always with a cursor, so a preview can never be mistaken for
the final: the final is the outbox row, and it edits the preview to the exact
final text (``engine.ports.deliver_final``). On a platform whose stream is the
message (``capabilities.native_stream``: Slack's chat.startStream), the preview
is that stream, opened and extended with the reply so far and no cursor, and the
final's edit seals it. Previews are best effort: a rate-limited,
failing or slow platform only makes them sparser, never delays the turn.

A preview whose slot in the rate budget is taken books the next free one (the first as far
ahead as typing, later ones within one interval) and shows the newest text when it comes:
updates meanwhile are coalesced into that one call. The end of the turn drops a preview
still waiting and gives its slot back, so the final never waits behind a preview that did
not go.

The preview's message id is handed to ``on_message`` as soon as the platform names it,
so the turn records it durably: a process killed mid-stream leaves its successor the
message to take over instead of a cursor left in the chat forever. A first send that
the platform answers only after the call timeout keeps running and is still adopted (the
end of the turn gives it one more call timeout), so it does not become a second message
next to the final.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from chatgate.domain.outbound import PREVIEW_CURSOR, Delivered, DeliveryResult, LengthUnit, RetryLater
from chatgate.domain.source import Source, egress_target
from chatgate.domain.splitting import measure
from chatgate.domain.tasks import cancel_and_wait
from chatgate.engine.ports import Adapter, EditablePlatform, StreamingPlatform, editable, native_streaming
from chatgate.engine.ratelimit import Booking, RateBudget
from chatgate.engine.task_cards import TaskCard
from chatgate.engine.typing_indicators import TypingIndicators

log = logging.getLogger(__name__)
TYPING_EVERY = 4.0
TYPING_PATIENCE = 0.25
"""How far ahead a turn's typing indicator may book its slot; a later one is skipped (the
next interval asks again), leaving the slots to previews, which show more."""
TYPING_DELAY = 0.5
"""A turn that shows something (or ends with its reply free to go) sooner sends no typing indicator."""
STOPPED_SUFFIX = " …(stopped)"


async def close_preview(
    platform: EditablePlatform,
    chat_id: str,
    message_id: str,
    text: str,
    target: dict[str, str],
    timeout: float = 10.0,
) -> None:
    """Replace a preview that will never become a final; delete it if it cannot be edited."""
    with contextlib.suppress(Exception):
        edited = await asyncio.wait_for(platform.edit_message(chat_id, message_id, text, target), timeout)
        if not isinstance(edited, Delivered):
            await asyncio.wait_for(platform.delete_message(chat_id, message_id, target), timeout)


@dataclass
class PreviewState:
    message_id: str | None = None
    acked_text: str | None = None
    """The last preview payload the platform acknowledged (cursor included)."""
    edits: int = 0


@dataclass
class _Booked:
    """A preview waiting for the slot it booked, or on its way: it shows the newest text."""

    text: str
    booking: Booking | None
    """The slot while the preview still waits for it (None once it departs)."""
    task: asyncio.Task[None] | None = None


class StreamConsumer:
    def __init__(
        self,
        adapter: Adapter | None,
        source: Source,
        reply_to: str | None,
        budget: RateBudget,
        *,
        draft_interval: float | None = None,
        silence_marker: str = "",
        call_timeout: float = 10.0,
        on_update: Callable[[str, str], None] = lambda platform, op: None,
        previews: bool = True,
        typing_every: float = TYPING_EVERY,
        typing_delay: float = TYPING_DELAY,
        on_message: Callable[[str], Awaitable[object]] | None = None,
        hold: Callable[[], Awaitable[bool]] | None = None,
        typist: TypingIndicators | None = None,
    ) -> None:
        self._on_update = on_update
        self._on_message = on_message
        self._hold = hold
        """Nothing is shown while this says so (a resume notice that must come first)."""
        self._first_send: asyncio.Task[DeliveryResult] | None = None
        self._first_payload = ""
        self._adapter = adapter
        self._source = source
        self._reply_to = reply_to
        self._budget = budget
        self._silence = silence_marker
        self._timeout = call_timeout
        caps = adapter.capabilities if adapter is not None else None
        self._drafts = bool(caps and caps.drafts) and previews
        self._editable: EditablePlatform | None = editable(adapter)
        self._stream: StreamingPlatform | None = native_streaming(adapter) if self._editable else None
        """The stream is the message: previews open and extend it, without a cursor."""
        self._cursor = "" if self._stream is not None else PREVIEW_CURSOR
        self._previews = previews
        self._typing = bool(caps and caps.typing)
        if caps is None:
            self._interval = 1.0
        elif self._drafts:
            self._interval = draft_interval if draft_interval is not None else caps.draft_interval
        else:
            self._interval = caps.edit_interval
        self._unit: LengthUnit = caps.length_unit if caps else "chars"
        self._max_preview = (caps.max_length if caps else 4096) - measure(self._cursor, self._unit)
        self._started = time.monotonic()
        self._last_update = self._started
        self._typing_every = typing_every
        self._typing_delay = max(0.0, typing_delay)
        self._own_typist = typist is None
        self._typist = typist or TypingIndicators(budget, call_timeout)
        self._last_typing = -1.0 - typing_every
        """When the last indicator was booked (negative: none yet)."""
        self._keeper: asyncio.Task[None] | None = None
        self._keeper_due: asyncio.TimerHandle | None = None
        self._booked: _Booked | None = None
        self.state = PreviewState()
        self.tasks = TaskCard(adapter, source, reply_to, call_timeout)
        """The turn's tool calls as a live card, where the platform shows one; stopped by ``close``."""

    @property
    def status_lines(self) -> bool:
        """Whether a running tool may show as a status line in the preview: not in a native stream
        (append-only: the line could never be taken back) and not where a task card shows it."""
        caps = self._adapter.capabilities if self._adapter is not None else None
        return self._stream is None and not self.tasks.native and (caps is None or caps.status_lines)

    @property
    def _patience(self) -> float:
        """How far ahead a preview books its slot: the first, the turn's sign of life, as far as
        a typing indicator does (``typing_every``); later ones at most one interval."""
        return max(self._interval, self._typing_every) if self.state.message_id is None else self._interval

    @property
    def _chat(self) -> str:
        return self._source.chat_id or ""

    @property
    def _platform(self) -> str:
        return self._source.platform

    async def begin(self) -> None:
        if self._typing_delay == 0:
            await self._maybe_type()
        if self._typing and self._editable is not None:
            # A turn can be silent for long (a slow tool, a prompt waiting for a human): keep the
            # platform's typing indicator alive until the first preview or the end of the turn.
            # A fast turn sends none: its reply is the sign of life, and it would wait behind the
            # indicator's platform slot. (A fast turn whose reply then waits for a rate slot gets
            # its indicator from delivery: ``DeliveryWorker._pace``.) A timer, not a sleeping
            # task, waits for the delay: most turns end before it and cost no task.
            self._keeper_due = asyncio.get_running_loop().call_later(self._typing_delay, self._start_keeper)

    def _start_keeper(self) -> None:
        self._keeper_due = None
        self._keeper = asyncio.create_task(self._keep_typing(), name="chatgate-typing")

    async def close(self) -> None:
        """The turn is over (answered, failed or stopped): no more typing; a first preview
        send still unanswered gets one more call timeout to name its message, for the final."""
        if self._keeper_due is not None:
            self._keeper_due.cancel()
            self._keeper_due = None
        if self._keeper is not None:
            await cancel_and_wait([self._keeper])
            self._keeper = None
        await self._drop_booked()
        await self._settle_first_send(self._timeout, last=True)
        await self.tasks.stop()
        if self._own_typist:  # nobody outlives this turn to own its indicators
            await self._typist.aclose()

    async def _keep_typing(self) -> None:
        while self.state.message_id is None:
            await self._maybe_type()
            await asyncio.sleep(self._typing_every)

    async def update(self, text: str, *, force: bool = False) -> None:
        """The reply so far; called on every delta. ``force``: a status change (a tool started or
        finished) is shown now rather than at the next interval (still within the rate budget)."""
        if self._booked is not None:
            self._coalesce(self._booked, text)
            return
        now = time.monotonic()
        if now - self._last_update < self._interval and not force:
            await self._maybe_type()
            return
        if self._silence and self._silence.startswith(text.strip()):
            return  # this may still become the silence marker: show nothing yet
        self._last_update = now
        if not await self._clear_to_show():
            return
        if self._drafts and self._adapter is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._adapter.draft(self._source, self._reply_to, text), self._timeout)
                self._on_update(self._platform, "draft")
        elif self._previews and self._editable is not None and measure(text, self._unit) <= self._max_preview:
            await self._preview(text + self._cursor)

    def _coalesce(self, booked: _Booked, text: str) -> None:
        """A preview waits for its booked slot: it will show this newer text instead (one call)."""
        silent = self._silence and self._silence.startswith(text.strip())
        if not silent and measure(text, self._unit) <= self._max_preview:
            booked.text = text + self._cursor

    async def _clear_to_show(self) -> bool:
        if self._hold is None:
            return True
        try:
            held = await self._hold()
        except Exception as exc:  # cannot tell: show nothing yet, ask again next interval
            log.debug("cannot tell whether previews may show: %s", exc)
            return False
        if not held:
            self._hold = None
        return not held

    async def interrupted(self) -> None:
        """The turn was cancelled: take the cursor off the preview so it cannot look unfinished-forever."""
        await self._drop_booked()
        await self._settle_first_send(self._timeout, last=True)
        if self._editable is None or self.state.message_id is None or self.state.acked_text is None:
            return
        text = self.state.acked_text.removesuffix(self._cursor) + STOPPED_SUFFIX
        await close_preview(
            self._editable,
            self._chat,
            self.state.message_id,
            text,
            egress_target(self._source),
            self._timeout,
        )

    async def _maybe_type(self) -> None:
        if not self._typing or self.state.message_id is not None or self._editable is None:
            return
        now = time.monotonic()
        if now - self._last_typing < self._typing_every:
            return
        if now - self._started < self._typing_delay:
            return
        # The indicator takes a booked platform slot (it waits its turn instead of being skipped
        # when the platform is busy) and may go out after this turn ended: the reply waits too.
        # Only a near slot: with many turns at once, indicators booked seconds ahead filled the
        # budget until the finals, and no reply showed a preview (issue 33, item 3).
        if self._typist.announce(
            self._editable,
            self._platform,
            self._chat,
            egress_target(self._source),
            patience=min(self._typing_every, TYPING_PATIENCE),
            wanted=lambda: self.state.message_id is None,
        ):
            self._last_typing = now

    async def _preview(self, payload: str) -> None:
        assert self._editable is not None
        if self._first_send is not None:
            await self._settle_first_send(0)
            if self._first_send is not None:
                return  # the first send is still unanswered: a second one would be a second message
        if self._budget.delay(self._platform, self._chat) > self._patience:
            return  # no slot near enough (a saturated or paused platform): ask at the next interval
        booking = self._budget.book(self._platform, self._chat)
        if booking.wait <= 0:
            await self._show(payload)
            return
        # Another call has the next slot (often just ~50 ms ahead): this preview takes the one
        # after it and shows the newest text then, instead of being skipped (issue 33).
        booked = self._booked = _Booked(payload, booking)
        booked.task = asyncio.create_task(
            self._show_at_slot(booked, booking.wait), name="chatgate-preview-slot"
        )

    async def _show_at_slot(self, booked: _Booked, wait: float) -> None:
        try:
            while wait > 0:
                await asyncio.sleep(wait)
                wait = self._budget.depart(self._platform)
            booked.booking = None  # departed: from here on the call goes, and the final waits for it
            if self._budget.held(self._platform, self._chat) > 0:
                return  # the platform asked for a pause meanwhile
            self._last_update = time.monotonic()
            await self._show(booked.text)
        finally:
            self._booked = None

    async def _drop_booked(self) -> None:
        """The turn is over: a preview still waiting for its slot is dropped and the slot given
        back (the final wins, and need not keep its spacing); one already on its way is waited
        for, so that it lands before the final and a first send's message id is known."""
        booked = self._booked
        if booked is None or booked.task is None:
            return
        if booked.booking is not None:
            await cancel_and_wait([booked.task])
            self._budget.release(booked.booking)
            booked.booking = None
            return
        with contextlib.suppress(Exception):
            await booked.task

    async def _show(self, payload: str) -> None:
        """One preview call in a slot already booked: the first send, or an edit (or append)."""
        assert self._editable is not None
        target = egress_target(self._source)
        if self.state.message_id is None:
            # Kept running past the call timeout: a late answer still names the preview's message.
            opening = (
                self._stream.start_stream(self._chat, payload, target, self._reply_to)
                if self._stream is not None
                else self._editable.send_message(self._chat, payload, target, self._reply_to)
            )
            self._first_send = asyncio.create_task(opening, name="chatgate-preview-send")
            self._first_payload = payload
            await self._settle_first_send(self._timeout)
            return
        try:
            call = (
                self._stream.append_stream(self._chat, self.state.message_id, payload, target)
                if self._stream is not None
                else self._editable.edit_message(self._chat, self.state.message_id, payload, target)
            )
            async with asyncio.timeout(self._timeout):
                result = await call
        except Exception as exc:  # previews are best effort
            log.debug("preview failed: %s", exc)
            return
        if isinstance(result, Delivered):
            self.state.edits += 1
            self._on_update(self._platform, "edit")
            self.state.acked_text = payload
        elif isinstance(result, RetryLater) and result.scope is not None:
            self._budget.penalize(self._platform, self._chat, result.retry_after, result.scope)

    async def _settle_first_send(self, wait: float, *, last: bool = False) -> None:
        """Adopt the first send's answer once it came (waiting up to ``wait`` seconds); at the
        end of the turn (``last``) a send still unanswered is given up."""
        send = self._first_send
        if send is None:
            return
        if not send.done() and wait > 0:
            await asyncio.wait({send}, timeout=wait)
        if not send.done():
            if last:
                await cancel_and_wait([send])
                self._first_send = None
                log.warning("a preview send got no answer in time; if the platform showed it, it stays")
            return
        self._first_send = None
        try:
            result = send.result()
        except Exception as exc:  # previews are best effort
            log.debug("preview failed: %s", exc)
            return
        if isinstance(result, Delivered):
            await self._adopt(result.platform_message_id, self._first_payload)
        elif isinstance(result, RetryLater) and result.scope is not None:
            self._budget.penalize(self._platform, self._chat, result.retry_after, result.scope)

    async def _adopt(self, message_id: str | None, payload: str) -> None:
        if not message_id:
            return
        self.state.message_id = message_id
        self.state.acked_text = payload
        self._on_update(self._platform, "send")
        if self._on_message is not None:
            try:
                await self._on_message(message_id)
            except Exception as exc:  # the preview still works; only a crash would orphan it
                log.warning("could not record the preview message: %s", exc)
