"""Hostile requests to Slack's HTTP Events endpoint are client faults: a 4xx and one short line.

Issue 27, finding 10: a non-numeric ``X-Slack-Request-Timestamp`` gave a 500 and ~1 KB of ERROR
log per request, and six bodies signed with the real signing secret (not JSON, nested 100,000
deep, an integer of 5,000 digits, bad UTF-8, a form whose ``payload`` is not JSON, or is nested
too deep) gave a 500. Each request here goes to a real gateway over real HTTP; the answer must
be a 4xx, the log must hold no ERROR and no traceback for it, at most one line each, and the
endpoint must still admit a good event afterwards.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from slack_fake import SIGNING_SECRET, FakeSlack, message_event
from slack_fake.gateway import ENV, SIGNING_SECRET_ENV, echo_of, slack_config
from telegram_double import Gateways


@pytest.fixture(autouse=True)
def _tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


def _signed(raw: bytes, content_type: str, timestamp: str | None = None) -> dict[str, Any]:
    """Signed with the app's signing secret, as Slack signs (``v0:<timestamp>:<body>``)."""
    timestamp = str(int(time.time())) if timestamp is None else timestamp
    base = f"v0:{timestamp}:".encode() + raw
    signature = "v0=" + hmac.new(SIGNING_SECRET.encode(), base, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature,
    }
    return {"content": raw, "headers": headers}


JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
HOSTILE = [
    pytest.param(b"{not json", JSON, id="not-json"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, JSON, id="nested-100000-deep"),
    pytest.param(b'{"type": "event_callback", "n": ' + b"9" * 5000 + b"}", JSON, id="huge-int"),
    pytest.param(b'{"type": "event_callback", "text": "\xff\xfe"}', JSON, id="bad-utf8"),
    pytest.param(b"payload=%7Bnot+json", FORM, id="form-payload-not-json"),
    pytest.param(b"payload=" + b"%5B" * 50_000 + b"%5D" * 50_000, FORM, id="form-payload-deep"),
    pytest.param(b"payload=%FF%FE", FORM, id="form-payload-bad-utf8"),
    pytest.param(b"\xff\xfe=\xff", FORM, id="form-bad-utf8"),
]


def _problems(records: list[logging.LogRecord]) -> list[str]:
    return [
        f"{r.levelname} {r.name}: {r.getMessage()[:200]}"
        for r in records
        if r.levelno >= logging.ERROR or r.exc_info is not None
    ]


async def _still_admits(url: str, client: httpx.AsyncClient, fake: FakeSlack, chat: str) -> None:
    event = json.dumps(message_event(chat, "U1", "after the attack")).encode()
    good = await client.post(url, **_signed(event, JSON))
    assert good.status_code == 200, good.text
    await fake.wait_for(lambda: len(fake.view(chat)) >= 1, what="the reply to a good event")
    assert [m.text for m in fake.view(chat)] == [echo_of("after the attack")]


@pytest.mark.parametrize("timestamp", ["soon", "", "1e9", "12a", "-5", "9" * 40])
async def test_a_non_numeric_timestamp_is_a_401_with_no_error_logged(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path, caplog: Any, timestamp: str
) -> None:
    config = slack_config(
        fake_slack,
        tmp_path,
        slack={"mode": "http", "app_token_env": None, "signing_secret_env": SIGNING_SECRET_ENV},
    )
    gateway = await gateways.start(config)
    url = f"http://127.0.0.1:{gateway.port}/slack/events"
    with caplog.at_level(logging.INFO):
        async with httpx.AsyncClient(timeout=30) as client:
            answers = [
                await client.post(url, **_signed(b'{"type": "event_callback"}', JSON, timestamp=timestamp))
                for _ in range(20)
            ]
            await _still_admits(url, client, fake_slack, "D9")
    assert {a.status_code for a in answers} == {401}, [a.text for a in answers]
    assert _problems(caplog.records) == []
    refusals = [r for r in caplog.records if "Slack" in r.getMessage() and "refused" in r.getMessage()]
    assert 1 <= len(refusals) <= 6, [r.getMessage() for r in refusals]  # a budget, not one per request


@pytest.mark.parametrize(("raw", "content_type"), HOSTILE)
async def test_a_hostile_signed_body_is_a_4xx_with_one_short_line(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path, caplog: Any, raw: bytes, content_type: str
) -> None:
    config = slack_config(
        fake_slack,
        tmp_path,
        slack={"mode": "http", "app_token_env": None, "signing_secret_env": SIGNING_SECRET_ENV},
    )
    gateway = await gateways.start(config)
    url = f"http://127.0.0.1:{gateway.port}/slack/events"
    with caplog.at_level(logging.INFO):
        async with httpx.AsyncClient(timeout=30) as client:
            answer = await client.post(url, **_signed(raw, content_type))
            await _still_admits(url, client, fake_slack, "D8")
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text[:300])
    assert len(answer.content) < 300
    assert _problems(caplog.records) == []
    lines = [
        r.getMessage() for r in caplog.records if "Slack" in r.getMessage() and "refused" in r.getMessage()
    ]
    assert len(lines) == 1 and len(lines[0]) < 300, lines


async def test_a_body_trickled_to_slack_events_is_cut_off_with_408(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    from support.attackers import trickle

    config = slack_config(
        fake_slack,
        tmp_path,
        http={"port": 0, "body_timeout_seconds": 0.5},
        slack={"mode": "http", "app_token_env": None, "signing_secret_env": SIGNING_SECRET_ENV},
    )
    gateway = await gateways.start(config)
    slow = await trickle(gateway.port, "/slack/events")
    try:
        answer = await slow.until_answered(30)
    finally:
        await slow.stop()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
