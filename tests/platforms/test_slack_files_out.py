"""The agent's files reach Slack through its external upload, as the real adapter makes it
against the Slack double: ``files.getUploadURLExternal``, the bytes to the URL it answered,
``files.completeUploadExternal`` into the chat. A SIGKILL while the last step waits for its
answer: the file is shared once more after the restart, its comment marked as a possible repeat
(Slack has no idempotency key), never an unmarked second copy."""

from __future__ import annotations

from pathlib import Path

import pytest
from slack_fake import FakeSlack, message_event
from slack_fake.gateway import ENV, slack_config, slack_values
from telegram_double import Gateways

from support.media_files import pdf
from support.procs import GatewayProcess

MARKER = "(possible repeat) "


@pytest.fixture(autouse=True)
def _tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


async def test_an_attached_file_is_uploaded_and_shared_once_with_its_bytes(
    fake_slack: FakeSlack, gateways: Gateways, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    document = pdf("the minutes")
    (workdir / "minutes.pdf").write_bytes(document)
    await gateways.start(slack_config(fake_slack, tmp_path, tools={"enabled": True, "workdir": str(workdir)}))
    await fake_slack.socket.connected.wait()
    await fake_slack.push_event(message_event("D1", "U1", "!attach minutes.pdf | the minutes"))
    await fake_slack.wait_for(lambda: fake_slack.shared_files("D1"), what="the shared file")
    (message,) = fake_slack.shared_files("D1")
    assert message.text == "the minutes"
    (shared,) = message.files
    assert shared["title"] == "minutes.pdf" and shared["data"] == document
    assert [c.method for c in fake_slack.calls if c.method.startswith("files.")] == [
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
    ]


@pytest.mark.slow
async def test_sigkill_mid_upload_shares_the_file_again_marked(fake_slack: FakeSlack, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    document = pdf("report")
    (workdir / "r.pdf").write_bytes(document)
    values = slack_values(
        fake_slack,
        tmp_path,
        delivery={"duplicate_marker": MARKER},
        tools={"enabled": True, "workdir": str(workdir)},
    )
    values.pop("http")
    gateway = GatewayProcess(tmp_path, values)
    fake_slack.hang_completes = 1  # Slack shares it; the answer never comes
    await gateway.start()
    try:
        await fake_slack.wait_for(fake_slack.socket.connected.is_set, timeout=60, what="the socket")
        await fake_slack.push_event(message_event("D1", "U1", "!attach r.pdf | report"))
        await fake_slack.wait_for(lambda: fake_slack.shared_files("D1"), timeout=60, what="the share")
        await gateway.kill()
        await gateway.start()
        await fake_slack.wait_for(lambda: len(fake_slack.shared_files("D1")) == 2, timeout=60, what="again")
        assert await gateway.terminate() == 0, gateway.logs()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
    first, again = fake_slack.shared_files("D1")
    assert first.text == "report" and again.text == MARKER + "report"
    assert first.files[0]["data"] == again.files[0]["data"] == document
