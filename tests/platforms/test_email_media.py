"""Email attachments reach the agent: a real gateway reads a real mailbox (Dovecot, mail sent
through the SMTP server), admits the mail with its attachments as IMAP references, and the
fetch step reads each part again from the mailbox, checks it and gives it to the agent."""

from __future__ import annotations

from pathlib import Path

import pytest
from email_support import body, gateway, wait_for_replies
from mail_servers import PASSWORD, MailServers, mail

from chatgate.domain.media import MediaRefused, human_size
from chatgate.platforms.email.attachments import read_part
from chatgate.platforms.email.imap import ImapConnection, ImapSettings, TlsHolder
from support.media_files import pdf, png

pytestmark = pytest.mark.slow


async def test_attachments_are_read_from_the_mailbox_and_reach_the_agent(
    mail_servers: MailServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot, ann = mail_servers.add_user("bot"), mail_servers.add_user("ann")
    gw = gateway(mail_servers, tmp_path, monkeypatch, bot, [ann])
    image, document = png(50, 40, (0, 90, 200)), pdf("Minutes of the meeting")
    message = mail(ann, bot, "Files", "Here are the files", "f1@ann.test")
    message.add_attachment(image, maintype="image", subtype="png", filename="shot.png")
    message.add_attachment(document, maintype="application", subtype="pdf", filename="../minutes.pdf")
    await gw.start()
    try:
        mail_servers.send(message)
        await wait_for_replies(mail_servers, ann, 1, 60, gw)
        (reply,) = await mail_servers.aread(ann)
        assert body(reply).splitlines() == [
            "echo: Here are the files",
            f"received shot.png (image/png, {human_size(len(image))})",
            f"received minutes.pdf (application/pdf, {human_size(len(document))})",
        ], gw.logs()
        assert await gw.terminate() == 0, gw.logs()
    finally:
        if gw.proc is not None and gw.proc.returncode is None:
            await gw.kill()


async def test_a_corrupt_attachment_is_a_note_and_the_text_is_answered(
    mail_servers: MailServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot, ann = mail_servers.add_user("bot"), mail_servers.add_user("ann")
    gw = gateway(mail_servers, tmp_path, monkeypatch, bot, [ann])
    message = mail(ann, bot, "Broken", "This one is broken", "f2@ann.test")
    message.add_attachment(png()[:40], maintype="image", subtype="png", filename="broken.png")
    await gw.start()
    try:
        mail_servers.send(message)
        await wait_for_replies(mail_servers, ann, 2, 60, gw)
        texts = sorted(body(m) for m in await mail_servers.aread(ann))
        assert texts[0].startswith("[attachment broken.png was not received:"), texts
        assert texts[1].startswith("echo: This one is broken"), texts
        assert await gw.terminate() == 0, gw.logs()
    finally:
        if gw.proc is not None and gw.proc.returncode is None:
            await gw.kill()


async def test_a_part_is_read_again_from_the_mailbox_and_a_gone_mail_is_a_reason(
    mail_servers: MailServers,
) -> None:
    """``read_part`` against the real Dovecot: the part's bytes, then the reasons a person reads
    for a mail that is gone, a renumbered mailbox and another mailbox's reference."""
    bot, ann = mail_servers.add_user("bot"), mail_servers.add_user("ann")
    document = pdf("Read me again")
    message = mail(ann, bot, "Again", "see attached", "f3@ann.test")
    message.add_attachment(document, maintype="application", subtype="pdf", filename="again.pdf")
    mail_servers.send(message)
    settings = ImapSettings("127.0.0.1", mail_servers.imap_port, False, bot, PASSWORD, TlsHolder())

    async def connect() -> ImapConnection:
        conn = ImapConnection(settings)
        await conn.open()
        return conn

    conn = await connect()
    try:
        selected = await conn.select("INBOX")
        (uid,) = await conn.search("ALL")
    finally:
        await conn.close()
    base = f"imap://{bot}@127.0.0.1/INBOX"
    ref = f"{base};UIDVALIDITY={selected.uidvalidity}/;UID={uid}/;SECTION=2"

    async def read(ref: str) -> bytes:
        return b"".join([c async for c in read_part(ref, base, "INBOX", 2_000_000, connect)])

    assert await read(ref) == document
    with pytest.raises(MediaRefused, match="no longer in the mailbox"):
        await read(ref.replace(f"UID={uid}/", f"UID={uid + 50}/"))
    with pytest.raises(MediaRefused, match="renumbered"):
        await read(
            ref.replace(f"UIDVALIDITY={selected.uidvalidity}/", f"UIDVALIDITY={selected.uidvalidity + 1}/")
        )
    with pytest.raises(MediaRefused, match="no such attachment"):
        await read(ref.replace("SECTION=2", "SECTION=7"))
    with pytest.raises(MediaRefused, match="not in this gateway's mailbox"):
        await read(ref.replace(base, "imap://eve@elsewhere/INBOX"))
