"""``bench/heavy_user.py --quick`` runs end to end and reports what it claims (no thresholds)."""

from __future__ import annotations

import pytest
from test_bench_smoke import run_bench

pytestmark = [pytest.mark.xdist_group("bench"), pytest.mark.slow]


def test_the_heavy_user_benchmark_prints_its_figures() -> None:
    result = run_bench("heavy_user.py")
    assert result["conversations"] == 200
    assert result["heavy_search_hits"] > 0 and result["heavy_searches_done"] > 0
    for name in ("light_list_alone", "light_list_during_4_searches"):
        figures = result[name]
        assert figures["n"] > 0 and 0 < figures["p50_ms"] <= figures["p99_ms"] <= figures["max_ms"], name
