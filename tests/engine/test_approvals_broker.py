"""The approval broker's own contracts: prompt ids, direct answers, shutdown, failing closed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chatgate.agents.base import ToolCall
from chatgate.agents.tools.runner import ShellToolRunner
from chatgate.domain.prompts import MAX_TOKEN_BYTES, PROMPT_ID_RE, prompt_token
from chatgate.domain.source import Source
from chatgate.engine.approvals import Answerer, AnswerRefused, ApprovalBroker, ShellTools, ToolContext
from chatgate.engine.intake import AdmissionRefused
from chatgate.store.sqlite import SqliteStore
from support.approval_harness import MakeApprovals, make_approvals
from support.engine_harness import wait_until

__all__ = ["make_approvals"]


def test_prompt_ids_are_a_process_nonce_and_a_counter_and_fit_a_button_token(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "unused.db")
    first, second = ApprovalBroker(store, {}), ApprovalBroker(store, {})
    ids = [first.new_prompt_id() for _ in range(3)]
    assert all(re.fullmatch(r"[0-9a-f]{8}\.[0-9a-f]{8}", i) and PROMPT_ID_RE.fullmatch(i) for i in ids)
    assert len(set(ids)) == 3 and len({i.split(".")[0] for i in ids}) == 1
    assert second.new_prompt_id().split(".")[0] != ids[0].split(".")[0]
    assert all(len(prompt_token(i, "session").encode()) <= MAX_TOKEN_BYTES for i in ids)


async def test_the_direct_resolve_checks_who_answers_then_wakes_and_renders(
    make_approvals: MakeApprovals,
) -> None:
    h = await make_approvals()
    (h.workdir / "x").mkdir()
    await h.send("!sh rm -rf ./x")
    turn = h.sent[-1]
    prompt = await h.prompt()
    unknown = await h.broker.resolve("ffffffff.00000000", "once", Answerer("btn", "c1", "u1", "Ann"))
    assert not unknown.won and unknown.text == "This prompt is no longer open — not run."
    with pytest.raises(AnswerRefused) as refused:
        await h.broker.resolve(prompt.prompt_id, "once", Answerer("btn", "c1", "mallory", None))
    assert refused.value.code == "not_allowed"
    won = await h.broker.resolve(prompt.prompt_id, "once", Answerer("btn", "c1", "u1", "Ann"))
    assert won.won and won.outcome == "approved" and won.text == "Approved (once) by Ann."
    assert (await h.final_for(h.btn, turn)).startswith("exit code 0")
    await wait_until(lambda: h.btn.resolved(prompt.prompt_id), 10, "the rendering")
    again = await h.broker.resolve(prompt.prompt_id, "deny", Answerer("btn", "c1", "u1", "Ann"))
    assert not again.won and again.text == "Already answered: Approved (once) by Ann."


async def test_a_malformed_prompt_response_is_refused_at_admission(make_approvals: MakeApprovals) -> None:
    h = await make_approvals()
    for payload in (
        {"prompt_response": "yes"},
        {"prompt_response": {"prompt_id": "bad id!", "option_id": "once"}},
        {"prompt_response": {"prompt_id": "a.1", "option_id": "maybe"}},
    ):
        with pytest.raises(AdmissionRefused) as refused:
            await h.send("tap", kind="button", payload=payload)
        assert refused.value.code == "invalid_answer"
    assert h.query("SELECT COUNT(*) FROM inbox") == [(0,)]


async def test_shutdown_stops_the_waiting_turn_expires_its_prompt_and_requeues_it(
    make_approvals: MakeApprovals,
) -> None:
    h = await make_approvals()
    (h.workdir / "x").mkdir()
    await h.send("!sh rm -rf ./x")
    prompt = await h.prompt()
    await h.broker.begin_shutdown()
    await wait_until(lambda: h.btn.resolved(prompt.prompt_id), 10, "the expiry rendered")
    assert h.btn.resolved(prompt.prompt_id)[0].text == "Expired by a gateway restart — not run."
    assert h.approvals()[0] == (prompt.prompt_id, "expired", None, "restart")
    # The message went back to the queue (not answered): this scheduler is not stopping,
    # so it is picked up again at once and asks again, as the next start would.
    again = await h.prompt(2)
    assert again.prompt_id != prompt.prompt_id
    assert h.query("SELECT status, outcome FROM inbox") == [("queued", None)]
    assert (h.workdir / "x").exists()


async def test_without_storage_a_dangerous_call_fails_closed(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "never-opened.db")  # every call raises StoreUnavailable
    workdir = tmp_path / "w"
    workdir.mkdir()
    (workdir / "x").mkdir()
    tools = ShellTools(ApprovalBroker(store, {}), ShellToolRunner(workdir, 10.0, 1000))
    ctx = ToolContext("k", "s", 1, Source(platform="text", chat_id="c1", user_id="u1"), None, {})
    runner = tools.for_turn(ctx)
    result = await runner.call(ToolCall("c-1", "shell", {"command": "rm -rf ./x"}))
    assert result.status == "denied" and result.content.startswith("not run: the approval check could not")
    assert (workdir / "x").exists()
    safe = await runner.call(ToolCall("c-2", "shell", {"command": "echo fine"}))
    assert safe.status == "ok" and "fine" in safe.content  # no rule matched: no storage needed
    bad = await runner.call(ToolCall("c-3", "shell", {"command": 7}))
    assert bad.status == "error" and bad.content.startswith("not run: argument 'command' must be a string")
    assert runner.specs()[0]["function"]["name"] == "shell"
