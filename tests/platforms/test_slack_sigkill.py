"""A real ``chatgate run`` on Socket Mode against the fake Slack: SIGKILLed between commit and ack,
and a Block Kit approval clicked.

The fake loses every ack while ``drop_acks`` is set, which is what Slack sees when the
process dies after committing and before its ack left. After the kill the fake redelivers
each unacked envelope (``retry_attempt`` > 0) to the next process, which acknowledges it as
a duplicate: each message is admitted once and answered once (a reply whose send the kill
cut short may be re-sent with the duplicate marker, never twice unmarked).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from slack_fake import BOT_USER, FakeSlack, Posted, block_action, message_event
from slack_fake.gateway import ENV, echo_of, rows, slack_values

from support.procs import GatewayProcess

pytestmark = pytest.mark.slow
MARKER = "(possible repeat) "


async def test_sigkill_between_commit_and_ack_redelivers_and_answers_once(
    fake_slack: FakeSlack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    values = slack_values(fake_slack, tmp_path, delivery={"duplicate_marker": MARKER})
    values.pop("http")
    gateway = GatewayProcess(tmp_path, values)
    db = gateway.state_dir / "chatgate.db"
    await gateway.start()
    try:
        await fake_slack.wait_for(fake_slack.socket.connected.is_set, timeout=60, what="the socket")
        fake_slack.socket.drop_acks = True
        lost = message_event("D1", "U1", "committed, ack lost")
        envelope = await fake_slack.push_event(lost)
        await fake_slack.wait_for(
            lambda: rows(db, "SELECT 1 FROM inbox WHERE delivery_id = ?", lost["event_id"]),
            timeout=60,
            what="the commit",
        )
        await fake_slack.wait_for(
            lambda: fake_slack.socket.dropped_acks >= 1, timeout=30, what="the lost ack"
        )
        await gateway.kill()
        assert envelope.acked_at is None
        fake_slack.socket.drop_acks = False

        burst = [
            message_event(f"C{n % 5}", f"U{1 + n % 2}", f"<@{BOT_USER}> burst {n}", channel_type="channel")
            for n in range(25)
        ] + [message_event(f"D{10 + n % 5}", "U1", f"dm burst {n}") for n in range(25)]
        for body in burst:  # queued at "Slack" while no gateway runs
            await fake_slack.push_event(body)
        await gateway.start()
        await fake_slack.wait_for(lambda: not fake_slack.socket.unacked(), timeout=90, what="every ack")
        assert envelope.attempts >= 1, "the lost-ack envelope was not redelivered"

        expected = [(lost["event"]["channel"], "committed, ack lost")] + [
            (b["event"]["channel"], b["event"]["text"].replace(f"<@{BOT_USER}> ", "")) for b in burst
        ]

        def answered() -> bool:
            return all(
                any(m.text.endswith(echo_of(text)) for m in fake_slack.view(channel))
                for channel, text in expected
            )

        await fake_slack.wait_for(answered, timeout=90, what="every message answered")
        assert await gateway.terminate() == 0, gateway.logs()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()

    for channel, text in expected:
        answers = [m.text for m in fake_slack.view(channel) if m.text.endswith(echo_of(text))]
        plain = [a for a in answers if a == echo_of(text)]
        # Never twice unmarked; a send the kill cut short is sent again marked (whether or not the
        # first one reached Slack before the kill: the marked copy may be the only one).
        assert answers and len(plain) <= 1 and len(answers) - len(plain) <= 1, f"{text!r} answered {answers}"
    ids = [d for (d,) in rows(db, "SELECT delivery_id FROM inbox WHERE transport = 'slack'")]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == len(expected), "each event admitted once"
    assert {s for (s,) in rows(db, "SELECT status FROM inbox")} == {"done"}
    logs = gateway.logs()
    assert all(secret not in logs for secret in ENV.values())


async def test_a_block_kit_approval_click_is_answered_by_a_real_gateway(
    fake_slack: FakeSlack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    workdir = tmp_path / "work"
    (workdir / "x").mkdir(parents=True)
    values = slack_values(
        fake_slack,
        tmp_path,
        tools={"enabled": True, "workdir": str(workdir)},
        approvals={"timeout_seconds": 60},
        agent={"echo": {"chunk_delay_ms": 0}},
    )
    values.pop("http")
    gateway = GatewayProcess(tmp_path, values)
    await gateway.start()
    try:
        await fake_slack.wait_for(fake_slack.socket.connected.is_set, timeout=60, what="the socket")
        await fake_slack.push_event(message_event("D1", "U1", "!sh rm -rf ./x"))

        def prompt() -> Posted | None:
            return next((m for m in fake_slack.view("D1") if m.blocks), None)

        await fake_slack.wait_for(prompt, timeout=60, what="the Block Kit prompt")
        shown = prompt()
        assert shown is not None and shown.blocks is not None
        [actions] = [b for b in shown.blocks if b["type"] == "actions"]
        once = next(e["value"] for e in actions["elements"] if e["value"].endswith(":once"))
        click = await fake_slack.push_interactive(block_action("D1", "U1", shown.ts, once))
        await fake_slack.wait_for(lambda: not (workdir / "x").exists(), timeout=60, what="the command to run")
        await fake_slack.wait_for(lambda: not shown.blocks, timeout=30, what="the buttons to go")
        assert "Approved" in shown.text and click.acked_at is not None
        assert await gateway.terminate() == 0, gateway.logs()
    finally:
        if gateway.proc is not None and gateway.proc.returncode is None:
            await gateway.kill()
