"""The agent's files go out by mail: ``attach_file`` (the echo agent's ``!attach``) through the real
adapter to a real SMTP server that delivers into Dovecot, read back over IMAP. A file row is a reply
mail with the file attached, sent once like any reply: a SIGKILL after the server accepted it, and
the restart finds its copy by its Message-ID instead of sending it again."""

from __future__ import annotations

import asyncio
import sqlite3
from email.message import EmailMessage
from pathlib import Path

import pytest
from email_support import body, gateway, replies_to, wait_for_replies
from mail_servers import MailServers, mail

from support.media_files import pdf, png
from support.procs import GatewayProcess

pytestmark = pytest.mark.slow


def _with_tools(gw: GatewayProcess, workdir: Path) -> None:
    import yaml

    config = yaml.safe_load(gw.config_path.read_text())
    config["tools"] = {"enabled": True, "workdir": str(workdir)}
    gw.config_path.write_text(yaml.safe_dump(config))


def _files(msg: EmailMessage) -> list[tuple[str | None, str, bytes]]:
    return [
        (p.get_filename(), p.get_content_type(), p.get_payload(decode=True)) for p in msg.iter_attachments()
    ]


def _outbox(gw: GatewayProcess) -> list[tuple[str, str]]:
    db = sqlite3.connect(gw.state_dir / "chatgate.db", timeout=30)
    try:
        return list(db.execute("SELECT idem_key, status FROM outbox ORDER BY id"))
    finally:
        db.close()


async def test_an_attached_file_is_a_threaded_reply_mail_carrying_it(
    mail_servers: MailServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot, ann = mail_servers.add_user("bot"), mail_servers.add_user("ann")
    work = tmp_path / "work"
    work.mkdir()
    image, report = png(64, 48, (0, 128, 255)), pdf("quarterly figures")
    (work / "chart.png").write_bytes(image)
    (work / "report.pdf").write_bytes(report)
    gw = gateway(mail_servers, tmp_path, monkeypatch, bot, [ann])
    _with_tools(gw, work)
    await gw.start()
    try:
        mail_servers.send(
            mail(ann, bot, "Figures", "!attach chart.png | the chart\n!attach report.pdf", "q1@ann.test")
        )
        await wait_for_replies(mail_servers, ann, 3, 60, gw)
        assert await gw.terminate() == 0, gw.logs()
    finally:
        if gw.proc is not None and gw.proc.returncode is None:
            await gw.kill()
    replies = (await replies_to(mail_servers, ann))["q1@ann.test"]
    assert len(replies) == 3, [body(r) for r in replies]  # the reply, then one mail per file
    with_files = {r["Message-ID"]: _files(r) for r in replies if _files(r)}
    assert sorted(with_files.values()) == [
        [("chart.png", "image/png", image)],
        [("report.pdf", "application/pdf", report)],
    ]
    by_file = {_files(r)[0][0]: r for r in replies if _files(r)}
    assert body(by_file["chart.png"]) == "the chart"
    assert body(by_file["report.pdf"]) == "report.pdf"  # no caption: the file's name says what it is
    for reply in by_file.values():
        assert reply["Subject"] == "Re: Figures" and reply["In-Reply-To"] == "<q1@ann.test>"


@pytest.mark.timeout(180)
async def test_a_crash_after_the_server_accepted_a_file_never_sends_it_twice(
    mail_servers: MailServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot, ann = mail_servers.add_user("bot"), mail_servers.add_user("ann")
    work = tmp_path / "work"
    work.mkdir()
    document = pdf("signed contract")
    (work / "contract.pdf").write_bytes(document)
    armed = tmp_path / "crash-armed"
    armed.write_text("once")
    monkeypatch.setenv("CG_TEST_EMAIL_CRASH_AT", f"after_smtp_file:{armed}")
    gw = gateway(mail_servers, tmp_path, monkeypatch, bot, [ann], sent_copy="bcc")
    _with_tools(gw, work)
    await gw.start()
    try:
        await asyncio.to_thread(
            mail_servers.send, mail(ann, bot, "Contract", "!attach contract.pdf", "k1@ann.test")
        )
        assert gw.proc is not None
        code = await asyncio.wait_for(gw.proc.wait(), 60)
        assert code == -9, f"the gateway should have SIGKILLed itself after the file's mail: {gw.logs()}"
        assert ("file:1:0", "sending") in _outbox(gw), "the server took the file; the ledger never learned it"
        await gw.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while ("file:1:0", "sent") not in _outbox(gw):
            assert loop.time() < deadline, f"the file row never settled: {_outbox(gw)} {gw.logs()}"
            await asyncio.sleep(0.2)
        assert await gw.terminate() == 0, gw.logs()
    finally:
        if gw.proc is not None and gw.proc.returncode is None:
            await gw.kill()
    replies = (await replies_to(mail_servers, ann))["k1@ann.test"]
    carrying = [r for r in replies if _files(r)]
    assert len(carrying) == 1, [body(r) for r in replies]
    assert _files(carrying[0]) == [("contract.pdf", "application/pdf", document)]
    assert (
        len([a for a in mail_servers.accepted if ann in a.rcpt_tos]) == 2
    )  # the reply and the file, once each
    assert "not sent again" in gw.logs(), "the restart found the file's mail by its Message-ID"
