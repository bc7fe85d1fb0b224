"""``bench/api.py --quick`` runs end to end and reports what it claims (no thresholds)."""

from __future__ import annotations

import pytest
from test_bench_smoke import run_bench

pytestmark = [pytest.mark.xdist_group("bench"), pytest.mark.slow]


def test_the_api_benchmark_prints_its_figures() -> None:
    result = run_bench("api.py")
    assert result["sequential"]["n"] == 20 and result["concurrent"]["n"] == 20
    assert result["stream"]["done"]["n"] == 10
    assert result["concurrent"]["requests_per_second"] > 0
    assert 0 < result["sequential"]["p50_ms"] <= result["sequential"]["p99_ms"]
