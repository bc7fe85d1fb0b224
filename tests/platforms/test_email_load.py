"""200 mails over 20 threads, through a real gateway, Dovecot and SMTP: each answered exactly once.

Every reply is read back from the senders' mailboxes over IMAP: one per mail, answering it
(``In-Reply-To``), in its thread (``References`` starts with the thread's root, ``Subject`` is
the thread's with one ``Re:``), with the text of that mail; and the store holds one inbox row
per mail in 20 sessions.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from email_support import body, gateway, ids, inbox_rows, replies_to, wait_for_replies
from mail_servers import MailServers, mail

pytestmark = pytest.mark.slow
THREADS = 20
PER_THREAD = 10


@pytest.mark.timeout(300)  # 200 mails, 200 turns, 200 SMTP sends and 400 deliveries on a shared 2-core box
async def test_two_hundred_mails_over_twenty_threads_are_answered_exactly_once(
    mail_servers: MailServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = mail_servers.add_user("bot")
    people = [mail_servers.add_user(f"p{n}") for n in range(4)]
    gw = gateway(mail_servers, tmp_path, monkeypatch, bot, ["@example.test"])
    await gw.start()
    sent: dict[str, tuple[str, int, str]] = {}  # message id -> (person, thread, text)
    started = time.monotonic()
    try:
        previous: dict[int, str] = {}
        for i in range(PER_THREAD):
            for t in range(THREADS):
                person = people[t % len(people)]
                mid, text = f"t{t}-m{i}@people.test", f"thread {t} message {i}"
                root = f"t{t}-m0@people.test"
                msg = mail(
                    person, bot, f"Topic {t}" if i == 0 else f"Re: Topic {t}", text, mid,
                    in_reply_to=previous.get(t), references=[root] if i else None,
                )  # fmt: skip
                await asyncio.to_thread(mail_servers.send, msg)
                sent[mid] = (person, t, text)
                previous[t] = mid
        for person in people:
            await wait_for_replies(mail_servers, person, len(sent) // len(people), 240, gw)
        elapsed = time.monotonic() - started
        assert await gw.terminate() == 0, gw.logs()
    finally:
        if gw.proc is not None and gw.proc.returncode is None:
            await gw.kill()

    answered: dict[str, list[object]] = {}
    for person in people:
        for mid, replies in (await replies_to(mail_servers, person)).items():
            answered.setdefault(mid, []).extend(replies)
    assert set(answered) == set(sent), "every mail answered, and nothing else"
    for mid, (_person, t, text) in sent.items():
        (reply,) = answered[mid]  # exactly once
        assert body(reply) == f"echo: {text}"  # type: ignore[arg-type]
        assert ids(reply["References"])[0] == f"t{t}-m0@people.test"  # type: ignore[index]
        assert ids(reply["References"])[-1] == mid  # type: ignore[index]
        assert reply["Subject"] == f"Re: Topic {t}"  # type: ignore[index]
    rows = inbox_rows(gw)
    assert len(rows) == len(sent) and len({key for _, key, _ in rows}) == THREADS
    assert {status for _, _, status in rows} == {"done"}
    print(f"\n200 mails over 20 threads answered once each in {elapsed:.1f}s (send to last reply read back)")
