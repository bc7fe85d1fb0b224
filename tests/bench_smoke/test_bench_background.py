"""bench/background.py runs end to end against a real gateway and reports its figures (no thresholds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("bench")
ROOT = Path(__file__).resolve().parents[2]


def test_background_bench_reports_webhook_and_schedule_figures() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "background.py"), "--quick"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["deliveries"] == 30
    for key in ("webhook_sequential_ms", "webhook_concurrent_ms", "webhook_duplicate_ms"):
        assert result[key]["p50"] > 0 and result[key]["p99"] >= result[key]["p50"]
    assert result["schedule_firings"] >= 1 and result["schedule_late_ms"]["p50"] >= 0
