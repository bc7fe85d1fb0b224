"""Webhooks in, against a real ``chatgate run`` over real HTTP on 127.0.0.1 (issue 19's acceptance).

A delivery retried five times with the same delivery id is answered 200 each time and runs the
agent once; the 200 comes only once the event is in the database file. A bad or missing
signature gets 401 and nothing is stored anywhere (inbox, outbox, rejected log). Oversized
bodies, missing delivery ids, bad JSON and unknown routes get their own answers; a bearer
route delivers its text to the chat without running the agent.
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

from support.procs import GatewayProcess, wait_until

pytestmark = pytest.mark.slow
SECRET = "s3cret-for-tests"
TOKEN = "bearer-token-for-tests"
CONFIG = {
    "agent": {"echo": {"chunk_delay_ms": 0}},
    "hooks": {
        "enabled": True,
        "routes": {
            "gh": {
                "secret_env": "TEST_HOOK_SECRET",
                "delivery_header": "X-GitHub-Delivery",
                "template": "PR ${pull_request.title} by ${sender.login} (${labels.0})",
                "target": {"platform": "web", "chat_id": "hooks"},
                "max_body_bytes": 4096,
            },
            "ops": {
                "auth": "bearer",
                "secret_env": "TEST_HOOK_TOKEN",
                "template": "Deploy $env finished: $status",
                "target": {"platform": "web", "chat_id": "ops"},
                "deliver_only": True,
            },
        },
    },
}
EVENT = {"pull_request": {"title": "Fix the flaky test"}, "sender": {"login": "ada"}, "labels": ["bug"]}


def signed(body: bytes, delivery: str, secret: str = SECRET) -> dict[str, str]:
    """A sender's headers: ``<timestamp>.<delivery id>.<body>`` signed (docs/background-work.md)."""
    timestamp = str(int(time.time()))
    message = f"{timestamp}.{delivery}.".encode() + body
    return {
        "X-GitHub-Delivery": delivery,
        "X-Chatgate-Timestamp": timestamp,
        "X-Chatgate-Signature": "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest(),
    }


def query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def stored(db: Path) -> tuple[int, int, int]:
    """(inbox rows, outbox rows, rejected deliveries): everything a request could have left."""
    return (
        query(db, "SELECT COUNT(*) FROM inbox")[0][0],
        query(db, "SELECT COUNT(*) FROM outbox")[0][0],
        query(db, "SELECT COUNT(*) FROM rejected_inbound")[0][0],
    )


@pytest.fixture
async def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)
    monkeypatch.setenv("TEST_HOOK_TOKEN", TOKEN)
    process = GatewayProcess(tmp_path, CONFIG)
    await process.start()
    yield process
    assert await process.terminate() == 0


async def test_a_delivery_retried_five_times_runs_once_and_is_stored_before_its_200(gateway: Any) -> None:
    db = gateway.state_dir / "chatgate.db"
    body = json.dumps(EVENT).encode()
    headers = {**signed(body, "d-1"), "Content-Type": "application/json"}
    answers = []
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=30) as client:
        for _ in range(5):
            response = await client.post("/hooks/gh", content=body, headers=headers)
            assert response.status_code == 200, response.text
            answers.append(response.json())
            rows = query(db, "SELECT transport, delivery_id, inbound_json FROM inbox")
            assert [(t, d) for t, d, _ in rows] == [("hook:gh", "d-1")], "committed before the 200"
    assert [a["duplicate"] for a in answers] == [False, True, True, True, True]
    ((inbound_json,),) = query(db, "SELECT inbound_json FROM inbox")
    assert json.loads(inbound_json)["text"] == "PR Fix the flaky test by ada (bug)"

    def finals() -> list[tuple[str, str]]:
        return query(db, "SELECT idem_key, text FROM outbox WHERE kind = 'final'")

    await wait_until(finals, 60, "the agent's reply to the webhook")
    assert finals() == [("final:1", "echo: PR Fix the flaky test by ada (bug)")]


async def test_a_bad_or_missing_signature_gets_401_and_nothing_is_stored(gateway: Any) -> None:
    db = gateway.state_dir / "chatgate.db"
    body = json.dumps(EVENT).encode()
    good = signed(body, "d-2")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=30) as client:
        for headers in (
            signed(body, "d-2", "wrong secret"),
            {**signed(body + b" ", "d-2")},  # signed another body
            {**signed(body, "d-other"), "X-GitHub-Delivery": "d-2"},  # signed another delivery id
            {**good, "X-Chatgate-Timestamp": str(int(good["X-Chatgate-Timestamp"]) - 1)},  # another time
            {**good, "X-Chatgate-Signature": "sha256=" + "0" * 64},
            {**good, "X-Chatgate-Signature": good["X-Chatgate-Signature"].removeprefix("sha256=")},
            {k: v for k, v in good.items() if k != "X-Chatgate-Signature"},
        ):
            response = await client.post("/hooks/gh", content=body, headers=headers)
            assert (response.status_code, response.json()["error"]) == (401, "unauthorized")
        wrong_bearer = await client.post(
            "/hooks/ops", json={"env": "prod"}, headers={"Authorization": "Bearer nope", "X-Delivery-Id": "x"}
        )
        assert wrong_bearer.status_code == 401
    assert stored(db) == (0, 0, 0)
    assert "refused a delivery (401 unauthorized)" in gateway.logs()


async def test_size_delivery_id_json_and_route_mistakes_get_their_answers(gateway: Any) -> None:
    db = gateway.state_dir / "chatgate.db"
    big = json.dumps({"x": "y" * 5000}).encode()
    not_json = b"{not json"
    body = json.dumps(EVENT).encode()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=30) as client:
        too_large = await client.post("/hooks/gh", content=big, headers=signed(big, "b"))
        no_id = await client.post(
            "/hooks/gh", content=body, headers={**signed(body, "n"), "X-GitHub-Delivery": ""}
        )
        bad = await client.post("/hooks/gh", content=not_json, headers=signed(not_json, "j"))
        unknown = await client.post("/hooks/nope", content=body)
        wrong_method = await client.get("/hooks/gh")
    assert (too_large.status_code, too_large.json()["error"]) == (413, "too_large")
    assert (no_id.status_code, no_id.json()["error"]) == (400, "no_delivery_id")
    assert "X-GitHub-Delivery" in no_id.json()["message"]
    assert (bad.status_code, bad.json()["error"]) == (400, "invalid_json")
    assert (unknown.status_code, wrong_method.status_code) == (404, 405)
    assert stored(db) == (0, 0, 0)


async def test_a_deliver_only_route_posts_its_text_without_the_agent(gateway: Any) -> None:
    db = gateway.state_dir / "chatgate.db"
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Delivery-Id": "deploy-7"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", timeout=30) as client:
        first = await client.post("/hooks/ops", json={"env": "prod", "status": "ok"}, headers=headers)
        again = await client.post("/hooks/ops", json={"env": "prod", "status": "ok"}, headers=headers)
    assert (first.status_code, first.json()) == (200, {"status": "delivered", "duplicate": False})
    assert (again.status_code, again.json()["duplicate"]) == (200, True)
    assert query(db, "SELECT idem_key, kind, chat_id, text FROM outbox") == [
        ("hook:ops:deploy-7", "notice", "ops", "Deploy prod finished: ok")
    ]
    assert query(db, "SELECT COUNT(*) FROM inbox") == [(0,)], "the agent never ran"
