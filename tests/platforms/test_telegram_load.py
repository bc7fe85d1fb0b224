"""300 messages over 30 Telegram chats through a real gateway and its real Bot API client.

DMs, groups (two users each: per-user sessions) and forum topics (shared per topic)
all at once: every message is answered exactly once, in its own chat and topic,
quoting it, and each conversation's answers appear in the order its messages were sent.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from telegram_double import (
    BOT_ID,
    BotApiDouble,
    Chat,
    Gateways,
    User,
    echo_of,
    private,
    telegram_config,
)

from chatgate.domain.outbound import PREVIEW_CURSOR


def _conversations() -> list[tuple[Chat, User, int | None, int]]:
    """50 conversations in 30 chats, 10 messages per chat (Telegram's budget is ~1 message/s per chat).

    10 DMs (10 messages each); 10 groups with two users each (per-user sessions, 5 messages each);
    10 forums with two topics each (a session per topic, 5 messages each).
    """
    convs: list[tuple[Chat, User, int | None, int]] = []
    for n in range(10):
        user = User(1000 + n, f"Dee{n}", username=f"dee{n}")
        convs.append((private(user), user, None, 10))
    for n in range(10):
        group = Chat(-1001000000000 - n, "supergroup", title=f"Group {n}")
        for k in range(2):
            convs.append((group, User(2000 + 10 * n + k, f"Gus{n}{k}"), None, 5))
    for n in range(10):
        forum = Chat(-1002000000000 - n, "supergroup", title=f"Forum {n}", is_forum=True)
        for topic in (3, 4):
            convs.append((forum, User(3000 + 10 * n + topic, f"Tia{n}{topic}"), topic, 5))
    return convs


async def test_300_messages_over_30_chats_are_each_answered_once_in_their_chat_and_topic_in_order(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    convs = _conversations()
    users = sorted({str(user.id) for _, user, _, _ in convs})
    gateway = await gateways.start(telegram_config(double, tmp_path, telegram={"allow_users": users}))

    pushed: list[tuple[int, Chat, User, int | None, int, str]] = []  # conv, chat, user, topic, msg id, text
    for i in range(10):  # interleaved, like real traffic: every conversation's i-th message, then the next
        for c, (chat, user, topic, count) in enumerate(convs):
            if i >= count:
                continue
            text = f"m-{c}-{i}"
            _, message_id = await double.push_message(chat, user, text, topic=topic)
            pushed.append((c, chat, user, topic, message_id, text))
    last_update = double.next_update_id - 1

    await double.wait_for(lambda: len(double.all_sent()) >= 300, timeout=120, what="300 replies")
    await double.wait_for(lambda: double.confirmed_below == last_update + 1, timeout=30)
    # A reply that streamed for longer than the edit interval (a loaded machine) is first sent as
    # a preview; its final edits it once the chat's rate budget (one call a second) allows. So
    # the last of the 300 messages may still be a preview: wait for the finals' edits as well.
    with contextlib.suppress(TimeoutError):
        await double.wait_for(
            lambda: not [m for m in double.all_sent() if PREVIEW_CURSOR in m.text], timeout=30
        )

    sent = double.all_sent()
    assert len(sent) == 300, f"{len(sent)} bot messages for 300 inbound messages"
    assert not [m for m in sent if PREVIEW_CURSOR in m.text], "a preview was left with its cursor"
    for c, chat, _user, topic, message_id, text in pushed:
        answers = [m for m in double.view(chat.id) if m.reply_to == message_id and m.text == echo_of(text)]
        assert len(answers) == 1, f"conversation {c}: {text!r} answered {len(answers)} times"
        assert answers[0].thread_id == topic, (
            f"{text!r} answered in topic {answers[0].thread_id}, not {topic}"
        )
    for c in range(len(convs)):
        chat_id = convs[c][0].id
        by_text = {m.text: m.message_id for m in double.view(chat_id)}
        order = [by_text[echo_of(text)] for cc, *_, text in pushed if cc == c]
        assert order == sorted(order), f"conversation {c} answered out of order: {order}"

    assert await gateway.store.get_cursor(f"telegram:{BOT_ID}:offset") == str(last_update + 1)
    keys = {s.session_key for s in await gateway.store.list_sessions(1000)}
    assert "agent:main:telegram:dm:1000" in keys
    assert "agent:main:telegram:group:-1001000000000:2000" in keys  # a group: one session per user
    assert "agent:main:telegram:group:-1001000000000:2001" in keys
    assert "agent:main:telegram:thread:-1002000000000:3" in keys  # a topic: shared by its users
    assert len(keys) == 50
    assert len({chat.id for chat, *_ in convs}) == 30
