"""The tasks role's contract: a task and its child's input commit together, once; a child's turn
commit finishes its task and delivers a delegated completion to the parent's inbox in the same
transaction, unless the parent was reset since the dispatch; cancel and close are terminal."""

from __future__ import annotations

from msgspec.structs import replace

from chatgate.domain.background import TASK_TRANSPORT, TaskRecord, child_delivery_id, child_session_key
from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbound import Inbound
from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.store_roles import Leases, Tasks
from chatgate.domain.turns import TurnOutcome
from contract.kit import T0, covers, req
from support.store_values import src


def task(
    tid: str = "t1", *, kind: str = "bg", parent: str = "k1", sid: str | None = None, **kw
) -> TaskRecord:
    base = TaskRecord(tid, kind, parent, sid, child_session_key(parent, tid), src(), f"do {tid}", T0)  # type: ignore[arg-type]
    return replace(base, **kw)


def first(t: TaskRecord) -> AdmitRequest:
    inbound = Inbound(
        transport=TASK_TRANSPORT,
        delivery_id=child_delivery_id(t.id),
        source=t.origin,
        text=t.prompt,
        payload={"task": {"id": t.id, "kind": t.kind, "parent": t.parent_key}},
    )
    return AdmitRequest(inbound=inbound, session_key=t.child_key)


async def answer_child(store, t: TaskRecord, text: str = "the answer") -> None:
    claims = await store.claim_sessions("w1", 10, 30.0, 1)
    for other in claims:
        if other.session_key != t.child_key:  # give back what this helper did not come for
            await store.abandon_turn("w1", other.session_key, tuple(i.seq for i in other.items), None, None)
    (claim,) = [c for c in claims if c.session_key == t.child_key]
    out = TurnOutcome(
        t.child_key, claim.session_id, tuple(i.seq for i in claim.items),
        (HistoryEntry("user", t.prompt), HistoryEntry("assistant", text)), (), "ok",
    )  # fmt: skip
    await store.complete_turn("w1", out, 30.0, 1)


async def parent_sid(store, key: str = "k1") -> str:
    info = await store.session_info(key)
    assert info is not None
    return info.session_id


@covers(Tasks.start_task, Tasks.get_task)
async def test_a_task_and_its_childs_input_commit_together_and_once(store):
    t = task()
    assert await store.start_task(t, first(t))
    assert not await store.start_task(replace(t, prompt="other"), first(t))
    assert await store.get_task("t1") == t
    assert await store.get_task("nope") is None
    (claim,) = await store.claim_sessions("w1", 10, 30.0, 1)
    assert (claim.session_key, [i.inbound.text for i in claim.items]) == (t.child_key, ["do t1"])


@covers(Tasks.list_tasks)
async def test_list_gives_one_parents_tasks_newest_first(store):
    for i, parent in enumerate(["k1", "k1", "k2"]):
        t = task(f"t{i}", parent=parent, created_at=T0 + i)
        await store.start_task(t, first(t))
    assert [t.id for t in await store.list_tasks("k1")] == ["t1", "t0"]
    assert [t.id for t in await store.list_tasks("k1", limit=1)] == ["t1"]
    assert await store.list_tasks("k9") == []


@covers(Leases.complete_turn, Tasks.get_task)
async def test_a_bg_childs_commit_marks_its_task_done_with_the_answer(store):
    t = task()
    await store.start_task(t, first(t))
    await answer_child(store, t)
    done = await store.get_task("t1")
    assert done is not None and (done.status, done.result) == ("done", "the answer")
    assert await store.claim_sessions("w1", 10, 30.0, 1) == [], (
        "a bg task's answer is the chat's, not a parent event"
    )


@covers(Leases.complete_turn, Tasks.start_task)
async def test_a_delegated_childs_commit_puts_the_completion_in_the_parents_inbox(store):
    await store.admit(req("m1", "k1", queued=False))  # the parent session, idle
    t = task(kind="delegate", sid=await parent_sid(store))
    assert await store.start_task(t, first(t))
    await answer_child(store, t, "42")
    done = await store.get_task(t.id)
    assert done is not None and (done.status, done.result) == ("done", "42")
    (claim,) = await store.claim_sessions("w2", 10, 30.0, 5)
    assert claim.session_key == "k1"
    (item,) = claim.items
    assert item.inbound.delivery_id == "task-done:t1" and item.inbound.source == t.origin
    assert "[delegated task t1 finished]" in item.inbound.text and "Result: 42" in item.inbound.text


@covers(Leases.complete_turn)
async def test_a_completion_after_the_parent_was_reset_is_dropped_and_says_why(store):
    await store.admit(req("m1", "k1", queued=False))
    t = task(kind="delegate", sid=await parent_sid(store))
    await store.start_task(t, first(t))
    await store.admit(req("new", "k1", "/new", queued=False, reset_session=True))
    await answer_child(store, t)
    dropped = await store.get_task(t.id)
    assert dropped is not None and dropped.status == "dropped" and "/new" in (dropped.note or "")
    assert await store.claim_sessions("w1", 10, 30.0, 1) == [], "nothing reached the parent"


@covers(Tasks.cancel_task)
async def test_cancel_ends_a_running_task_and_its_childs_waiting_input(store):
    t = task()
    await store.start_task(t, first(t))
    cancelled = await store.cancel_task("t1", "cancelled by u1")
    assert cancelled is not None and (cancelled.status, cancelled.note) == ("cancelled", "cancelled by u1")
    assert await store.claim_sessions("w1", 10, 30.0, 1) == []
    again = await store.cancel_task("t1", "again")
    assert again is not None and again.note == "cancelled by u1", "an ended task stays as it ended"
    assert await store.cancel_task("nope", "x") is None


@covers(Tasks.close_stale_tasks)
async def test_close_stale_closes_only_old_running_delegated_tasks(store):
    old, young, bg = (
        task("old", kind="delegate"),
        task("young", kind="delegate", created_at=T0 + 100),
        task("bg"),
    )
    for t in (old, young, bg):
        await store.start_task(t, first(t))
    closed = await store.close_stale_tasks(T0 + 50, "too old")
    assert [t.id for t in closed] == ["old"] and closed[0].status == "closed"
    stored = await store.get_task("old")
    assert stored is not None and (stored.status, stored.note) == ("closed", "too old")
    keys = {c.session_key for c in await store.claim_sessions("w1", 10, 30.0, 1)}
    assert keys == {young.child_key, bg.child_key}, "the closed one is never run"
    assert await store.close_stale_tasks(T0 + 50, "too old") == []


@covers(Tasks.close_stale_tasks)
async def test_close_stale_also_closes_an_old_completion_still_waiting_in_the_parents_inbox(store):
    await store.admit(req("m1", "k1", queued=False))
    old = task("old", kind="delegate", sid=await parent_sid(store))
    young = task("young", kind="delegate", sid=await parent_sid(store), created_at=T0 + 100)
    for t in (old, young):
        await store.start_task(t, first(t))
        await answer_child(store, t)  # done: each completion waits in k1's inbox
    closed = await store.close_stale_tasks(T0 + 50, "too old")
    assert [t.id for t in closed] == ["old"]
    stored = await store.get_task("old")
    assert stored is not None and stored.status == "closed"
    (claim,) = await store.claim_sessions("w9", 10, 30.0, 5)
    assert [i.inbound.delivery_id for i in claim.items] == ["task-done:young"], "the old one never runs"
