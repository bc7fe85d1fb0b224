"""The rate budget on its own clock: slots are booked where they are found, never shared.

Every call passes ``now``, so these are exact statements about the schedule, not timings.
"""

from __future__ import annotations

import itertools
import random

import pytest

from chatgate.engine.ratelimit import WINDOW_GUARD, PlatformLimits, RateBudget, RateOverride, first_fit

TG = "telegram"
W = 1.0 + WINDOW_GUARD
"""The platform's window: ``max_rate`` calls in any ``W`` seconds."""


def _budget(**limits: object) -> RateBudget:
    budget = RateBudget()
    budget.configure(TG, PlatformLimits(**limits))  # type: ignore[arg-type]
    return budget


def test_callers_asking_at_once_get_the_rate_at_once_and_the_rest_the_next_windows() -> None:
    """A burst up to the rate goes at once, as a bare bot's would (issue 33); the callers past
    it get slots in the next windows, each booked where it was found, never one shared wait."""
    budget = _budget(chat_min_interval=1.0, max_rate=10.0)
    waits = [budget.take(TG, f"c{n}", now=100.0) for n in range(25)]
    assert waits == pytest.approx([0.0] * 10 + [W] * 10 + [2 * W] * 5), waits
    starts = sorted(100.0 + w for w in waits)
    for i in range(len(starts) - 10):
        assert starts[i + 10] - starts[i] >= 1.0, "more than 10 calls in one second"


def test_a_slot_fits_where_no_window_would_hold_more_than_the_rate() -> None:
    assert first_fit([], 5.0, 3, 1.0) == 5.0
    assert first_fit([5.0, 5.0], 5.0, 3, 1.0) == 5.0  # the third of three
    assert first_fit([5.0, 5.0, 5.0], 5.0, 3, 1.0) == 6.0  # the window is full until the first leaves
    # Before three booked within a second, a fourth would crowd them; 6.2 is the first time no
    # window of a second holds four (5.2 has left it).
    assert first_fit([5.2, 5.3, 5.9], 5.0, 3, 1.0) == pytest.approx(6.2)
    assert first_fit([5.2, 5.3, 7.0], 5.0, 3, 1.0) == 5.0, "room before the later call"
    assert first_fit([1.0, 3.5], 0.5, 1, 1.0) == 2.0, "one a window: between booked ones where a gap allows"
    assert first_fit([1.0, 2.2], 0.5, 1, 1.0) == 3.2, "and after them where none does"


def test_a_chat_waiting_for_its_own_interval_does_not_hold_back_other_chats() -> None:
    budget = _budget(chat_min_interval=1.0, max_rate=10.0)
    assert budget.take(TG, "a", now=0.0) == 0.0
    assert budget.take(TG, "a", now=0.0) == 1.0  # a's next message: a second later
    assert budget.take(TG, "b", now=0.0) == 0.0  # b goes now, in the window's room
    assert budget.delay(TG, "c", now=0.0) == 0.0


def test_a_group_gets_at_most_its_messages_in_any_minute() -> None:
    budget = _budget(group_max_per_minute=3, is_group=lambda chat: chat.startswith("-"))
    waits = [budget.take(TG, "-100", now=10.0) for _ in range(4)]
    assert waits == [0.0, 0.0, 0.0, 60.0]
    assert budget.delay(TG, "42", now=10.0) == 0.0, "a private chat is not a group"
    assert budget.delay(TG, "-100", now=69.0) > 0.0
    assert budget.delay(TG, "-100", now=130.0) == 0.0


def test_typing_takes_a_platform_slot_but_not_the_chats_message_budget() -> None:
    budget = _budget(chat_min_interval=5.0, max_rate=1.0)
    assert budget.take(TG, "a", "typing", now=0.0) == 0.0
    assert budget.take(TG, "a", now=0.0) == W  # after the typing's platform slot only, not 5 s
    assert budget.delay(TG, "a", now=0.0) == W + 5.0  # the message spent the chat's interval
    budget.penalize(TG, "a", 5.0, now=0.0)
    assert budget.delay(TG, "a", "typing", now=1.0) == 4.0  # but typing honours a penalty


def test_a_chat_penalty_holds_only_that_chat() -> None:
    budget = _budget(max_rate=30.0)
    assert budget.penalize(TG, "a", 4.0, now=0.0) == "chat"
    assert budget.held(TG, "a", now=1.0) == 3.0
    assert budget.held(TG, "b", now=1.0) == 0.0
    assert budget.delay(TG, "b", now=1.0) == 0.0


