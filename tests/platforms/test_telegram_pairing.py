"""DM pairing end to end: a real ``chatgate run`` polling the Bot API double, and the real
``chatgate pairing`` command run beside it (another process, writing to the same database).

A stranger's DM is not admitted as a turn: it is refused (``pairing_required``) and answered
with a one-time code through the outbox; ``chatgate pairing approve CODE`` lets the next
message through without a restart; wrong codes lock approvals out; a code expires.
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from telegram_double import TOKEN, TOKEN_ENV, BotApiDouble, User, echo_of, private

from chatgate.domain.pairing import CODE_ALPHABET
from support.procs import GatewayProcess

pytestmark = pytest.mark.slow
CODE = re.compile(rf"\b([{CODE_ALPHABET}]{{8}})\b")


def _config(double: BotApiDouble, tmp_path: Path, **pairing: Any) -> dict[str, Any]:
    return {
        "agent": {"echo": {"chunk_delay_ms": 2}},
        "platforms": {
            "web": {"enabled": False},
            "telegram": {
                "enabled": True,
                "token_env": TOKEN_ENV,
                "pairing": True,
                "api_base": double.base,
                "poll_timeout_seconds": 5,
            },
        },
        "pairing": pairing,
        "locks": {"credential_dir": str(tmp_path / "locks")},
    }


async def pairing_cli(gateway: GatewayProcess, *args: str) -> tuple[int, str]:
    """``chatgate pairing ...`` in its own process (asyncio: the double shares this loop)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "chatgate", "pairing", *args,
        "--config", str(gateway.config_path), "--state-dir", str(gateway.state_dir),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()


def texts(double: BotApiDouble, chat_id: int) -> list[str]:
    return [m.text for m in double.view(chat_id)]


async def code_sent(double: BotApiDouble, chat_id: int, count: int = 1) -> str:
    await double.wait_for(lambda: len(texts(double, chat_id)) >= count, what="the pairing reply")
    found = CODE.search(texts(double, chat_id)[count - 1])
    assert found, texts(double, chat_id)
    return found.group(1)


@pytest.fixture
async def started(double: BotApiDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request):
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    gateway = GatewayProcess(tmp_path, _config(double, tmp_path, **request.param))
    await gateway.start()
    yield gateway
    await gateway.kill()


@pytest.mark.parametrize("started", [{}], indirect=True)
async def test_a_stranger_gets_a_code_and_once_approved_their_next_message_is_answered(
    double: BotApiDouble, started: GatewayProcess
) -> None:
    kim = User(4242, "Kim")
    await double.push_message(private(kim), kim, "hello?")
    code = await code_sent(double, kim.id)
    (reply,) = texts(double, kim.id)
    assert "pairing approve" in reply and "echo:" not in reply  # refused, not run as a turn
    status, listing = await pairing_cli(started, "list")
    assert status == 0 and code in listing and "4242" in listing and "Kim" in listing

    status, out = await pairing_cli(started, "approve", code.lower())
    assert status == 0, out
    assert "Approved telegram user 4242 (Kim)" in out
    await asyncio.sleep(1.5)  # the authorizer's approved-set cache is 1 s (docs/operations.md)
    await double.push_message(private(kim), kim, "now?")
    await double.wait_for(lambda: echo_of("now?") in texts(double, kim.id), what="the approved user's answer")
    assert echo_of("hello?") not in texts(double, kim.id)  # the refused message never became a turn
    status, listing = await pairing_cli(started, "list")
    assert "Paired users" in listing and "4242" in listing

    status, out = await pairing_cli(started, "revoke", "4242")
    assert status == 0, out
    await asyncio.sleep(1.5)  # the authorizer's approved-set cache is 1 s
    await double.push_message(private(kim), kim, "still there?")
    second = await code_sent(double, kim.id, count=3)  # a new code, not an answer
    assert second != code
    assert echo_of("still there?") not in texts(double, kim.id)


@pytest.mark.parametrize("started", [{"max_failed_approvals": 2}], indirect=True)
async def test_wrong_codes_lock_approvals_out_and_the_right_code_is_refused_while_locked(
    double: BotApiDouble, started: GatewayProcess
) -> None:
    ann = User(5151, "Ann")
    await double.push_message(private(ann), ann, "hi")
    code = await code_sent(double, ann.id)
    wrong = "".join(sorted(set(CODE_ALPHABET) - set(code)))[:8]
    status, out = await pairing_cli(started, "approve", wrong)
    assert status == 1 and "is not waiting" in out and "1 more wrong code" in out
    status, out = await pairing_cli(started, "approve", wrong[::-1])
    assert status == 1 and "locked until" in out
    status, out = await pairing_cli(started, "approve", code)
    assert status == 1 and "locked until" in out
    await double.push_message(private(ann), ann, "let me in")
    status, listing = await pairing_cli(started, "list")
    assert code in listing and "Paired users" not in listing
    await asyncio.sleep(1.5)  # long enough for a wrongly admitted message to be answered
    assert all("echo:" not in t for t in texts(double, ann.id))


@pytest.mark.parametrize("started", [{"code_ttl_seconds": 1}], indirect=True)
async def test_a_code_expires_and_the_stranger_gets_a_new_one_when_they_write_again(
    double: BotApiDouble, started: GatewayProcess
) -> None:
    lee = User(6161, "Lee")
    await double.push_message(private(lee), lee, "hi")
    code = await code_sent(double, lee.id)
    assert "expires in 1 seconds" in texts(double, lee.id)[0]
    listed: list[str] = []

    async def refresh() -> None:
        listed[:] = [(await pairing_cli(started, "list"))[1]]

    await refresh()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while code in listed[0]:
        assert loop.time() < deadline, "the code never expired"
        await asyncio.sleep(0.2)
        await refresh()
    status, out = await pairing_cli(started, "approve", code)
    assert status == 1 and "has expired" in out
    await double.push_message(private(lee), lee, "again")
    fresh = await code_sent(double, lee.id, count=2)
    assert fresh != code
    assert all("echo:" not in t for t in texts(double, lee.id))
