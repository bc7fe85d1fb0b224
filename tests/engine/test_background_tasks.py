"""``/bg``, ``/tasks`` and ``/cancel`` in the real pipeline (SQLite file, scheduler, turns, delivery):
a task runs in a session of its own, concurrently with the chat, and answers into the chat; a
redelivered ``/bg`` starts one task; ``/cancel`` stops only this chat's running task."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from support.engine_harness import Harness, MakeHarness

    Wait = Callable[..., Awaitable[Any]]


async def command_replies(h: Harness, wait: Wait, count: int) -> list[str]:
    await wait(lambda: len(h.adapter.rows("c1", ["command"])) >= count, message=f"{count} command replies")
    return [r.text for r in h.adapter.rows("c1", ["command"])]


async def test_bg_runs_in_its_own_session_beside_the_chat_and_answers_into_the_chat(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness()
    chat_gate = h.agent.hold("long")
    await h.send("long", delivery_id="long")
    await wait(lambda: h.agent.running("long"), message="the chat's turn running")
    admitted = await h.send("/bg summarize the notes", delivery_id="bg-1")
    await h.send("/bg summarize the notes", delivery_id="bg-1")  # redelivered
    (started,) = await command_replies(h, wait, 1)
    assert started.startswith("Started task ") and "/cancel" in started
    (task,) = await h.store.list_tasks(admitted.session_key)
    assert task.kind == "bg" and task.child_key == f"{admitted.session_key}:task:{task.id}"

    finals = await h.finals("c1", 1)  # while the chat's own turn is still held
    assert finals == ["echo: summarize the notes"] and not chat_gate.is_set()
    (row,) = [r for r in h.adapter.rows("c1", ["final"])]
    assert row.in_reply_to == "ref-bg-1", "the answer quotes the /bg message"
    request = h.agent.requests(task.child_key)[0]
    assert request.history == (), "the task does not see the chat's history"
    chat_gate.set()
    assert await h.finals("c1", 2) == ["echo: summarize the notes", "echo: long"]
    await h.send("/tasks", delivery_id="tasks-1")
    listing = (await command_replies(h, wait, 2))[-1]
    assert f"{task.id} bg done: summarize the notes" in listing


async def test_cancel_stops_a_running_task_of_this_chat_only(make_harness: MakeHarness, wait: Wait) -> None:
    h = await make_harness()
    h.agent.hold("slow job")
    admitted = await h.send("/bg slow job", delivery_id="bg-slow")
    (task,) = await h.store.list_tasks(admitted.session_key)
    await wait(lambda: h.agent.running("slow job"), message="the task running")
    await h.send(f"/cancel {task.id}", delivery_id="other-chat", chat_id="c2")
    await h.send(f"/cancel {task.id}", delivery_id="cancel-1")
    await h.send(f"/cancel {task.id}", delivery_id="cancel-2")
    await h.send("/cancel", delivery_id="cancel-3")
    replies = await command_replies(h, wait, 4)
    assert replies[1:] == [f"Cancelled task {task.id}.", f"Task {task.id} has ended already (cancelled).",
                           "Write /cancel <id>; /tasks lists the ids."]  # fmt: skip
    other = [r.text for r in h.adapter.rows("c2", ["command"])]
    assert other == [f"No task {task.id!r} here; /tasks lists this chat's tasks."]
    await wait(lambda: not h.agent.running("slow job"), message="the task's turn stopped")
    stored = await h.store.get_task(task.id)
    assert stored is not None and stored.status == "cancelled"
    assert h.adapter.rows("c1", ["final"]) == [], "a cancelled task posts nothing"


async def test_bg_without_a_prompt_and_tasks_with_none_say_what_to_do(
    make_harness: MakeHarness, wait: Wait
) -> None:
    h = await make_harness()
    await h.send("/bg")
    await h.send("/tasks")
    empty, none = await command_replies(h, wait, 2)
    assert empty.startswith("Not started: say what the task is")
    assert none == "No tasks in this chat. Start one with /bg <what to do>."
