"""Fixtures for the platform suites; the harnesses live in support.web_harness and telegram_double."""

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from mail_servers import MailServers, dovecot_missing
from pacing_log import WriterCommits
from slack_fake import FakeSlack
from telegram_double import TOKEN, TOKEN_ENV, BotApiDouble, Gateways

from support.web_harness import _no_chatgate_env, connect_client, start_gateway

__all__ = [
    "_no_chatgate_env",
    "connect_client",
    "double",
    "fake_slack",
    "gateways",
    "mail_servers",
    "start_gateway",
]


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


@pytest.fixture(scope="session")
def mail_servers() -> Iterator[MailServers]:
    """A real Dovecot and SMTP server, started once per xdist worker (tests add their own users).

    Their directory is not under pytest's tmp (mode 0700, root's): Dovecot runs as ``nobody``
    when the suite runs as root, and must reach its maildirs."""
    missing = dovecot_missing()
    if missing is not None:
        pytest.fail(missing)
    root = Path(tempfile.mkdtemp(prefix="chatgate-mail-"))
    os.chmod(root, 0o755)
    servers = MailServers(root)
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def writer_commits(monkeypatch: pytest.MonkeyPatch) -> WriterCommits:
    """Records every SQLite commit of the gateways built in this test (``pacing_log.WriterCommits``),
    through the metrics hook the writer already calls; what the gateway does is unchanged."""
    from chatgate.engine.metrics import GatewayMetrics

    commits = WriterCommits()
    observe = GatewayMetrics.observe_commit

    def observing(metrics: GatewayMetrics, writes: int, seconds: float) -> None:
        commits.observe(seconds)
        observe(metrics, writes, seconds)

    monkeypatch.setattr(GatewayMetrics, "observe_commit", observing)
    return commits


@pytest.fixture
def dense_lag_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gateways built in this test sample their loop's lag densely from the start, not only
    once busy: the pacing checks read how late the loop ran from those samples (``stamp_slack``)."""
    from chatgate.engine import looplag

    monkeypatch.setattr(looplag, "IDLE_INTERVAL", looplag.INTERVAL)
