"""``bench/writer_sql.py --quick`` runs end to end and reports what it claims (no thresholds)."""

from __future__ import annotations

import pytest
from test_bench_smoke import run_bench

pytestmark = [pytest.mark.xdist_group("bench"), pytest.mark.slow]


def test_the_writer_benchmark_times_the_statements_of_every_message() -> None:
    result = run_bench("writer_sql.py")
    assert result["correct"] is True and result["messages"] == 20
    named = {s["sql"]: s for s in result["statements"]}
    # Every message is admitted and committed: the inbox insert and the commits are timed.
    assert any(sql.startswith("INSERT INTO inbox") for sql in named)
    assert named["COMMIT"]["per_message"] >= result["commits_per_message"] > 0
    assert 0 < result["statements_cpu_us_per_message"] <= result["writer_cpu_us_per_message"]
    assert "replayed_us_per_message" not in result  # only with --replay
    # The start is apart from the serving, and the untimed run measured a serving of its own.
    assert result["writer_start_cpu_ms"] > 0 and result["writer_serving_cpu_us_per_message_untimed"] > 0
    assert result["writer_serving_cpu_us_per_message"] < result["writer_cpu_us_per_message"]


def test_a_replay_runs_the_same_statements_again_and_times_each() -> None:
    result = run_bench("writer_sql.py", "--replay", "--replays", "1")
    assert result["correct"] is True
    named = {s["sql"]: s for s in result["statements"]}
    # Every statement the writer ran was replayed: each timed statement has a replayed figure,
    # and the replay's total is the sum of its statements' (rounding aside).
    assert all("replayed_us_per_message" in s for s in result["statements"])
    assert named["COMMIT"]["replayed_us_per_message"] > 0
    assert result["replayed_us_per_message"] > 0
    listed = sum(s["replayed_us_per_message"] for s in result["statements"])
    assert listed <= result["replayed_us_per_message"] + 0.1 * len(named)
    # The writer waited at least once a commit (its queue), as the context switches show.
    switches = result["writer_switches_per_message"]
    assert switches["voluntary"] >= result["commits_per_message"] > 0
    assert 0 <= switches["voluntary_between_begin_and_commit"] <= switches["voluntary"]
