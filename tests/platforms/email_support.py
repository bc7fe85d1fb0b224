"""What the email tests share: a gateway subprocess on a real mailbox, and reading replies back."""

from __future__ import annotations

import asyncio
import sqlite3
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from mail_servers import PASSWORD, MailServers, email_section

from support.procs import GatewayProcess

MARKER = "(possible repeat) "
PASSWORD_ENV = "EMAIL_TEST_PASSWORD"


def gateway(
    servers: MailServers,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    bot: str,
    allow_from: list[str],
    **section: Any,
) -> GatewayProcess:
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    config = {
        "agent": {"echo": {"chunk_delay_ms": 0}},
        "platforms": {"web": {"enabled": False}, "email": email_section(servers, bot, allow_from, **section)},
        "locks": {"credential_dir": str(tmp_path / "locks")},
        "delivery": {"duplicate_marker": MARKER},
    }
    return GatewayProcess(tmp_path, config)


def body(msg: EmailMessage) -> str:
    part = msg.get_body(("plain",))
    return "" if part is None else str(part.get_content()).strip()  # type: ignore[attr-defined]


def ids(value: object) -> list[str]:
    return [v.strip("<>") for v in str(value or "").split()]


async def replies_to(servers: MailServers, user: str) -> dict[str, list[EmailMessage]]:
    """The gateway's replies in ``user``'s inbox, by the Message-ID they answer."""
    found: dict[str, list[EmailMessage]] = {}
    for msg in await servers.aread(user):
        found.setdefault(str(msg.get("In-Reply-To") or "").strip("<>"), []).append(msg)
    return found


async def wait_for_replies(
    servers: MailServers, user: str, count: int, timeout: float, gw: GatewayProcess, folder: str = "INBOX"
) -> None:
    """Wait (bounded) until ``user``'s ``folder`` holds ``count`` mails, read back over IMAP."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (n := len(await servers.aread(user, folder))) < count:
        if loop.time() > deadline:
            raise AssertionError(f"{n} of {count} mails in {user}'s {folder} after {timeout}s: {gw.logs()}")
        await asyncio.sleep(0.2)


def inbox_rows(gw: GatewayProcess) -> list[tuple[str, str, str]]:
    db = sqlite3.connect(gw.state_dir / "chatgate.db", timeout=30)
    try:
        query = "SELECT delivery_id, session_key, status FROM inbox WHERE transport = 'email' ORDER BY seq"
        return list(db.execute(query))
    finally:
        db.close()


def rejected(gw: GatewayProcess) -> list[tuple[str, str]]:
    db = sqlite3.connect(gw.state_dir / "chatgate.db", timeout=30)
    try:
        return list(db.execute("SELECT delivery_id, reason FROM rejected_inbound"))
    finally:
        db.close()
