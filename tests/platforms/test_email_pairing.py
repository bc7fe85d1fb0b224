"""Pairing by address, through admission: a stranger's mail gets a one-time code by mail, in its
thread; once the operator approves it, that address's next mail is answered."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest
from email_support import body, gateway, ids, inbox_rows, wait_for_replies
from mail_servers import MailServers, mail

from chatgate.domain.pairing import CODE_ALPHABET
from support.procs import GatewayProcess

pytestmark = pytest.mark.slow
CODE = re.compile(rf"\b([{CODE_ALPHABET}]{{8}})\b")


async def _pairing_cli(gw: GatewayProcess, *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "chatgate", "pairing", *args,
        "--config", str(gw.config_path), "--state-dir", str(gw.state_dir),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_a_stranger_is_paired_by_address(
    mail_servers: MailServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot, kim = mail_servers.add_user("bot"), mail_servers.add_user("kim")
    # polling instead of IDLE here: the fallback for servers without it
    gw = gateway(mail_servers, tmp_path, monkeypatch, bot, [], pairing=True, idle=False, poll_seconds=0.5)
    await gw.start()
    try:
        await asyncio.to_thread(mail_servers.send, mail(kim, bot, "Hello", "may I?", "p1@kim.test"))
        await wait_for_replies(mail_servers, kim, 1, 60, gw)
        (offer,) = await mail_servers.aread(kim)
        assert ids(offer["In-Reply-To"]) == ["p1@kim.test"] and offer["Subject"] == "Re: Hello"
        assert "echo:" not in body(offer), "refused at admission, never run as a turn"
        found = CODE.search(body(offer))
        assert found, body(offer)
        status, out = await _pairing_cli(gw, "approve", found.group(1))
        assert status == 0, out
        await asyncio.sleep(1.5)  # the authorizer's approved-set cache is 1 s (docs/operations.md)
        await asyncio.to_thread(mail_servers.send, mail(kim, bot, "Hello", "now?", "p2@kim.test"))
        await wait_for_replies(mail_servers, kim, 2, 60, gw)
        assert await gw.terminate() == 0, gw.logs()
    finally:
        if gw.proc is not None and gw.proc.returncode is None:
            await gw.kill()
    answer = [m for m in await mail_servers.aread(kim) if ids(m["In-Reply-To"]) == ["p2@kim.test"]]
    assert [body(m) for m in answer] == ["echo: now?"]
    assert [d for d, _, _ in inbox_rows(gw)] == [f"{bot}:p2@kim.test"]
