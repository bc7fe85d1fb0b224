"""One rate budget per gateway, shared by deliveries, previews and typing indicators.

Every call to a platform books a **slot** first, and the slot is booked in the same
step that finds it (``take``: nothing awaits between the two), so callers that ask at
the same moment get different slots instead of all seeing one wait and going together.
A caller that must wait sleeps until its slot; nobody else can take it meanwhile.

Three limits shape a message's slot (any may be off): one chat gets at most one
message per ``chat_min_interval``; a group chat (as the adapter classifies it) at most
``group_max_per_minute`` messages in any 60 s; and the whole platform at most
``max_rate`` calls in any sliding second (``platform_window``): a burst up to the rate goes
at once, as a bare bot's would, and the next call waits until the oldest of the window
has left it. A slot may fall before later booked ones, so a late chat's slot never
holds back an earlier one of another chat. A typing indicator takes a platform slot
only: it is not a message, and it must not delay the reply.

A platform's ``retry_after`` pauses what it was about: the chat, or the whole platform.
A platform that does not say (Telegram) implies a platform-wide limit when a second
chat is told to wait while the first still waits; then the platform pauses too, and
for a minute after that every 429 pauses the platform at once and calls go one
``1 / max_rate`` apart instead of in bursts (the platform's real limit is lower than
the configured rate: a burst would meet it as a burst of 429s).
"""

from __future__ import annotations

import bisect
import contextlib
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Literal

import msgspec

from chatgate.domain.outbound import RateScope

CallKind = Literal["message", "typing"]
GROUP_WINDOW = 60.0
SWEEP = 4
"""Chats a new chat's booking looks at for spent state: more than the one it adds, so the
budget shrinks back to its live chats."""
PLATFORM_MEMORY = 60.0
"""After a platform-wide pause, a 429 within this long is taken as platform-wide at once."""
WINDOW_GUARD = 0.05
"""Added to the one-second window. A call is counted when it is booked, but it reaches the
platform a little later, and the first of a burst latest (a burst of 30 on Telegram booked its
calls within a millisecond and they arrived over 27 ms, the first of them last to be written):
a window measured where the calls arrive must still hold no more than the rate. It costs 5 %
of the rate at saturation (28.6 of Telegram's 30 calls a second)."""


class PlatformLimits(msgspec.Struct, frozen=True):
    chat_min_interval: float = 0.0
    max_rate: float | None = None
    group_max_per_minute: int = 0
    """0: no per-group limit."""
    is_group: Callable[[str], bool] | None = None
    """Which chat ids are groups (the adapter knows; the engine does not)."""


class Booking(msgspec.Struct, frozen=True):
    """A booked slot (``RateBudget.book``): ``wait`` seconds from when it was booked."""

    platform: str
    chat_id: str
    kind: CallKind
    slot: float
    wait: float
    before: float
    """The chat's next message slot before this booking (``release`` restores it)."""


class _Chat(msgspec.Struct):
    next_message: float = 0.0
    held_until: float = 0.0
    recent: deque[float] | None = None
    """Booked message slots of a group chat within the last minute (ascending); None for a chat
    that is not a group (an empty deque is 600 bytes, and most chats are not groups)."""

    def spent(self, now: float) -> bool:
        """Nothing of this chat's state still applies: a new ``_Chat`` would book the same slots."""
        return (
            self.next_message <= now
            and self.held_until <= now
            and not (self.recent and self.recent[-1] > now - GROUP_WINDOW)
        )


class _Platform(msgspec.Struct):
    limits: PlatformLimits = PlatformLimits()
    booked: list[float] = msgspec.field(default_factory=list)
    """Booked platform slots not yet long past (ascending)."""
    held_until: float = 0.0
    last_held_chat: str | None = None
    last_held_until: float = 0.0
    last_platform_pause: float = float("-inf")
    departed: deque[float] = msgspec.field(default_factory=deque)
    """When calls really went, within the last second (a slot is a plan; a late wake-up is not)."""


