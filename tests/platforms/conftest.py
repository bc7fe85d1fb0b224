"""Fixtures for the platform suites; the harnesses live in support.web_harness and telegram_double."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from slack_fake import FakeSlack
from telegram_double import TOKEN, TOKEN_ENV, BotApiDouble, Gateways

from support.web_harness import _no_chatgate_env, connect_client, start_gateway

__all__ = ["_no_chatgate_env", "connect_client", "double", "fake_slack", "gateways", "start_gateway"]


@pytest.fixture
async def double() -> AsyncIterator[BotApiDouble]:
    server = BotApiDouble()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def gateways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Gateways]:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    harness = Gateways(tmp_path)
    yield harness
    await harness.stop_all()


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    server = FakeSlack()
    await server.start()
    yield server
    await server.stop()
