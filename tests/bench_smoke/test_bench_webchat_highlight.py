"""``bench/webchat_highlight.py --quick`` runs end to end and reports what it claims (no thresholds)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_bench_smoke import run_bench

from support.browser import CHROMIUM

pytestmark = [pytest.mark.xdist_group("bench"), pytest.mark.slow, pytest.mark.browser]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing")
def test_the_highlight_benchmark_prints_its_figures() -> None:
    ours = run_bench("webchat_highlight.py")["ours"]
    static = ROOT / "src/chatgate/platforms/webchat/static"
    files = [static / "highlight.js", static / "vendor/highlight/highlight.min.js"]
    assert ours["size"]["bytes"] == sum(f.stat().st_size for f in files)
    assert ours["pathological_unfinished"] == []
    assert ours["pathological_max_ms"] > 0 and ours["one_mb_python_ms"] > 0