class RateBudget:
    """The slots of every platform and chat.

    A chat's state is kept only while some of it applies (a slot or a pause still ahead, a
    group's minute not over): the chats least recently booked are dropped once spent, so the
    budget holds the chats of the last few seconds, not every chat the gateway ever answered
    (``max_chats`` bounds it even while all of them are live)."""

    def __init__(self, max_chats: int = 100_000) -> None:
        self._platforms: dict[str, _Platform] = {}
        self._chats: OrderedDict[tuple[str, str], _Chat] = OrderedDict()
        self._max_chats = max_chats

    @property
    def chats_held(self) -> int:
        """How many chats' state the budget holds now."""
        return len(self._chats)

    def configure(self, platform: str, limits: PlatformLimits) -> None:
        self._platform(platform).limits = limits

    def limits(self, platform: str) -> PlatformLimits:
        return self._platform(platform).limits

    def delay(
        self, platform: str, chat_id: str, kind: CallKind = "message", now: float | None = None
    ) -> float:
        """Seconds until the earliest slot a call to this chat could book now (0: it may go now)."""
        now = time.monotonic() if now is None else now
        return max(0.0, self._find(platform, chat_id, kind, now) - now)

    def take(
        self, platform: str, chat_id: str, kind: CallKind = "message", now: float | None = None
    ) -> float:
        """Book the earliest slot for a call to this chat; returns the seconds to wait for it."""
        return self.book(platform, chat_id, kind, now).wait

    def book(
        self, platform: str, chat_id: str, kind: CallKind = "message", now: float | None = None
    ) -> Booking:
        """``take``, keeping what ``release`` needs to give the slot back if the call never goes."""
        now = time.monotonic() if now is None else now
        slot = self._find(platform, chat_id, kind, now)
        state = self._platform(platform)
        before = 0.0
        if state.limits.max_rate:
            bisect.insort(state.booked, slot)
            if slot <= now:
                state.departed.append(now)  # it goes now: the caller does not wait
        if kind == "message":
            chat = self._chat(platform, chat_id, now)
            before = chat.next_message
            chat.next_message = max(chat.next_message, slot + state.limits.chat_min_interval)
            if self._is_group(state, chat_id):
                if chat.recent is None:
                    chat.recent = deque()
                chat.recent.append(slot)
        return Booking(platform, chat_id, kind, slot, max(0.0, slot - now), before)

    def release(self, booking: Booking) -> None:
        """Give back a slot booked ahead whose call will not go (a preview its final overtook):
        later calls may take it, and the chat's next message slot goes back to where it was if
        nothing else of the chat was booked after it. Only for a call that has not departed."""
        state = self._platforms.get(booking.platform)
        if state is None:
            return
        booked = state.booked
        i = bisect.bisect_left(booked, booking.slot)
        if i < len(booked) and booked[i] == booking.slot:
            del booked[i]
        chat = self._chats.get((booking.platform, booking.chat_id))
        if booking.kind != "message" or chat is None:
            return
        if chat.next_message == booking.slot + state.limits.chat_min_interval:
            chat.next_message = booking.before
        if chat.recent is not None:
            with contextlib.suppress(ValueError):
                chat.recent.remove(booking.slot)

    def depart(self, platform: str, now: float | None = None) -> float:
        """After waiting for a slot: seconds more to wait before the call really goes (0: go now).

        Several slots may come due at once after the event loop stalled; their calls still
        never go more than the rate within any window (``platform_window``).
        """
        now = time.monotonic() if now is None else now
        state = self._platforms.get(platform)
        if state is None or not state.limits.max_rate:
            return 0.0
        ready = self._departure_free(state, now)
        if ready > now:
            return ready - now
        state.departed.append(now)
        return 0.0

    def held(self, platform: str, chat_id: str, now: float | None = None) -> float:
        """Seconds left of a pause the platform imposed on this chat or on itself (0: none)."""
        now = time.monotonic() if now is None else now
        state = self._platforms.get(platform)
        chat = self._chats.get((platform, chat_id))
        until = max(state.held_until if state else 0.0, chat.held_until if chat else 0.0)
        return max(0.0, until - now)

    def penalize(
        self, platform: str, chat_id: str, seconds: float, scope: RateScope = "chat", now: float | None = None
    ) -> RateScope:
        """The platform said: not before ``seconds`` from now. Returns the scope it was taken for."""
        now = time.monotonic() if now is None else now
        until = now + seconds
        state = self._platform(platform)
        chat = self._chat(platform, chat_id, now)
        chat.held_until = max(chat.held_until, until)
        if scope == "chat" and (  # the scope was not said: two chats waiting at once is the bot's limit
            (state.last_held_chat not in (None, chat_id) and state.last_held_until > now)
            or now - state.last_platform_pause < PLATFORM_MEMORY
        ):
            scope = "platform"  # a second chat told to wait while the first still waits: the bot's limit
        if scope == "platform":
            state.held_until = max(state.held_until, until)
            state.last_platform_pause = now
        if scope != "channel":  # a channel's own limit says nothing of the bot's
            state.last_held_chat, state.last_held_until = chat_id, max(until, state.last_held_until)
        return scope

    # ------------------------------------------------------------ internals

    def _platform(self, platform: str) -> _Platform:
        state = self._platforms.get(platform)
        if state is None:
            state = self._platforms[platform] = _Platform()
        return state

    def _chat(self, platform: str, chat_id: str, now: float) -> _Chat:
        key = (platform, chat_id)
        chat = self._chats.get(key)
        if chat is None:
            self._drop_spent(now)
            chat = self._chats[key] = _Chat()
            if len(self._chats) > self._max_chats:
                self._chats.popitem(last=False)
        else:
            self._chats.move_to_end(key)
        return chat

    def _drop_spent(self, now: float) -> None:
        """Look at the least recently booked chats (``SWEEP`` of them): drop each that is spent,
        and move one still live (a long pause, a group's minute) to the back, so that it does not
        keep the spent ones behind it. Each new chat pays at most ``SWEEP`` looks. At the cap a
        live chat stays where it is: the cap then forgets the least recently booked one."""
        chats = self._chats
        full = len(chats) >= self._max_chats  # the cap evicts the head: keep it the least recent
        for _ in range(min(SWEEP, len(chats))):
            key, oldest = next(iter(chats.items()))
            if oldest.spent(now):
                del chats[key]
            elif full:
                return
            else:
                chats.move_to_end(key)

    @staticmethod
    def _is_group(state: _Platform, chat_id: str) -> bool:
        limits = state.limits
        return limits.group_max_per_minute > 0 and limits.is_group is not None and limits.is_group(chat_id)

    def _find(self, platform: str, chat_id: str, kind: CallKind, now: float) -> float:
        state = self._platforms.get(platform) or _Platform()
        earliest = max(now, state.held_until)
        chat = self._chats.get((platform, chat_id))
        if chat is not None:
            earliest = max(earliest, chat.held_until)
            if kind == "message":
                earliest = max(earliest, chat.next_message, self._group_free(state, chat, now))
        return self._platform_slot(state, earliest, now)

    def _group_free(self, state: _Platform, chat: _Chat, now: float) -> float:
        """When the group's minute has room for one more message (its slots are booked in order)."""
        limit = state.limits.group_max_per_minute
        recent = chat.recent
        if recent is None:
            return 0.0
        while recent and recent[0] <= now - GROUP_WINDOW:
            recent.popleft()
        if limit <= 0 or len(recent) < limit:
            return 0.0
        return recent[-limit] + GROUP_WINDOW

    @staticmethod
    def _departure_free(state: _Platform, now: float) -> float:
        """The earliest time a call may really go, by the calls that really went: a slot is a
        plan, and calls whose slots passed while the loop stalled must not all leave at once."""
        calls, window = _window(state, now)
        departed = state.departed
        while departed and departed[0] <= now - window:
            departed.popleft()
        if len(departed) < calls:
            return now
        return max(now, departed[-calls] + window)

    def _platform_slot(self, state: _Platform, earliest: float, now: float) -> float:
        """The earliest time >= ``earliest`` where one more call keeps every window within the rate."""
        rate = state.limits.max_rate
        if not rate:
            return earliest
        calls, window = _window(state, now)
        earliest = max(earliest, self._departure_free(state, now))
        booked = state.booked
        del booked[: bisect.bisect_left(booked, now - window)]  # slots that can no longer share a window
        return first_fit(booked, earliest, calls, window)


