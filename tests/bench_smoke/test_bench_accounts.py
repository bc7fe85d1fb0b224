"""``bench/accounts.py --quick`` runs end to end and reports what it claims (no thresholds)."""

from __future__ import annotations

import pytest
from test_bench_smoke import run_bench

pytestmark = [pytest.mark.xdist_group("bench"), pytest.mark.slow]


def test_the_accounts_benchmark_prints_its_figures() -> None:
    result = run_bench("accounts.py")
    assert result["messages"] == 20 and result["chats"] == 2
    for name in ("sign_in_token_ms", "me_ms", "history_ms", "search_ms"):
        assert result[name]["n"] == 20 and 0 < result[name]["p50"] <= result[name]["p95"], name
    assert result["password_hash_ms"]["n"] == 5