def test_a_second_chat_told_to_wait_while_the_first_waits_pauses_the_platform() -> None:
    budget = _budget(max_rate=30.0)
    budget.penalize(TG, "a", 2.0, now=0.0)
    assert budget.penalize(TG, "b", 1.0, now=0.5) == "platform"
    assert budget.held(TG, "c", now=1.0) == 0.5
    assert budget.delay(TG, "c", now=1.0) == 0.5
    # For a while after, any 429 is read as the platform's at once.
    assert budget.penalize(TG, "d", 1.0, now=10.0) == "platform"
    assert budget.held(TG, "e", now=10.0) == 1.0


def test_channel_scoped_429s_hold_only_their_channels_however_many_at_once() -> None:
    budget = _budget(max_rate=50.0)
    assert budget.penalize(TG, "a", 5.0, "channel", now=0.0) == "channel"
    assert budget.penalize(TG, "b", 5.0, "channel", now=0.5) == "channel", "never the platform's"
    assert budget.held(TG, "c", now=1.0) == 0.0 and budget.delay(TG, "c", now=1.0) == 0.0
    assert budget.held(TG, "a", now=1.0) == 4.0 and budget.held(TG, "b", now=1.0) == 4.5
    # A channel's own limit says nothing of the bot's: an unscoped 429 now is still one chat's.
    assert budget.penalize(TG, "d", 1.0, now=1.0) == "chat"


def test_a_platform_scoped_retry_after_pauses_every_chat_at_once() -> None:
    budget = _budget(max_rate=30.0)
    assert budget.penalize(TG, "a", 3.0, "platform", now=0.0) == "platform"
    assert budget.delay(TG, "z", now=1.0) == 2.0
    assert budget.delay("web", "z", now=1.0) == 0.0, "another platform is not slowed"


def test_an_operator_override_replaces_only_the_keys_it_sets() -> None:
    declared = PlatformLimits(chat_min_interval=1.0, max_rate=30.0, group_max_per_minute=20)
    assert RateOverride(max_rate=100.0).apply(declared) == PlatformLimits(1.0, 100.0, 20)
    assert RateOverride(max_rate=0.0, group_max_per_minute=0).apply(declared) == PlatformLimits(1.0, None, 0)


def test_a_released_slot_is_free_again_and_the_chat_is_not_held_by_a_call_that_never_went() -> None:
    """A preview books a slot ahead and its final overtakes it (issue 33, item 3): the slot
    is given back, so the next call takes it instead of waiting behind it."""
    budget = _budget(chat_min_interval=3.0, max_rate=1.0)
    assert budget.take(TG, "other", now=0.0) == 0.0
    preview = budget.book(TG, "a", now=0.0)
    assert preview.wait == W  # behind the other chat's call, not skipped
    assert budget.delay(TG, "a", now=0.0) == W + 3.0  # the chat's own interval
    assert budget.delay(TG, "b", now=0.0) == 2 * W
    budget.release(preview)
    assert budget.delay(TG, "a", now=0.0) == W, "the final would wait behind a ghost"
    assert budget.delay(TG, "b", now=0.0) == W, "the slot was not given back"


def test_a_release_keeps_what_was_booked_after_it_and_gives_back_the_group_quota() -> None:
    budget = _budget(chat_min_interval=1.0, max_rate=10.0, group_max_per_minute=2, is_group=lambda c: True)
    first = budget.book(TG, "g", now=0.0)
    second = budget.book(TG, "g", now=0.0)
    assert (first.wait, second.wait) == (0.0, 1.0)
    assert budget.delay(TG, "g", now=0.0) == 60.0  # the group's minute is full
    budget.release(first)  # the later booking stands: the chat's interval still counts from it
    assert budget.delay(TG, "g", now=0.0) == 2.0
    budget.release(second)  # back to where it was before this one (the first's interval stays: never less)
    assert budget.delay(TG, "g", now=0.0) == 1.0


def test_whatever_is_booked_no_window_ever_holds_more_than_the_rate() -> None:
    """Many chats, messages and typing at random moments, a release now and then: the booked
    slots never put more than ``max_rate`` calls in any window, and no chat two messages
    closer than its interval."""
    rng = random.Random(33)
    budget = _budget(chat_min_interval=1.0, max_rate=7.0)
    slots: list[float] = []
    by_chat: dict[str, list[float]] = {}
    now = 0.0
    for _ in range(3000):
        now += rng.expovariate(40.0)
        chat = f"c{rng.randrange(40)}"
        kind = "typing" if rng.random() < 0.2 else "message"
        booking = budget.book(TG, chat, kind, now=now)
        if kind == "message" and rng.random() < 0.05:
            budget.release(booking)  # a preview its final overtook
            continue
        slots.append(booking.slot)
        if kind == "message":
            by_chat.setdefault(chat, []).append(booking.slot)
    slots.sort()
    assert all(slots[i + 7] - slots[i] >= W - 1e-6 for i in range(len(slots) - 7))
    for chat_slots in by_chat.values():
        chat_slots.sort()
        assert all(b - a >= 1.0 - 1e-6 for a, b in itertools.pairwise(chat_slots))