def platform_window(rate: float) -> tuple[int, float]:
    """How many calls, in how long a window, the platform's rate allows: ``int(rate)`` in a
    second (plus ``WINDOW_GUARD``) from one call a second up, and one call in ``1 / rate``
    seconds below that (an email account's few a minute stay evenly spaced)."""
    if rate >= 1.0:
        return int(rate), 1.0 + WINDOW_GUARD
    return 1, 1.0 / rate


def _window(state: _Platform, now: float) -> tuple[int, float]:
    """The platform's window, or one call a spacing within ``PLATFORM_MEMORY`` of a platform-wide
    pause: a limit stricter than the configured rate then costs a 429 or two, not a burst of them."""
    rate = state.limits.max_rate or 0.0
    if now - state.last_platform_pause < PLATFORM_MEMORY:
        return 1, 1.0 / rate
    return platform_window(rate)


def first_fit(booked: list[float], earliest: float, calls: int, window: float) -> float:
    """The earliest time >= ``earliest`` that, added to the sorted ``booked`` slots, leaves no
    ``calls + 1`` of them closer together than ``window``."""
    slot = earliest
    while (later := _crowded(booked, slot, calls, window)) is not None:
        slot = later
    return slot


def _crowded(booked: list[float], slot: float, calls: int, window: float) -> float | None:
    """None when ``slot`` fits; else a later time before which it cannot (any time before
    ``first + window`` still crowds the group; a slot leading a full group can only move to the
    next booked one)."""
    at = bisect.bisect_right(booked, slot)
    for start in range(max(0, at - calls), min(at, len(booked) - calls) + 1):
        end = start + calls  # the group: booked[start:end] with the slot put in at ``at``
        first = booked[start] if start < at else slot
        last = slot if end == at else booked[end - 1]
        if last - first < window - 1e-9:
            return first + window if start < at else booked[at]
    return None


class RateOverride(msgspec.Struct, frozen=True):
    """An operator's rate limits for one platform (``delivery.rate_limits``); None keeps the adapter's."""

    chat_min_interval: float | None = None
    max_rate: float | None = None
    """0 removes the platform-wide limit."""
    group_max_per_minute: int | None = None

    def apply(self, limits: PlatformLimits) -> PlatformLimits:
        interval, group = self.chat_min_interval, self.group_max_per_minute
        return PlatformLimits(
            chat_min_interval=limits.chat_min_interval if interval is None else interval,
            max_rate=limits.max_rate if self.max_rate is None else (self.max_rate or None),
            group_max_per_minute=limits.group_max_per_minute if group is None else group,
            is_group=limits.is_group,
        )
