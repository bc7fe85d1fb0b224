"""``bench/commits.py --quick`` runs end to end and reports what it claims (no thresholds)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_bench_smoke import run_bench

pytestmark = [pytest.mark.xdist_group("bench"), pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_the_commits_benchmark_counts_the_writes_of_every_message() -> None:
    result = run_bench("commits.py")
    assert result["correct"] is True and result["messages"] == 20
    figures = result["chatgate"]
    assert figures["writes_per_message"] >= figures["commits_per_message"] > 0
    # A commit that changed something wrote at least one whole page to the WAL.
    assert figures["bytes_written_per_message"] >= 4096
    assert figures["chatgate"] == str(ROOT / "src" / "chatgate")
