"""``bench/webchat_highlight.py --quick`` runs end to end and reports what it claims (no thresholds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.browser import CHROMIUM

pytestmark = [pytest.mark.xdist_group("bench"), pytest.mark.slow, pytest.mark.browser]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing")
def test_the_highlight_benchmark_prints_its_figures() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "webchat_highlight.py"), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    ours = json.loads(proc.stdout)["ours"]
    assert (
        ours["size"]["bytes"] == (ROOT / "src/chatgate/platforms/webchat/static/highlight.js").stat().st_size
    )
    assert ours["pathological_unfinished"] == []
    assert ours["pathological_max_ms"] > 0 and ours["one_mb_python_ms"] > 0
