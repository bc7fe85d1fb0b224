"""One user's chat schedules are bounded across all their chats, not only per chat (issue 27,
finding 7: one client kept 600 ``/every`` schedules over 30 chats under a per-chat bound of 20).
The real ``ScheduleCommands`` over the real SQLite store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatgate.engine.schedule_commands import ChatScheduleLimits, ScheduleCommands

if TYPE_CHECKING:
    from support.engine_harness import MakeHarness


class Sink:
    def __init__(self) -> None:
        self.woken = 0

    def wake(self) -> None:
        self.woken += 1


async def test_a_users_schedules_are_bounded_across_their_chats_and_others_are_not_held_back(
    make_harness: MakeHarness,
) -> None:
    h = await make_harness(start=False)
    commands = ScheduleCommands(h.store, Sink(), ChatScheduleLimits(max_per_session=20, max_per_user=3))
    answers = []
    for n in range(5):  # five chats, one schedule each: under the per-chat bound every time
        chat = f"c{n}"
        inbound = h.inbound("/every 1h water", chat_id=chat, delivery_id=f"d{n}", user_id="heavy")
        answers.append(await commands.every(inbound, f"key:{chat}", "1h water"))
    assert [a.startswith("Schedule ") for a in answers] == [True, True, True, False, False], answers
    assert "you have 3 schedules across your chats" in answers[3]
    assert "/schedules delete" in answers[3]
    mine = [s for s in await h.store.list_schedules() if s.meta.get("created_by") == "heavy"]
    assert len(mine) == 3

    again = h.inbound("/every 1h water", chat_id="c0", delivery_id="d0", user_id="heavy")
    assert (await commands.every(again, "key:c0", "1h water")).startswith("Schedule "), "a redelivery"

    other = h.inbound("/every 1h tea", chat_id="c0", delivery_id="o1", user_id="light")
    assert (await commands.every(other, "key:c0", "1h tea")).startswith("Schedule ")
    assert len(await h.store.list_schedules()) == 4
