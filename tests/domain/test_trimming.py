"""History trimming to a profile's context length (``domain/trimming.py``)."""

from __future__ import annotations

from chatgate.domain.history import HistoryEntry
from chatgate.domain.profiles import ModelProfile
from chatgate.domain.trimming import PER_MESSAGE, SAFETY, answer_reserve, trim_history
from chatgate.domain.usage import estimate_tokens

TURNS = tuple(
    HistoryEntry(role, f"{role} {i} " + "z" * 396)  # about 100 tokens each
    for i in range(50)
    for role in ("user", "assistant")
)


def test_no_context_length_keeps_everything() -> None:
    assert trim_history(TURNS, ModelProfile("p"), ("system", "input")) == TURNS


def test_the_newest_entries_that_fit_are_kept_and_it_never_opens_with_an_answer() -> None:
    profile = ModelProfile("p", context_length=2048, answer_tokens=256)
    fixed = ("s" * 800, "i" * 400)  # 300 tokens always sent
    kept = trim_history(TURNS, profile, fixed)
    assert kept == TURNS[-len(kept) :] and kept[0].role == "user"
    used = sum(estimate_tokens(t) + PER_MESSAGE for t in (*fixed, *(e.content for e in kept)))
    assert used <= 2048 * SAFETY - 256
    two_more = sum(estimate_tokens(e.content) + PER_MESSAGE for e in TURNS[-len(kept) - 2 : -len(kept)])
    assert used + two_more > 2048 * SAFETY - 256, "the next older question and answer would not fit"
    assert 0 < len(kept) < len(TURNS)


def test_a_system_message_too_large_for_any_history_sends_none() -> None:
    profile = ModelProfile("p", context_length=1024)
    assert trim_history(TURNS, profile, ("s" * 4000, "hi")) == ()


def test_the_answer_reserve_is_max_tokens_else_a_quarter_of_the_context_up_to_4096() -> None:
    assert answer_reserve(ModelProfile("p", context_length=8192, answer_tokens=500)) == 500
    assert answer_reserve(ModelProfile("p", context_length=8192)) == 2048
    assert answer_reserve(ModelProfile("p", context_length=128_000)) == 4096
