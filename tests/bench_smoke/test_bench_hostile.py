"""bench/hostile_http.py runs end to end against real gateways and reports its figures (no thresholds)."""

from __future__ import annotations

import pytest
from test_bench_smoke import run_bench

pytestmark = pytest.mark.xdist_group("bench")


def test_hostile_http_bench_reports_the_issue_27_figures_as_json() -> None:
    result = run_bench("hostile_http.py", "--only", "webhooks", "wrong_keys", "idempotency")
    assert {"chatgate", "webhooks", "wrong_keys", "idempotency"} <= set(result)
    assert result["webhooks"]["first"] == 200 and "replays_under_new_ids_admitted" in result["webhooks"]
    assert result["wrong_keys"]["first_300"]["log_bytes"] > 0
    assert {"another_conversation", "another_endpoint"} <= set(result["idempotency"])
