"""Slack's HTTP Events API mode on the gateway's own HTTP server (``/slack/events``).

Requests are signed by slack-sdk's own ``SignatureVerifier`` with the fake's signing secret
and posted with a real HTTP client: ``url_verification`` is answered, a bad signature or a
stale timestamp is refused (401) and admits nothing, an event gets its 200 only once it is
committed (503 while the store refuses it, so Slack retries), and Slack's retry of the same
``event_id`` (``X-Slack-Retry-Num``) is answered 200 and never run twice.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from slack_fake import SIGNING_SECRET, FakeSlack, message_event
from slack_fake.gateway import ENV, SIGNING_SECRET_ENV, echo_of, rows, slack_config
from slack_sdk.signature import SignatureVerifier
from telegram_double import Gateways
from test_slack_intake import InboxSwitch

from chatgate.store.sqlite import SqliteStore


@pytest.fixture(autouse=True)
def _tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


def _http_config(fake: FakeSlack, tmp_path: Path) -> object:
    return slack_config(
        fake,
        tmp_path,
        slack={"mode": "http", "app_token_env": None, "signing_secret_env": SIGNING_SECRET_ENV},
    )


def _signed(body: dict[str, object], *, age: float = 0.0, secret: str = SIGNING_SECRET) -> dict[str, object]:
    raw = json.dumps(body)
    timestamp = str(int(time.time() - age))
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=raw)
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature,
    }
    return {"content": raw, "headers": headers}


async def test_url_verification_signatures_and_stale_timestamps(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    gateway = await gateways.start(_http_config(fake_slack, tmp_path))
    url = f"http://127.0.0.1:{gateway.port}/slack/events"
    async with httpx.AsyncClient(timeout=30) as client:
        challenge = await client.post(url, **_signed({"type": "url_verification", "challenge": "c-123"}))
        assert challenge.status_code == 200 and "c-123" in challenge.text
        event = message_event("D1", "U1", "forged")
        forged = await client.post(url, **_signed(event, secret="not-the-secret"))
        stale = await client.post(url, **_signed(event, age=600))
        unsigned = await client.post(
            url, content=json.dumps(event), headers={"Content-Type": "application/json"}
        )
    assert [r.status_code for r in (forged, stale, unsigned)] == [401, 401, 401]
    assert rows(gateway.state_dir / "chatgate.db", "SELECT 1 FROM inbox") == []


async def test_an_event_gets_200_only_after_commit_and_a_retry_is_answered_once(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    switch = InboxSwitch()
    store = SqliteStore(tmp_path / "state" / "chatgate.db", connect=switch.connect)
    gateway = await gateways.start(_http_config(fake_slack, tmp_path), store=store)
    url = f"http://127.0.0.1:{gateway.port}/slack/events"
    db = gateway.state_dir / "chatgate.db"
    event = message_event("D2", "U1", "over http")
    async with httpx.AsyncClient(timeout=30) as client:
        switch.blocked.set()
        refused = await client.post(url, **_signed(event))
        assert refused.status_code == 503, "an event that was not committed got a 2xx"
        switch.blocked.clear()
        retry = _signed(event)
        retry["headers"] = {
            **retry["headers"],
            "X-Slack-Retry-Num": "1",
            "X-Slack-Retry-Reason": "http_error",
        }  # type: ignore[dict-item]
        first = await client.post(url, **retry)
        assert first.status_code == 200
        assert rows(db, "SELECT 1 FROM inbox WHERE delivery_id = ?", event["event_id"]) == [(1,)]
        retry["headers"] = {**retry["headers"], "X-Slack-Retry-Num": "2"}  # type: ignore[dict-item]
        second = await client.post(url, **retry)
        assert second.status_code == 200
    await fake_slack.wait_for(lambda: len(fake_slack.view("D2")) >= 1, what="the reply")
    later = message_event("D2", "U1", "then this")
    async with httpx.AsyncClient(timeout=30) as client:
        assert (await client.post(url, **_signed(later))).status_code == 200
    await fake_slack.wait_for(lambda: len(fake_slack.view("D2")) >= 2, what="the second reply")
    assert [m.text for m in fake_slack.view("D2")] == [echo_of("over http"), echo_of("then this")]


async def test_an_oversized_body_is_refused_before_it_is_read(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    gateway = await gateways.start(_http_config(fake_slack, tmp_path))
    url = f"http://127.0.0.1:{gateway.port}/slack/events"
    async with httpx.AsyncClient(timeout=30) as client:
        big = await client.post(url, **_signed(message_event("D3", "U1", "x" * (2 * 1024 * 1024))))
    assert big.status_code == 413
