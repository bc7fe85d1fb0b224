"""LogBudget: a few lines per kind per period, the rest counted and told in one summary line,
also when the flood stops (a timer on the running loop). Time is a clock the test moves,
except for the timer test, which waits for the summary with a bound."""

from __future__ import annotations

import logging
from typing import Any

from chatgate.domain.log_budget import OTHER, LogBudget
from support.procs import wait_until

log = logging.getLogger("tests.log_budget")


def test_each_kind_has_its_own_burst_and_the_next_period_starts_with_the_summary(caplog: Any) -> None:
    now = [0.0]
    budget = LogBudget(log, period=60, burst=2, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger=log.name):
        logged = [budget.info("a", "line a %d", n) for n in range(5)] + [budget.info("b", "line b")]
        now[0] = 60.0
        budget.info("a", "line a again")
    assert logged == [True, True, False, False, False, True]
    assert [r.getMessage() for r in caplog.records] == [
        "line a 0",
        "line a 1",
        "line b",
        "…and 3 more like this (a) in the last 60 s",
        "line a again",
    ]
    assert caplog.records[3].left_out == 3  # type: ignore[attr-defined]


def test_kinds_beyond_the_bound_share_one_so_memory_stays_bounded(caplog: Any) -> None:
    budget = LogBudget(log, burst=1, max_kinds=3)
    with caplog.at_level(logging.INFO, logger=log.name):
        for n in range(1000):
            budget.info(f"kind {n}", "line %d", n)
    assert len(budget._kinds) == 4 and OTHER in budget._kinds
    assert budget.left_out(OTHER) == 996


def test_a_disabled_level_is_neither_logged_nor_counted(caplog: Any) -> None:
    budget = LogBudget(log)
    with caplog.at_level(logging.WARNING, logger=log.name):
        assert not budget.info("quiet", "not shown")
    assert budget.left_out("quiet") == 0 and caplog.records == []


async def test_the_summary_comes_when_the_period_ends_even_if_the_flood_stopped(caplog: Any) -> None:
    budget = LogBudget(log, period=0.2, burst=1)
    with caplog.at_level(logging.WARNING, logger=log.name):
        for _ in range(50):
            budget.warning("flood", "a stranger's line")

        def summary() -> list[str]:
            return [r.getMessage() for r in caplog.records if r.getMessage().startswith("…and")]

        await wait_until(summary, 30, "the summary line")
    assert summary() == ["…and 49 more like this (flood) in the last 0 s"]
