"""Slack files reach the agent: the adapter downloads each with the bot token from Slack's
file host (the Slack double), and never sends the token anywhere else."""

from __future__ import annotations

from pathlib import Path

import pytest
from slack_fake import FakeSlack, message_event
from slack_fake.gateway import ENV, slack_config
from telegram_double import Gateways

from chatgate.domain.media import human_size
from support.media_files import png


@pytest.fixture(autouse=True)
def _tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


async def test_a_file_is_downloaded_with_the_bot_token_and_reaches_the_agent(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    await gateways.start(slack_config(fake_slack, tmp_path))
    await fake_slack.socket.connected.wait()
    image = png(30, 30)
    files = [fake_slack.file("shot.png", image, "image/png")]
    body = message_event("D1", "U1", "look", subtype="file_share", extra={"files": files})
    await fake_slack.push_event(body)
    expected = f"echo: look\nreceived shot.png (image/png, {human_size(len(image))})"
    await fake_slack.wait_for(lambda: [m.text for m in fake_slack.view("D1")] == [expected], what="the reply")
    assert fake_slack.downloads == ["shot.png"]


async def test_a_file_url_off_slack_is_never_fetched(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    await gateways.start(slack_config(fake_slack, tmp_path))
    await fake_slack.socket.connected.wait()
    stray = {"id": "F1", "name": "x.png", "url_private_download": "https://attacker.example/x.png"}
    await fake_slack.push_event(message_event("D1", "U1", "hm", extra={"files": [stray]}))
    await fake_slack.wait_for(lambda: len(fake_slack.view("D1")) == 2, what="the notice and the reply")
    texts = [m.text for m in fake_slack.view("D1")]
    assert "[attachment x.png was not received: the file is not on Slack's servers]" in texts
