"""Refused webhook requests are logged within a budget per route and reason, then summarised with
a count: a stranger sending bad signatures cannot flood the log (or store anything)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from typing import TYPE_CHECKING, Any

from chatgate.domain.log_budget import BURST, PERIOD
from chatgate.domain.schedules import ScheduleTarget
from chatgate.domain.source import Source
from chatgate.engine.webhooks import HookRoute, Webhooks
from support.engine_harness import PLATFORM

if TYPE_CHECKING:
    from support.engine_harness import MakeHarness


def _signed(secret: bytes, delivery: str, body: bytes, timestamp: int) -> dict[str, str]:
    message = f"{timestamp}.{delivery}.".encode() + body
    return {
        "x-delivery-id": delivery,
        "x-chatgate-timestamp": str(timestamp),
        "x-chatgate-signature": "sha256=" + hmac.new(secret, message, hashlib.sha256).hexdigest(),
    }


async def test_bad_signatures_are_logged_within_a_budget_then_summarised_with_a_count(
    make_harness: MakeHarness, caplog: Any
) -> None:
    h = await make_harness()
    now = [100.0]
    route = HookRoute("gh", "hmac", b"secret", ScheduleTarget(Source(PLATFORM, "c1"), None))
    hooks = Webhooks({"gh": route}, h.store, h.admission, lambda: None, clock=lambda: now[0])
    headers = _signed(b"not the secret", "d1", b"{}", int(time.time()))
    with caplog.at_level(logging.WARNING, logger="chatgate.engine.webhooks"):
        for _ in range(BURST + 2_000):
            assert (await hooks.receive(route, headers, b"{}")).status == 401
        now[0] += PERIOD
        assert (await hooks.receive(route, headers, b"{}")).status == 401
    lines = [r.getMessage() for r in caplog.records]
    refused = "webhook gh: refused a delivery (401 unauthorized): sign '<timestamp>.<delivery id>.<body>'"
    assert len(lines) == BURST + 2 and all(line.startswith(refused) for line in lines[:BURST])
    assert lines[BURST] == "…and 2,000 more like this (webhook gh: unauthorized) in the last 60 s"
    assert lines[-1].startswith(refused)
    assert h.query("SELECT COUNT(*) FROM inbox") == [(0,)]


async def test_a_signature_binds_the_delivery_id_and_the_timestamp_window(make_harness: MakeHarness) -> None:
    h = await make_harness()
    wall = [1_700_000_000.0]
    route = HookRoute("gh", "hmac", b"secret", ScheduleTarget(Source(PLATFORM, "c1"), None))
    hooks = Webhooks({"gh": route}, h.store, h.admission, lambda: None, wall_clock=lambda: wall[0])
    body = b'{"n": 1}'
    good = _signed(b"secret", "d1", body, int(wall[0]) - 299)
    assert (await hooks.receive(route, good, body)).status == 200
    renamed = {**good, "x-delivery-id": "d2"}
    assert (await hooks.receive(route, renamed, body)).body["error"] == "unauthorized"
    wall[0] += 2
    assert (await hooks.receive(route, good, body)).body["error"] == "stale_delivery"
    deep = b"[" * 100_000 + b"]" * 100_000
    answer = await hooks.receive(route, _signed(b"secret", "d3", deep, int(wall[0])), deep)
    assert (answer.status, answer.body["error"]) == (400, "invalid_json")
    assert h.query("SELECT delivery_id FROM inbox") == [("d1",)]
