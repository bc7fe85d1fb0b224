"""``chatgate init``'s email questions and their live check, against the real Dovecot and SMTP server."""

from __future__ import annotations

import argparse
import asyncio

import pytest
from mail_servers import PASSWORD, MailServers

from chatgate.platforms.email.checks import check_mailbox
from chatgate.platforms.email.plugin import PLUGIN
from chatgate.platforms.email.section import EmailSection
from chatgate.platforms.kit.conform import conform
from chatgate.platforms.kit.init import Aborted, CheckFailed, Prompter


def _args(**values: str | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    PLUGIN.init_arguments(parser)
    args = parser.parse_args([])
    for name, value in values.items():
        setattr(args, name, value)
    return args


def _local(servers: MailServers) -> dict[str, object]:
    return {
        "imap_port": servers.imap_port, "imap_security": "none",
        "smtp_port": servers.smtp_port, "smtp_security": "none",
    }  # fmt: skip


async def test_init_asks_checks_the_mailbox_live_and_writes_the_section(
    mail_servers: MailServers, capsys: pytest.CaptureFixture[str]
) -> None:
    bot = mail_servers.add_user("bot")
    prompter = Prompter(interactive=False, environ={"MAIL_PW": PASSWORD})
    args = _args(
        email_address=bot.upper(), email_imap_host="127.0.0.1", email_smtp_host="127.0.0.1",
        email_password_env="MAIL_PW", email_allow_from="ann@example.test, @friends.test",
    )  # fmt: skip
    answers = await asyncio.to_thread(PLUGIN.init_ask, prompter, _local(mail_servers), args)
    assert answers.secrets == ["MAIL_PW"]
    assert answers.section["address"] == bot and answers.section["allow_from"] == [
        "ann@example.test",
        "@friends.test",
    ]
    out = capsys.readouterr().out
    assert f"Email: {bot} logs in on 127.0.0.1 (IDLE)" in out and PASSWORD not in out
    conform(EmailSection, {"enabled": True, **answers.section})


async def test_a_wrong_password_fails_the_check_without_showing_it(mail_servers: MailServers) -> None:
    bot = mail_servers.add_user("bot")
    section = conform(
        EmailSection,
        {
            "enabled": True,
            "address": bot,
            "imap_host": "127.0.0.1",
            "smtp_host": "127.0.0.1",
            **_local(mail_servers),
        },
    )
    with pytest.raises(CheckFailed) as failed:
        await asyncio.to_thread(check_mailbox, section, "not-the-password")
    assert "refused the login" in str(failed.value) and "not-the-password" not in str(failed.value)
    prompter = Prompter(interactive=False, environ={"MAIL_PW": "not-the-password"})
    args = _args(
        email_address=bot,
        email_imap_host="127.0.0.1",
        email_smtp_host="127.0.0.1",
        email_password_env="MAIL_PW",
    )
    with pytest.raises(Aborted):
        await asyncio.to_thread(PLUGIN.init_ask, prompter, _local(mail_servers), args)
