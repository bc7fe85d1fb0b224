"""A captured webhook delivery cannot be replayed, and a hostile signed body is a 400 (issue 27, finding 9).

Against a real ``chatgate run`` over real HTTP on 127.0.0.1. The signature covers the timestamp
and the delivery id with the body, so a captured delivery sent again under 20 new delivery ids
is refused 20 times and admitted once; one signed ten minutes ago is stale; a signed body
nested 100,000 deep is a 400 with a short reason and no traceback in the log.

The sender below also sends the body-only signature main checked (``X-Hub-Signature-256``),
so that the same test shows main admitting every replay.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.procs import GatewayProcess

pytestmark = pytest.mark.slow
SECRET = "replay-secret-for-tests"
CONFIG = {
    "agent": {"echo": {"chunk_delay_ms": 0}},
    "hooks": {
        "enabled": True,
        "routes": {
            "ci": {
                "secret_env": "TEST_HOOK_SECRET",
                "template": "CI: $status",
                "target": {"platform": "web", "chat_id": "hooks"},
            },
        },
    },
}


def signed(body: bytes, delivery: str, *, age: float = 0.0, secret: str = SECRET) -> dict[str, str]:
    """The headers of a sender that signs ``<timestamp>.<delivery id>.<body>`` (docs/background-work.md)."""
    timestamp = str(int(time.time() - age))
    message = f"{timestamp}.{delivery}.".encode() + body
    return {
        "Content-Type": "application/json",
        "X-Delivery-Id": delivery,
        "X-Chatgate-Timestamp": timestamp,
        "X-Chatgate-Signature": "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest(),
        "X-Hub-Signature-256": "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
    }


def admitted(db: Path) -> list[str]:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return [row[0] for row in conn.execute("SELECT delivery_id FROM inbox ORDER BY seq")]
    finally:
        conn.close()


@pytest.fixture
async def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)
    process = GatewayProcess(tmp_path, CONFIG)
    await process.start()
    yield process
    assert await process.terminate() == 0


def full_log(gateway: GatewayProcess) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(gateway.tmp.glob("gateway-*.log")))


async def test_a_captured_delivery_replayed_under_20_new_ids_is_admitted_once(gateway: Any) -> None:
    body = json.dumps({"status": "green"}).encode()
    captured = signed(body, "d-original")
    answers = []
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=30) as client:
        first = await client.post("/hooks/ci", content=body, headers=captured)
        assert first.status_code == 200, first.text
        for n in range(20):
            replay = {**captured, "X-Delivery-Id": f"d-replay-{n}"}
            answers.append(await client.post("/hooks/ci", content=body, headers=replay))
        again = await client.post("/hooks/ci", content=body, headers=captured)
    assert [(a.status_code, a.json()["error"]) for a in answers] == [(401, "unauthorized")] * 20
    assert (again.status_code, again.json()["duplicate"]) == (200, True)  # the same delivery: run once
    assert admitted(gateway.state_dir / "chatgate.db") == ["d-original"]


async def test_a_stale_or_future_delivery_is_refused_and_a_fresh_one_admitted(gateway: Any) -> None:
    body = json.dumps({"status": "late"}).encode()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=30) as client:
        stale = await client.post("/hooks/ci", content=body, headers=signed(body, "d-stale", age=600))
        future = await client.post("/hooks/ci", content=body, headers=signed(body, "d-future", age=-600))
        bad_clock = {**signed(body, "d-word"), "X-Chatgate-Timestamp": "yesterday"}
        word = await client.post("/hooks/ci", content=body, headers=bad_clock)
        fresh = await client.post("/hooks/ci", content=body, headers=signed(body, "d-fresh", age=30))
    assert (stale.status_code, stale.json()["error"]) == (401, "stale_delivery")
    assert "300" in stale.json()["message"]
    assert (future.status_code, future.json()["error"]) == (401, "stale_delivery")
    assert (word.status_code, word.json()["error"]) == (400, "no_timestamp")
    assert fresh.status_code == 200, fresh.text
    assert admitted(gateway.state_dir / "chatgate.db") == ["d-fresh"]


async def test_a_signed_body_nested_100000_deep_is_a_400_without_a_traceback(gateway: Any) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=30) as client:
        answer = await client.post("/hooks/ci", content=deep, headers=signed(deep, "d-deep"))
        after = await client.post(
            "/hooks/ci", content=b'{"status": "ok"}', headers=signed(b'{"status": "ok"}', "d-after")
        )
    assert (answer.status_code, answer.json()["error"]) == (400, "invalid_json"), answer.text
    assert "nested" in answer.json()["message"] and len(answer.text) < 300
    assert after.status_code == 200
    log = full_log(gateway)
    assert "Traceback" not in log and "RecursionError" not in log
    assert admitted(gateway.state_dir / "chatgate.db") == ["d-after"]
