"""The pacing checks' own arithmetic: the slack a loop's lateness allows, and the sliding window."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pacing_log import JITTER, busiest, fullest, stamp_slack


def _gateway(samples: list[float], interval: float = 0.05) -> SimpleNamespace:
    return SimpleNamespace(lag=SimpleNamespace(samples=samples, spans=[interval + s for s in samples]))


def test_a_quiet_loop_allows_only_the_floor() -> None:
    assert stamp_slack(_gateway([0.001] * 200)) == JITTER
    assert stamp_slack(_gateway([])) == JITTER


def test_stalls_within_one_second_add_up() -> None:
    # Four 0.08-s stalls one after another: each alone is under the floor, together 0.32 s late.
    assert stamp_slack(_gateway([0.0] * 10 + [0.08] * 4 + [0.0] * 10)) == pytest.approx(0.32)


def test_stalls_more_than_a_second_apart_do_not() -> None:
    # Two 0.15-s stalls with 1.2 s of quiet samples (24 of 0.05 s) between them.
    assert stamp_slack(_gateway([0.15] + [0.0] * 24 + [0.15])) == pytest.approx(0.15)


def test_one_stall_longer_than_the_span_is_counted_whole() -> None:
    assert stamp_slack(_gateway([0.0, 1.4, 0.0])) == pytest.approx(1.4)


def test_busiest_counts_the_fullest_half_open_window() -> None:
    times = [0.0, 0.1, 0.2, 1.0, 1.05, 1.1]
    assert busiest(times, 1.0) == 4  # [0.1, 1.1) holds 0.1, 0.2, 1.0, 1.05 (not 1.1); [0.0, 1.0) three
    assert busiest(times, 0.15) == 3
    assert busiest([], 1.0) == 0


def test_fullest_names_the_stamps_of_the_window_busiest_counts() -> None:
    times = [10.0, 10.1, 10.2, 11.0, 11.05, 11.1]
    assert fullest(times, 1.0, 10.0) == [0.1, 0.2, 1.0, 1.05]
    assert fullest([], 1.0, 0.0) == []
