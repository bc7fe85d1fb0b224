"""``chatgate init`` through a real pseudo-terminal for Telegram, Discord, Slack, email and the
relay (Matrix's is in ``matrix/test_matrix_init.py``): a refused
credential is asked for again with the reason, nothing typed before is lost, the files are
written, and ``chatgate run`` on them answers on that platform. The dialogue is
``support/init_pty.py``.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
import yaml
from discord_fake.harness import ANN, build_world, fake, wait_for
from discord_fake.server import FakeDiscord
from discord_fake.state import TOKEN as DISCORD_TOKEN
from mail_servers import PASSWORD, MailServers, email_section, mail
from slack_fake import FakeSlack, message_event
from slack_fake.payloads import APP_TOKEN, BOT_TOKEN
from telegram_double import BOT_USERNAME, BotApiDouble
from telegram_double import TOKEN as TELEGRAM_TOKEN

from chatgate.domain.pairing import CODE_ALPHABET
from relaysim import RelaySimulator
from support.init_pty import Step, init_dialogue, paste, run_written, secrets_written

__all__ = ["fake"]
pytestmark = pytest.mark.slow


async def test_telegram_init_asks_again_for_a_refused_token_then_run_answers(
    double: BotApiDouble, tmp_path: Path
) -> None:
    token = paste("TELEGRAM_BOT_TOKEN", "the token from @BotFather")
    steps: list[Step] = [
        (r"holding the bot token \[TELEGRAM_BOT_TOKEN\]: ", ""),
        (token, "123:not-the-token"),
        (r"Telegram check failed: .*Paste it again \(or Enter to skip\)\.", None),
        (token, TELEGRAM_TOKEN),
        (rf"the token belongs to @{BOT_USERNAME}", None),
    ]
    flags = ["--platform", "telegram", "--telegram-api-base", double.base]
    transcript = await asyncio.to_thread(init_dialogue, tmp_path, flags, steps)
    assert TELEGRAM_TOKEN not in transcript and "not-the-token" not in transcript
    assert secrets_written(tmp_path) == {"TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN}
    assert TELEGRAM_TOKEN not in (tmp_path / "chatgate.yaml").read_text()
    gateway = await run_written(tmp_path)
    try:
        assert re.search(rf"\b[{CODE_ALPHABET}]{{8}}\b", await double.pairing_code_for_a_stranger())
    finally:
        await gateway.kill()


async def test_discord_init_asks_again_for_a_refused_token_then_run_answers(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    world = build_world(fake)
    token = paste("DISCORD_BOT_TOKEN", "the bot token")
    steps: list[Step] = [
        (r"holding the bot token \[DISCORD_BOT_TOKEN\]: ", ""),
        (token, "not-the-token"),
        (r"Discord check failed: .*401.*Paste it again \(or Enter to skip\)\.", None),
        (token, DISCORD_TOKEN),
        (r"Discord: ", None),
    ]
    flags = ["--platform", "discord", "--discord-api-base", fake.base + "/api/v10"]
    transcript = await asyncio.to_thread(init_dialogue, tmp_path, flags, steps)
    assert DISCORD_TOKEN not in transcript and "not-the-token" not in transcript
    assert "Connector URL" not in transcript and "loopback is open" not in transcript  # item 1, item 8
    assert secrets_written(tmp_path) == {"DISCORD_BOT_TOKEN": DISCORD_TOKEN}
    written = (tmp_path / "chatgate.yaml").read_text()
    assert DISCORD_TOKEN not in written and "token_env: DISCORD_BOT_TOKEN" in written

    gateway = await run_written(tmp_path)
    try:
        await wait_for(lambda: fake.gateway.identifies >= 1, 60, "the gateway's IDENTIFY")
        await fake.post(world.dm, ANN, "hi bot")
        code = re.compile(rf"\b[{CODE_ALPHABET}]{{8}}\b")

        def replies() -> list[str]:
            said = [m.content for posted in fake.messages.values() for m in posted]
            return [text for text in said if text != "hi bot" and code.search(text)]

        await wait_for(replies, 60, "the pairing reply on Discord")
    finally:
        await gateway.kill()


async def test_slack_init_asks_again_for_a_refused_token_then_run_answers(
    fake_slack: FakeSlack, tmp_path: Path
) -> None:
    bot = paste("SLACK_BOT_TOKEN", r"the bot token \(xoxb-\)")
    steps: list[Step] = [
        (bot, "xoxb-not-the-token"),
        (r"Slack check failed: .*Paste it again \(or Enter to skip\)\.", None),
        (bot, BOT_TOKEN),
        (r"Slack: ", None),
        (paste("SLACK_APP_TOKEN", r"the app-level token.*"), APP_TOKEN),
    ]
    flags = ["--platform", "slack", "--slack-mode", "socket", "--slack-bot-token-env", "SLACK_BOT_TOKEN",
             "--slack-app-token-env", "SLACK_APP_TOKEN", "--slack-api-base", fake_slack.api_base]  # fmt: skip
    transcript = await asyncio.to_thread(init_dialogue, tmp_path, flags, steps)
    assert BOT_TOKEN not in transcript and "xoxb-not-the-token" not in transcript
    assert secrets_written(tmp_path) == {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN}
    gateway = await run_written(tmp_path)
    try:
        await fake_slack.socket.connected.wait()
        await fake_slack.push_event(message_event("D9", "U9", "hi bot"))
        code = re.compile(rf"\b[{CODE_ALPHABET}]{{8}}\b")
        await fake_slack.wait_for(
            lambda: any(code.search(m.text) for m in fake_slack.view("D9")), 60, "the code"
        )
    finally:
        await gateway.kill()


async def test_email_init_asks_again_for_a_refused_password_then_run_answers(
    mail_servers: MailServers, tmp_path: Path
) -> None:
    bot, ann = mail_servers.add_user("initbot"), mail_servers.add_user("initann")
    # The test servers' ports and plain connections are no questions of init: a first file holds
    # them, and init keeps the keys it does not ask about.
    local = email_section(mail_servers, bot, [], password_env="EMAIL_PASSWORD")
    (tmp_path / "chatgate.yaml").write_text(yaml.safe_dump({"platforms": {"email": local}}))
    password = paste("EMAIL_PASSWORD", "the mailbox password")
    steps: list[Step] = [
        (r"The mailbox's address \[.*\]: ", ""),
        (r"IMAP server \[127\.0\.0\.1\]: ", ""),
        (r"SMTP server \[127\.0\.0\.1\]: ", ""),
        (r"holding the password \[EMAIL_PASSWORD\]: ", ""),
        (password, "not-the-password"),
        (r"Email check failed: .*refused the login.*Paste it again \(or Enter to skip\)\.", None),
        (password, PASSWORD),
        (r"Email: .* logs in", None),
    ]
    transcript = await asyncio.to_thread(init_dialogue, tmp_path, ["--platform", "email"], steps, ann)
    assert PASSWORD not in transcript and "not-the-password" not in transcript
    assert secrets_written(tmp_path) == {"EMAIL_PASSWORD": PASSWORD}
    gateway = await run_written(tmp_path)
    try:
        mail_servers.send(mail(ann, bot, "a question", "hello bot", "q1@init.test"))
        deadline = asyncio.get_running_loop().time() + 60
        while not await mail_servers.aread(ann):
            assert asyncio.get_running_loop().time() < deadline, "no answer by email"
            await asyncio.sleep(0.2)
        (answer,) = await mail_servers.aread(ann)
        assert "echo: hello bot" in answer.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    finally:
        await gateway.kill()


async def test_relay_init_asks_again_for_a_refused_secret_then_run_answers(tmp_path: Path) -> None:
    sim = RelaySimulator(tmp_path / "relay.db", {"gw-init": ["the-relay-secret"]}, [{"platform": "discord"}])
    await sim.start()
    try:
        secret = paste("CHATGATE_RELAY_SECRET", "the relay secret")
        steps: list[Step] = [
            (r"Connector URL .*: ", sim.relay_url),
            (r"Gateway id the connector enrolled: ", "gw-init"),
            (r"holding the relay secret \[CHATGATE_RELAY_SECRET\]: ", ""),
            (r"Platforms the connector fronts .*\[discord\]: ", ""),
            (r"discord bot id .*: ", "bot1"),
            (secret, "not-the-secret"),
            (r"Relay check failed: .*refused.*Paste it again \(or Enter to skip\)\.", None),
            (secret, "the-relay-secret"),
            (r"Relay: ", None),
        ]
        transcript = await asyncio.to_thread(init_dialogue, tmp_path, ["--platform", "relay"], steps, "u1")
        assert "the-relay-secret" not in transcript and "not-the-secret" not in transcript
        assert secrets_written(tmp_path) == {"CHATGATE_RELAY_SECRET": "the-relay-secret"}
        gateway = await run_written(tmp_path)
        try:
            await sim.wait_connected("gw-init", 60)
            source = {"platform": "discord", "chat_id": "dm1", "chat_type": "dm", "user_id": "u1"}
            await sim.inject_inbound("gw-init", {"text": "hello relay", "message_id": "m1", "source": source})

            def answered() -> bool:
                return any(o.action.get("content") == "echo: hello relay" for o in sim.ops("gw-init"))

            await wait_for(answered, 60, "the answer through the relay")
        finally:
            await gateway.kill()
    finally:
        await sim.stop()
