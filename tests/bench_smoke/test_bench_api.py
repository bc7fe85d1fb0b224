"""``bench/api.py --quick`` runs end to end and reports what it claims (no thresholds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.xdist_group("bench"), pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_the_api_benchmark_prints_its_figures() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "api.py"), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["sequential"]["n"] == 20 and result["concurrent"]["n"] == 20
    assert result["stream"]["done"]["n"] == 10
    assert result["concurrent"]["requests_per_second"] > 0
    assert 0 < result["sequential"]["p50_ms"] <= result["sequential"]["p99_ms"]
