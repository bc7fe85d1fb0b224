"""A real ``chatgate run`` on Socket Mode against the fake Slack, SIGKILLed between commit and ack.

The fake loses every ack while ``drop_acks`` is set, which is what Slack sees when the
process dies after committing and before its ack left. After the kill the fake redelivers
each unacked envelope (``retry_attempt`` > 0) to the next process, which acknowledges it as
a duplicate: each message is admitted once and answered once (a reply whose send the kill
cut short may be re-sent with the duplicate marker, never twice unmarked).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from slack_fake import BOT_USER, FakeSlack, message_event
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
        assert len(plain) == 1 and len(answers) - len(plain) <= 1, f"{text!r} answered {answers}"
    ids = [d for (d,) in rows(db, "SELECT delivery_id FROM inbox WHERE transport = 'slack'")]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == len(expected), "each event admitted once"
    assert {s for (s,) in rows(db, "SELECT status FROM inbox")} == {"done"}
    logs = gateway.logs()
    assert all(secret not in logs for secret in ENV.values())
