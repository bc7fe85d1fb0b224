"""The rate budget on its own clock: slots are booked where they are found, never shared.

Every call passes ``now``, so these are exact statements about the schedule, not timings.
"""

from __future__ import annotations

from chatgate.engine.ratelimit import PlatformLimits, RateBudget, RateOverride

TG = "telegram"


def _budget(**limits: object) -> RateBudget:
    budget = RateBudget()
    budget.configure(TG, PlatformLimits(**limits))  # type: ignore[arg-type]
    return budget


def test_callers_asking_at_the_same_moment_get_successive_slots_not_one_shared_wait() -> None:
    budget = _budget(chat_min_interval=1.0, max_rate=10.0)
    waits = [budget.take(TG, f"c{n}", now=100.0) for n in range(25)]
    assert all(abs(w - n / 10) < 1e-6 for n, w in enumerate(waits)), waits
    starts = sorted(100.0 + w for w in waits)
    for i in range(len(starts) - 10):
        assert starts[i + 10] - starts[i] >= 1.0 - 1e-6, "more than 10 calls in one second"


def test_a_chat_waiting_for_its_own_interval_does_not_hold_back_other_chats() -> None:
    budget = _budget(chat_min_interval=1.0, max_rate=10.0)
    assert budget.take(TG, "a", now=0.0) == 0.0
    assert abs(budget.take(TG, "a", now=0.0) - 1.0) < 1e-9  # a's next message: a second later
    assert abs(budget.take(TG, "b", now=0.0) - 0.1) < 1e-9  # b fits in the gap before it
    assert abs(budget.delay(TG, "c", now=0.0) - 0.2) < 1e-9


def test_a_group_gets_at_most_its_messages_in_any_minute() -> None:
    budget = _budget(group_max_per_minute=3, is_group=lambda chat: chat.startswith("-"))
    waits = [budget.take(TG, "-100", now=10.0) for _ in range(4)]
    assert waits == [0.0, 0.0, 0.0, 60.0]
    assert budget.delay(TG, "42", now=10.0) == 0.0, "a private chat is not a group"
    assert budget.delay(TG, "-100", now=69.0) > 0.0
    assert budget.delay(TG, "-100", now=130.0) == 0.0


def test_typing_takes_a_platform_slot_but_not_the_chats_message_budget() -> None:
    budget = _budget(chat_min_interval=1.0, max_rate=10.0)
    assert budget.take(TG, "a", "typing", now=0.0) == 0.0
    assert abs(budget.take(TG, "a", now=0.0) - 0.1) < 1e-9  # after the typing's platform slot only
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
    is given back, so the next call takes it instead of keeping the spacing from it."""
    budget = _budget(chat_min_interval=1.0, max_rate=10.0)
    assert budget.take(TG, "other", now=0.0) == 0.0
    preview = budget.book(TG, "a", now=0.0)
    assert abs(preview.wait - 0.1) < 1e-9  # behind the other chat's call, not skipped
    assert abs(budget.delay(TG, "a", now=0.0) - 1.1) < 1e-9  # the chat's own interval
    assert abs(budget.delay(TG, "b", now=0.0) - 0.2) < 1e-9
    budget.release(preview)
    assert abs(budget.delay(TG, "a", now=0.0) - 0.1) < 1e-9, "the final would wait behind a ghost"
    assert abs(budget.delay(TG, "b", now=0.0) - 0.1) < 1e-9, "the slot was not given back"


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
