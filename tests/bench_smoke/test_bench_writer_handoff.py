"""``bench/writer_handoff.py --quick`` runs end to end and reports what it claims (no thresholds)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_bench_smoke import run_bench

pytestmark = pytest.mark.xdist_group("bench")


def test_the_handoff_benchmark_counts_every_write_and_reports_both_threads(tmp_path: Path) -> None:
    result = run_bench("writer_handoff.py", "--dir", str(tmp_path))
    assert result["correct"] is True and result["writes"] == 200
    for kind in ("relaxed", "durable"):
        trip = result["through_writer"][kind]
        # Both threads worked for every write: the loop hands it over, the writer commits it.
        assert trip["loop_thread_us"] > 0 and trip["writer_thread_us"] > 0 and trip["wall_us"] > 0, trip
    for level in ("normal", "full"):
        assert result["inline"][level]["cpu_us"] > 0 and result["inline"][level]["wall_us"] > 0
    relaxed = result["through_writer"]["relaxed"]
    expected = relaxed["loop_thread_us"] + relaxed["writer_thread_us"] - result["inline"]["normal"]["cpu_us"]
    assert result["handoff_cpu_us"] == pytest.approx(expected, abs=0.2)
    assert list(tmp_path.iterdir()) == []  # the database went with its temp dir
