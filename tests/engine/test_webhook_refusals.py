"""Refused webhook requests are logged once per route per interval, with a count: a stranger
sending bad signatures cannot flood the log (or store anything)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from chatgate.domain.schedules import ScheduleTarget
from chatgate.domain.source import Source
from chatgate.engine.webhooks import REFUSAL_LOG_SECONDS, HookRoute, Webhooks
from support.engine_harness import PLATFORM

if TYPE_CHECKING:
    from support.engine_harness import MakeHarness


async def test_bad_signatures_are_logged_once_per_interval_with_a_count(
    make_harness: MakeHarness, caplog: Any
) -> None:
    h = await make_harness()
    now = [100.0]
    route = HookRoute("gh", "hmac", b"secret", ScheduleTarget(Source(PLATFORM, "c1"), None))
    hooks = Webhooks({"gh": route}, h.store, h.admission, lambda: None, clock=lambda: now[0])
    headers = {"x-hub-signature-256": "sha256=" + "0" * 64, "x-delivery-id": "d1"}
    with caplog.at_level(logging.WARNING, logger="chatgate.engine.webhooks"):
        for _ in range(5):
            assert (await hooks.receive(route, headers, b"{}")).status == 401
        now[0] += REFUSAL_LOG_SECONDS
        assert (await hooks.receive(route, headers, b"{}")).status == 401
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "webhook gh: refused a request with a missing or wrong secret (401)",
        "webhook gh: refused a request with a missing or wrong secret (401); 4 more since the last such line",
    ]
    assert h.query("SELECT COUNT(*) FROM inbox") == [(0,)]
