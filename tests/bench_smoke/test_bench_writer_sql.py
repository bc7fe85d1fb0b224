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
