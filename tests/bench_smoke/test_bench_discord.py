"""bench/discord.py runs end to end on the fake Discord and reports its figures as JSON."""

from __future__ import annotations

import pytest
from test_bench_smoke import run_bench

pytestmark = [pytest.mark.xdist_group("bench"), pytest.mark.timeout(200)]


def test_discord_bench_quick_run_answers_live_and_downtime_messages_once() -> None:
    result = run_bench("discord.py", timeout=180)
    assert result["unanswered"] == 0 and result["answered_more_than_once"] == []
    assert result["history_reads"] >= result["channels"]  # the downtime came back by catch-up
    assert set(result["live_latency_ms"]) == {"p50", "p95"}
