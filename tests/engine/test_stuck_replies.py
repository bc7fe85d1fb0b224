"""Stuck replies are named in the log once while they stay stuck, and counted in the gauges,
read from a real SQLite store."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from chatgate.domain.outbox import OutboxSettlement
from chatgate.engine.metrics import GatewayMetrics
from chatgate.engine.stuck_replies import StuckReplyWatch
from chatgate.store.sqlite import SqliteStore
from contract.kit import draft, put_outbox


def _gauge(metrics: GatewayMetrics, name: str) -> float | None:
    return metrics.registry.get_sample_value(name)


async def test_a_claimed_reply_that_never_settles_is_named_once_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteStore(tmp_path / "chatgate.db")
    await store.open()
    try:
        await put_outbox(store, draft("r1", "c1"), draft("r2", "c2"), draft("r3", "c2"))
        rows = {r.idem_key: r for r in await store.claim_outbox(10)}  # claimed, then nobody settles
        metrics = GatewayMetrics()
        watch = StuckReplyWatch(store, metrics, stuck_after=0.0)
        with caplog.at_level(logging.WARNING, "chatgate.engine.stuck_replies"):
            found = await watch.check()
            again = await watch.check()
        assert [r.id for r in found.stuck] == [rows["r1"].id, rows["r2"].id] == [r.id for r in again.stuck]
        named = [r.getMessage() for r in caplog.records]
        assert len(named) == 2, "each named once while it stays stuck"
        assert named[0].startswith(f"a reply is stuck: #{rows['r1'].id} webchat/c1 sending for ")
        assert _gauge(metrics, "chatgate_undelivered_replies") == 3
        assert _gauge(metrics, "chatgate_stuck_replies") == 2
        oldest = _gauge(metrics, "chatgate_oldest_undelivered_seconds")
        assert oldest is not None and oldest >= 0

        await store.settle_outbox([OutboxSettlement(rows["r1"].id, "sent")])
        caplog.clear()
        with caplog.at_level(logging.WARNING, "chatgate.engine.stuck_replies"):
            left = await watch.check()
        assert [r.id for r in left.stuck] == [rows["r2"].id] and caplog.records == []
        assert _gauge(metrics, "chatgate_stuck_replies") == 1
        assert _gauge(metrics, "chatgate_undelivered_replies") == 2
    finally:
        await store.close()
