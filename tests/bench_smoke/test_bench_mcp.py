"""``bench/mcp_tools.py --quick`` runs end to end and reports what it claims (no thresholds)."""

from __future__ import annotations

import pytest
from test_bench_smoke import run_bench

pytestmark = [pytest.mark.xdist_group("bench"), pytest.mark.slow]


def test_the_mcp_benchmark_prints_its_figures() -> None:
    result = run_bench("mcp_tools.py")
    assert result["runs"] == 1 and result["call_ms"]["n"] == 20
    assert result["import"]["cpu_s"] > 0 and result["import"]["rss_mb"] > 0
    for name in ("start_s", "restart_s", "close_s"):
        assert result[name]["n"] == 1 and result[name]["p50"] > 0, name
