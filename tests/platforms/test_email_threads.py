"""A real gateway on a real mailbox (Dovecot, SMTP into it): threads, headers, what is never answered.

Replies are read back from the recipient's mailbox over IMAP: threading headers, subject,
the text the agent saw (quoted history and signature stripped), one reply per mail.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from email_support import body, gateway, ids, inbox_rows, rejected, replies_to, wait_for_replies
from mail_servers import MailServers, mail

pytestmark = pytest.mark.slow


async def test_a_thread_is_one_session_and_replies_are_threaded(
    mail_servers: MailServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot, ann = mail_servers.add_user("bot"), mail_servers.add_user("ann")
    gw = gateway(mail_servers, tmp_path, monkeypatch, bot, [ann])
    await gw.start()
    try:
        mail_servers.send(mail(ann, bot, "Plans for Friday", "Can we meet at ten?", "m1@ann.test"))
        await wait_for_replies(mail_servers, ann, 1, 60, gw)
        first = (await mail_servers.aread(ann))[0]
        assert ids(first["In-Reply-To"]) == ["m1@ann.test"]
        assert ids(first["References"]) == ["m1@ann.test"]
        assert first["Subject"] == "Re: Plans for Friday"
        assert first["From"] == bot and first["To"] == ann
        assert first["Auto-Submitted"] == "auto-replied"
        assert body(first) == "echo: Can we meet at ten?"
        ours = str(first["Message-ID"]).strip("<>")

        quoted = (
            "Ten is fine.\n\nOn Fri, 4 Dec 2026 at 10:00, Bot <bot@example.test> wrote:\n"
            "> echo: Can we meet at ten?\n>\n\n-- \nAnn, from her desk\n"
        )
        # her client sends only In-Reply-To: the thread is still found through our Message-ID
        mail_servers.send(mail(ann, bot, "Re: Plans for Friday", quoted, "m2@ann.test", in_reply_to=ours))
        await wait_for_replies(mail_servers, ann, 2, 60, gw)
        second = (await replies_to(mail_servers, ann))["m2@ann.test"]
        assert len(second) == 1
        assert body(second[0]) == "echo: Ten is fine."
        assert second[0]["Subject"] == "Re: Plans for Friday"
        assert ids(second[0]["References"])[-1] == "m2@ann.test"

        mail_servers.send(mail(ann, bot, "Another topic", "<b>New</b> thread", "m3@ann.test"))
        await wait_for_replies(mail_servers, ann, 3, 60, gw)
        # each reply's bcc copy arrives in the bot's inbox, and the reader files it into Sent
        await wait_for_replies(mail_servers, bot, 3, 60, gw, folder="Sent")
        assert await gw.terminate() == 0, gw.logs()
    finally:
        if gw.proc is not None and gw.proc.returncode is None:
            await gw.kill()
    sessions = {key for _, key, _ in inbox_rows(gw)}
    assert len(inbox_rows(gw)) == 3 and len(sessions) == 2, inbox_rows(gw)
    sent = await mail_servers.aread(bot, "Sent")
    assert sorted(ids(m["In-Reply-To"])[0] for m in sent) == ["m1@ann.test", "m2@ann.test", "m3@ann.test"]
    assert not [m for m in await mail_servers.aread(bot) if str(m["From"]) == bot]


async def test_machines_lists_bounces_and_strangers_are_never_answered(
    mail_servers: MailServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot, ann, eve = mail_servers.add_user("bot"), mail_servers.add_user("ann"), mail_servers.add_user("eve")
    gw = gateway(mail_servers, tmp_path, monkeypatch, bot, ["@nowhere.test", ann])
    await gw.start()
    try:
        machine = [
            {"Auto-Submitted": "auto-replied"},
            {"Precedence": "bulk"},
            {"List-Id": "<news.example.test>"},
            {"X-Autoreply": "yes"},
        ]
        for n, headers in enumerate(machine):
            auto = mail(ann, bot, "Out of office", "I am away", f"auto{n}@ann.test", headers=headers)
            mail_servers.send(auto)
        bounce = mail(ann, bot, "bounce", "undeliverable", "b1@ann.test")
        mail_servers.send(bounce, mail_from="")  # the null sender <>
        mail_servers.send(mail(eve, bot, "hi", "let me in", "e1@eve.test"))
        mail_servers.send(mail(ann, bot, "real", "a real question", "r1@ann.test"))  # the last one sent
        await wait_for_replies(mail_servers, ann, 1, 60, gw)
        assert await gw.terminate() == 0, gw.logs()
    finally:
        if gw.proc is not None and gw.proc.returncode is None:
            await gw.kill()
    answered = await replies_to(mail_servers, ann)
    assert list(answered) == ["r1@ann.test"], answered.keys()
    assert not await mail_servers.aread(eve), "a stranger is refused, not answered"
    assert [d for d, _ in rejected(gw)] == [f"{bot}:e1@eve.test"], rejected(gw)
    assert [d for d, _, _ in inbox_rows(gw)] == [f"{bot}:r1@ann.test"]