def test_after_a_platform_wide_pause_calls_are_spaced_for_a_minute_then_burst_again() -> None:
    """A platform-wide pause says the platform's real limit is below the configured rate: a
    burst would meet it as a burst of 429s, so calls go one spacing apart meanwhile."""
    budget = _budget(max_rate=10.0)
    budget.penalize(TG, "a", 1.0, "platform", now=0.0)
    waits = [budget.take(TG, f"c{n}", now=1.0) for n in range(3)]
    assert waits == pytest.approx([0.0, 0.1, 0.2])
    later = [budget.take(TG, f"d{n}", now=70.0) for n in range(3)]
    assert later == [0.0, 0.0, 0.0], "the minute is over: the rate's worth goes at once again"


def test_the_budget_holds_only_the_chats_whose_state_still_applies() -> None:
    """A gateway answers new chats for as long as it runs: a chat whose slot and pauses have
    passed (and, for a group, whose minute is over) is dropped, so memory follows the chats of
    the last few seconds, not every chat ever answered (about 1 KB each before)."""
    budget = _budget(
        chat_min_interval=1.0, max_rate=150.0, group_max_per_minute=20, is_group=lambda c: c[0] == "-"
    )
    for n in range(10_000):
        budget.take(TG, f"c{n}", now=n * 0.01)  # 100 new chats a second, each answered once
    # The chats booked in the last second are live (about 101); a few spent ones wait for the sweep.
    assert budget.chats_held <= 2 * 101, budget.chats_held
    budget.penalize(TG, "c1", 30.0, now=100.0)  # a pause still ahead keeps its chat
    budget.take(TG, "-5", now=100.0)  # so does a group's minute
    for n in range(500):
        budget.take(TG, f"d{n}", now=110.0 + n * 0.01)
    assert budget.delay(TG, "c1", now=115.0) == pytest.approx(15.0)
    assert budget.take(TG, "-5", now=120.0) == 0.0
    assert budget.delay(TG, "-5", now=120.0) == pytest.approx(1.0)
    assert budget.chats_held <= 2 * 103, budget.chats_held


class _KeepsEveryChat(RateBudget):
    """The budget as it was: every chat's state kept (the reference for the one that drops)."""

    def _drop_spent(self, now: float) -> None:
        return None


@pytest.mark.parametrize("seed", range(5))
def test_dropping_spent_chats_changes_no_slot(seed: int) -> None:
    """The same random calls (messages, typing, 429s of each scope, releases; private chats and
    groups; time moving by random steps) to a budget that drops spent chats and to one that
    keeps every chat get the same slots and delays, call for call."""
    rng = random.Random(seed)
    limits = PlatformLimits(
        chat_min_interval=1.0, max_rate=10.0, group_max_per_minute=5, is_group=lambda c: c[0] == "-"
    )
    budgets = [RateBudget(), _KeepsEveryChat()]
    for budget in budgets:
        budget.configure(TG, limits)
    chats = [f"{'-' if n % 4 == 0 else ''}{n}" for n in range(40)]
    now, booked = 0.0, [[], []]
    for _ in range(3_000):
        now += rng.choice((0.0, 0.01, 0.1, 0.5, 2.0, 30.0))
        chat, op, scope, pick = rng.choice(chats), rng.random(), rng.choice(("chat", "channel")), rng.random()
        seen = []
        for budget, mine in zip(budgets, booked, strict=True):
            if op < 0.6:
                booking = budget.book(TG, chat, "message" if op < 0.5 else "typing", now=now)
                mine.append(booking)
                seen.append((booking.slot, booking.wait))
            elif op < 0.7 and mine:
                budget.release(mine.pop(int(pick * len(mine))))
            elif op < 0.75:
                seen.append(budget.penalize(TG, chat, 3.0, scope, now=now))
            seen.append((budget.delay(TG, chat, now=now), budget.held(TG, chat, now=now)))
        assert seen[: len(seen) // 2] == seen[len(seen) // 2 :], (now, chat, seen)
    assert budgets[0].chats_held < budgets[1].chats_held


def test_at_the_cap_the_least_recently_booked_chat_is_forgotten_not_the_latest_pause() -> None:
    """With every chat live (paused) and the cap reached, a new chat costs the oldest pause,
    as a budget that keeps the order of booking would; the sweep moves no live chat then."""
    budget = RateBudget(max_chats=5)
    for n, chat in enumerate("ABCDE"):
        budget.penalize(TG, chat, 100.0, "channel", now=float(n))
    budget.take(TG, "F", now=5.0)
    assert budget.chats_held == 5
    assert {c: budget.held(TG, c, now=6.0) for c in "ABCDE"} == pytest.approx(
        {"A": 0.0, "B": 95.0, "C": 96.0, "D": 97.0, "E": 98.0}
    )
