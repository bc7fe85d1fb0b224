"""bench/background.py runs end to end against a real gateway and reports its figures (no thresholds)."""

from __future__ import annotations

import pytest
from test_bench_smoke import run_bench

pytestmark = pytest.mark.xdist_group("bench")


def test_background_bench_reports_webhook_and_schedule_figures() -> None:
    result = run_bench("background.py")
    assert result["deliveries"] == 30
    for key in ("webhook_sequential_ms", "webhook_concurrent_ms", "webhook_duplicate_ms"):
        assert result[key]["p50"] > 0 and result[key]["p99"] >= result[key]["p50"]
    assert result["schedule_firings"] >= 1 and result["schedule_late_ms"]["p50"] >= 0
