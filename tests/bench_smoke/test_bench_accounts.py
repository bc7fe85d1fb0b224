"""``bench/accounts.py --quick`` runs end to end and reports what it claims (no thresholds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.xdist_group("bench"), pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_the_accounts_benchmark_prints_its_figures() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "accounts.py"), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["messages"] == 20 and result["chats"] == 2
    for name in ("sign_in_token_ms", "me_ms", "history_ms", "search_ms"):
        assert result[name]["n"] == 20 and 0 < result[name]["p50"] <= result[name]["p95"], name
    assert result["password_hash_ms"]["n"] == 5
