"""The approval flow through the real pipeline: admission, scheduler, turn, broker, store.

The echo agent turns ``!sh <command>`` into shell tool calls that the real shell runs in
a temporary working directory, so "not run" is checked on the filesystem.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from chatgate.domain.prompts import parse_prompt_token
from chatgate.engine.intake import AdmissionRefused
from support.approval_harness import ApprovalHarness, MakeApprovals, make_approvals
from support.engine_harness import wait_until

__all__ = ["make_approvals"]


def victim(workdir: Path, name: str = "x") -> Path:
    target = workdir / name
    target.mkdir()
    (target / "file.txt").write_text("keep me")
    return target


async def ask(h: ApprovalHarness, text: str, **kw: object) -> str:
    """Send ``text`` and wait for its final; return the final's text."""
    await h.send(text, **kw)  # type: ignore[arg-type]
    inbound = h.sent[-1]
    adapter = h.btn if inbound.source.platform == "btn" else h.text
    return await h.final_for(adapter, inbound)


async def test_a_safe_command_runs_without_a_prompt(make_approvals: MakeApprovals) -> None:
    h = await make_approvals()
    final = await ask(h, "!sh echo hi")
    assert final.startswith("exit code 0") and "hi" in final
    assert h.approvals() == [] and h.btn.prompts == []


async def test_a_dangerous_command_waits_and_deny_does_not_run_it(make_approvals: MakeApprovals) -> None:
    h = await make_approvals()
    x = victim(h.workdir)
    await h.send("!sh rm -rf ./x")
    turn = h.sent[-1]
    prompt = await h.prompt()
    assert [o.id for o in prompt.options] == ["once", "session", "always", "deny"]
    assert "rm -rf ./x" in prompt.text and "recursive_delete" in prompt.text and "5 min" in prompt.text
    assert all(len(prompt.token(o.id).encode()) <= 64 for o in prompt.options)
    assert parse_prompt_token(prompt.token("deny")) == (prompt.prompt_id, "deny")
    admitted = await h.tap(prompt.prompt_id, "deny")
    assert admitted.answer is not None and admitted.answer.won and admitted.answer.outcome == "denied"
    final = await h.final_for(h.btn, turn)
    assert final.startswith("not run:") and "Ann denied" in final
    assert x.exists() and (x / "file.txt").read_text() == "keep me"
    assert h.approvals() == [(prompt.prompt_id, "denied", None, None)]
    assert [r.text for r in h.btn.resolved(prompt.prompt_id)] == ["Denied by Ann — not run."]


async def test_approve_once_runs_it_and_the_next_identical_call_asks_again(
    make_approvals: MakeApprovals,
) -> None:
    h = await make_approvals()
    x = victim(h.workdir)
    await h.send("!sh rm -rf ./x")
    first = h.sent[-1]
    prompt = await h.prompt()
    await h.tap(prompt.prompt_id, "once")
    assert (await h.final_for(h.btn, first)).startswith("exit code 0")
    assert not x.exists()
    assert [r.text for r in h.btn.resolved(prompt.prompt_id)] == ["Approved (once) by Ann."]
    victim(h.workdir)
    await h.send("!sh rm -rf ./x")
    second = await h.prompt(2)
    assert second.prompt_id != prompt.prompt_id
    await h.tap(second.prompt_id, "deny")
    assert (await h.final_for(h.btn, h.sent[-2])).startswith("not run:")


async def test_a_text_platform_gets_a_plain_prompt_and_answers_with_commands(
    make_approvals: MakeApprovals,
) -> None:
    h = await make_approvals()
    x = victim(h.workdir)
    await h.send("!sh rm -rf ./x", platform="text")
    turn = h.sent[-1]
    shown = await h.delivered(h.text, lambda r: r.kind == "notice" and "Approval needed" in r.text)
    assert "/approve (once), /approve session, /approve always or /deny" in shown.text
    assert shown.in_reply_to == turn.message_ref
    await h.send("/approve", platform="text")
    reply = await h.delivered(h.text, lambda r: r.kind == "command")
    assert reply.text.startswith("Approved (once) by Ann.") and "rm -rf ./x" in reply.text
    assert (await h.final_for(h.text, turn)).startswith("exit code 0")
    assert not x.exists()


async def test_a_plain_message_while_a_prompt_is_open_queues_and_resolves_nothing(
    make_approvals: MakeApprovals,
) -> None:
    h = await make_approvals()
    x = victim(h.workdir)
    await h.send("!sh rm -rf ./x", platform="text")
    turn = h.sent[-1]
    prompt_id = await h.pending()
    await h.send("yes, approve", platform="text")  # words are not an answer
    chatter = h.sent[-1]
    # ... and the sender is told so at once, instead of waiting for the timeout (Hermes #27352).
    await h.delivered(h.text, lambda r: r.kind == "notice" and "waiting for approval" in r.text)
    await h.send("/status", platform="text")  # a barrier: admission has handled the message
    await h.delivered(h.text, lambda r: r.kind == "command" and "Waiting messages: 1" in r.text)
    assert h.approvals() == [(prompt_id, "pending", None, None)]
    assert x.exists()
    await h.send("/deny", platform="text")
    assert (await h.final_for(h.text, turn)).startswith("not run:")
    assert await h.final_for(h.text, chatter) == "echo: yes, approve"


async def test_approve_for_the_session_remembers_it_until_new(make_approvals: MakeApprovals) -> None:
    h = await make_approvals()
    x = victim(h.workdir)
    await h.send("!sh rm -rf ./x")
    prompt = await h.prompt()
    await h.tap(prompt.prompt_id, "session")
    assert (await h.final_for(h.btn, h.sent[-2])).startswith("exit code 0")
    victim(h.workdir)
    final = await ask(h, "!sh rm -rf ./x")
    assert final.startswith("exit code 0") and not x.exists()
    assert len(h.btn.prompts) == 1  # ran without asking
    await h.send("/new")
    await h.delivered(h.btn, lambda r: r.kind == "command" and r.text.startswith("Started a new"))
    victim(h.workdir)
    await h.send("!sh rm -rf ./x")
    again = await h.prompt(2)
    await h.tap(again.prompt_id, "deny")
    assert (await h.final_for(h.btn, h.sent[-2])).startswith("not run:")
    assert x.exists()


async def test_always_is_offered_only_when_every_rule_allows_it(make_approvals: MakeApprovals) -> None:
    h = await make_approvals()
    await h.send("!sh chmod -R 777 ./d", platform="text")  # proven, but chmod_world_writable is session-only
    turn = h.sent[-1]
    shown = await h.delivered(h.text, lambda r: r.kind == "notice" and "Approval needed" in r.text)
    assert "/approve always" not in shown.text and "/approve session" in shown.text
    await h.send("/approve always", platform="text")
    refused = await h.delivered(h.text, lambda r: r.kind == "command")
    assert "does not offer 'always'" in refused.text
    assert h.approvals()[0][1] == "pending"
    await h.send("/deny", platform="text")
    assert (await h.final_for(h.text, turn)).startswith("not run:")


async def test_an_always_approval_is_remembered_across_sessions(make_approvals: MakeApprovals) -> None:
    h = await make_approvals()
    victim(h.workdir, "a")
    await h.send("!sh rm -rf ./a", chat_id="c1")
    prompt = await h.prompt()
    await h.tap(prompt.prompt_id, "always", chat_id="c1")
    assert (await h.final_for(h.btn, h.sent[-2])).startswith("exit code 0")
    victim(h.workdir, "b")
    final = await ask(h, "!sh rm -rf ./b", chat_id="c2", user_id="u2")
    assert final.startswith("exit code 0") and not (h.workdir / "b").exists()
    assert len(h.btn.prompts) == 1


async def test_timeout_denies_tells_the_chat_and_a_late_tap_changes_nothing(
    make_approvals: MakeApprovals,
) -> None:
    h = await make_approvals(timeout=0.5)
    x = victim(h.workdir)
    await h.send("!sh rm -rf ./x")
    turn = h.sent[-1]
    prompt = await h.prompt()
    final = await h.final_for(h.btn, turn)
    assert final.startswith("not run:") and "nobody answered" in final
    assert x.exists()
    assert h.approvals() == [(prompt.prompt_id, "expired", None, "timeout")]
    await wait_until(lambda: h.btn.resolved(prompt.prompt_id), 10, "the expiry rendered")
    assert [r.outcome for r in h.btn.resolved(prompt.prompt_id)] == ["expired"]
    assert h.btn.resolved(prompt.prompt_id)[0].text.startswith("Expired — not run")
    late = await h.tap(prompt.prompt_id, "once")
    assert late.new and late.answer is not None and not late.answer.won
    assert late.answer.outcome == "expired" and late.answer.text.startswith("Expired — not run")
    assert h.approvals() == [(prompt.prompt_id, "expired", None, "timeout")]
    assert len(h.btn.resolved(prompt.prompt_id)) == 1  # the late tap rendered nothing for everyone
    assert x.exists()


async def test_timeout_on_a_text_platform_posts_a_notice(make_approvals: MakeApprovals) -> None:
    h = await make_approvals(timeout=0.5)
    await h.send("!sh rm -rf ./nothing-here", platform="text")
    turn = h.sent[-1]
    notice = await h.delivered(h.text, lambda r: r.kind == "notice" and r.text.startswith("Expired"))
    assert "not run" in notice.text and "rm -rf ./nothing-here" in notice.text
    assert (await h.final_for(h.text, turn)).startswith("not run:")
    await h.send("/approve", platform="text")
    reply = await h.delivered(h.text, lambda r: r.kind == "command")
    assert reply.text == "No approval is waiting in this chat."


async def test_an_answer_recorded_as_the_timeout_fires_is_obeyed(make_approvals: MakeApprovals) -> None:
    """The waiting call's timeout loses the compare-and-set to an answer recorded just
    before it (here straight in the store, so nothing wakes the call): it runs."""
    h = await make_approvals(timeout=0.5)
    x = victim(h.workdir)
    await h.send("!sh rm -rf ./x")
    turn = h.sent[-1]
    prompt_id = await h.pending()
    record = await h.record(prompt_id)
    won = await h.store.resolve_approval(
        prompt_id, "approved", "once", "u1", "Ann", record.requested_at + 0.01
    )
    assert won.won
    assert (await h.final_for(h.btn, turn)).startswith("exit code 0")
    assert not x.exists()
    assert h.approvals() == [(prompt_id, "approved", "once", None)]


async def test_two_dangerous_calls_in_one_turn_are_two_prompts(make_approvals: MakeApprovals) -> None:
    h = await make_approvals()
    a, b = victim(h.workdir, "a"), victim(h.workdir, "b")
    await h.send("!sh rm -rf ./a\n!sh rm -rf ./b")
    turn = h.sent[-1]
    first = await h.prompt(1)
    await h.tap(first.prompt_id, "once")
    second = await h.prompt(2)
    assert second.prompt_id != first.prompt_id and "rm -rf ./b" in second.text
    await h.tap(second.prompt_id, "deny")
    final = await h.final_for(h.btn, turn)
    assert "$ rm -rf ./a\nexit code 0" in final and "$ rm -rf ./b\nnot run:" in final
    assert not a.exists() and b.exists()
    assert [row[1] for row in h.approvals()] == ["approved", "denied"]


async def test_a_redelivered_approve_does_not_answer_the_next_prompt(make_approvals: MakeApprovals) -> None:
    h = await make_approvals()
    victim(h.workdir, "a")
    victim(h.workdir, "b")
    await h.send("!sh rm -rf ./a\n!sh rm -rf ./b", platform="text")
    turn = h.sent[-1]
    first = await h.pending(1)
    approved = await h.send("/approve", platform="text", delivery_id="approve-1")
    assert approved.new and approved.answer is not None and approved.answer.won
    second = await h.pending(2)
    again = await h.send("/approve", platform="text", delivery_id="approve-1")
    assert not again.new and again.answer is None
    assert h.approvals() == [(first, "approved", "once", None), (second, "pending", None, None)]
    await h.send("/deny", platform="text")
    final = await h.final_for(h.text, turn)
    assert "$ rm -rf ./b\nnot run:" in final and (h.workdir / "b").exists()
    assert len([r for r in h.text.delivered if r.kind == "command"]) == 2


async def test_only_the_requester_or_an_approver_may_answer(make_approvals: MakeApprovals) -> None:
    h = await make_approvals(approvers={"btn": frozenset({"boss"}), "text": frozenset({"boss"})})
    x = victim(h.workdir)
    await h.send("!sh rm -rf ./x")
    turn = h.sent[-1]
    prompt = await h.prompt()
    try:
        await h.tap(prompt.prompt_id, "once", user_id="mallory", user_name="Mallory")
    except AdmissionRefused as exc:
        assert exc.code == "not_allowed"
    else:
        raise AssertionError("an unauthorized tap was admitted")
    try:
        await h.tap(prompt.prompt_id, "once", chat_id="elsewhere", user_id="boss")
    except AdmissionRefused as exc:
        assert exc.code == "not_allowed" and "another chat" in exc.message
    else:
        raise AssertionError("a tap from another chat was admitted")
    assert h.approvals()[0][1] == "pending" and h.btn.resolutions == []
    assert h.query("SELECT COUNT(*) FROM inbox WHERE inbound_json LIKE '%prompt_response%'") == [(0,)]
    admitted = await h.tap(prompt.prompt_id, "once", user_id="boss", user_name="Boss")
    assert admitted.answer is not None and admitted.answer.won
    assert (await h.final_for(h.btn, turn)).startswith("exit code 0") and not x.exists()
    record = await h.record(prompt.prompt_id)
    assert (record.answered_by_id, record.answered_by_name, record.requester_id) == ("boss", "Boss", "u1")


async def test_an_unauthorized_approve_command_is_refused_in_its_reply(make_approvals: MakeApprovals) -> None:
    h = await make_approvals()
    await h.send("!sh rm -rf ./x", platform="text", chat_id="room", user_id="u1")
    prompt_id = await h.pending()
    # Another user of the same chat (a per-user session in a group): not the requester, not an approver.
    await h.send("/approve", platform="text", chat_id="room", user_id="u2", user_name="Eve")
    reply = await h.delivered(h.text, lambda r: r.kind == "command")
    assert reply.text.startswith("Only Ann or a configured approver may answer")
    assert h.approvals() == [(prompt_id, "pending", None, None)]
    await h.send("/deny", platform="text", chat_id="room", user_id="u1")
    await wait_until(lambda: h.approvals()[0][1] == "denied", 10, "the requester's /deny")


async def test_two_taps_at_the_same_moment_record_and_render_one_resolution(
    make_approvals: MakeApprovals,
) -> None:
    h = await make_approvals(approvers={"btn": frozenset({"bob"})})
    x = victim(h.workdir)
    await h.send("!sh rm -rf ./x")
    turn = h.sent[-1]
    prompt = await h.prompt()
    taps = await asyncio.gather(
        h.tap(prompt.prompt_id, "deny", user_id="u1", user_name="Ann"),
        h.tap(prompt.prompt_id, "once", user_id="bob", user_name="Bob"),
    )
    answers = [t.answer for t in taps]
    assert all(a is not None for a in answers)
    assert sorted(a.won for a in answers if a is not None) == [False, True]
    record = await h.record(prompt.prompt_id)
    assert {a.outcome for a in answers if a is not None} == {record.state}
    loser = next(a for a in answers if a is not None and not a.won)
    assert loser.text.startswith("Already answered: ")
    final = await h.final_for(h.btn, turn)
    await wait_until(lambda: h.btn.resolved(prompt.prompt_id), 10, "the resolution rendered")
    assert [r.outcome for r in h.btn.resolved(prompt.prompt_id)] == [record.state]
    if record.state == "approved":
        assert final.startswith("exit code 0") and not x.exists()
    else:
        assert final.startswith("not run:") and x.exists()


@pytest.mark.parametrize("tap_first", [True, False])
async def test_a_tap_racing_stop_is_never_recorded_as_an_approval(
    make_approvals: MakeApprovals, tap_first: bool
) -> None:
    h = await make_approvals()
    x = victim(h.workdir)
    await h.send("!sh rm -rf ./x")
    prompt = await h.prompt()
    moves = [h.tap(prompt.prompt_id, "always"), h.send("/stop")]
    await asyncio.gather(*(moves if tap_first else reversed(moves)))
    await wait_until(lambda: h.btn.resolved(prompt.prompt_id), 10, "the prompt rendered")
    [(_, state, tier, _)] = h.approvals()
    # Either the tap came first (approved, and then the stop ended the run) or the stop did;
    # what may never happen is an approval recorded for a call that no longer waits.
    if state == "approved":
        assert tier == "always"
    else:
        assert state == "expired" and not h.query("SELECT rule_key FROM approval_grants")
        assert x.exists()
    assert h.btn.resolved(prompt.prompt_id)[-1].text.startswith(
        "Approved" if state == "approved" else "Expired"
    )


async def test_an_answer_to_a_prompt_no_call_waits_for_closes_it_instead_of_approving(
    make_approvals: MakeApprovals, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = await make_approvals()
    x = victim(h.workdir)
    await h.send("!sh rm -rf ./x")
    turn = h.sent[-1]
    prompt = await h.prompt()
    # The seam: the broker's registry says no call waits (its turn was just stopped, and the
    # expiry is not committed yet). The desk under test must not record an approval then.
    monkeypatch.setattr(h.broker, "is_waiting", lambda prompt_id: False)
    tapped = await h.tap(prompt.prompt_id, "always")
    assert tapped.answer is not None and tapped.answer.outcome == "expired"
    assert h.approvals() == [(prompt.prompt_id, "expired", None, "stopped")]
    assert h.query("SELECT rule_key FROM approval_grants") == []
    assert (await h.final_for(h.btn, turn)).startswith("not run:") and x.exists()


async def test_stop_while_waiting_expires_the_prompt_and_nothing_runs(make_approvals: MakeApprovals) -> None:
    h = await make_approvals()
    x = victim(h.workdir)
    await h.send("!sh rm -rf ./x")
    prompt = await h.prompt()
    await h.send("/stop")
    await wait_until(lambda: h.btn.resolved(prompt.prompt_id), 10, "the stopped prompt rendered")
    assert h.approvals() == [(prompt.prompt_id, "expired", None, "stopped")]
    assert h.btn.resolved(prompt.prompt_id)[0].text == "Expired — not run (the reply was stopped)."
    late = await h.tap(prompt.prompt_id, "once")
    assert late.answer is not None and not late.answer.won and late.answer.outcome == "expired"
    assert x.exists()


async def test_buttons_that_fail_fall_back_to_the_text_prompt(make_approvals: MakeApprovals) -> None:
    h = await make_approvals()
    h.btn.refuse_prompts = True
    x = victim(h.workdir)
    await h.send("!sh rm -rf ./x")
    turn = h.sent[-1]
    shown = await h.delivered(h.btn, lambda r: r.kind == "notice" and "Approval needed" in r.text)
    assert "/approve" in shown.text
    prompt_id = await h.pending()
    assert (await h.record(prompt_id)).prompt_via == "text"
    await h.send("/approve")
    assert (await h.final_for(h.btn, turn)).startswith("exit code 0") and not x.exists()


async def test_prompts_left_open_by_a_dead_process_expire_at_start_with_a_notice(
    make_approvals: MakeApprovals,
) -> None:
    first = await make_approvals()
    victim(first.workdir)
    await first.send("!sh rm -rf ./x", platform="text")
    prompt_id = await first.pending()
    # What a crash leaves behind: the record is pending; nothing of the process remains.
    await first.stop()  # cancels the turn, which closes its prompt ("stopped")...
    # ...so put it back to pending, as if the process had died before it could.
    first.execute("UPDATE approvals SET state = 'pending', reason = NULL, answered_at = NULL")
    first.execute("DELETE FROM outbox WHERE idem_key LIKE 'prompt:%:end'")
    second = await make_approvals()
    assert second.approvals() == [(prompt_id, "expired", None, "restart")]
    notice = await second.delivered(second.text, lambda r: r.kind == "notice" and "restart" in r.text)
    assert notice.text.startswith("Expired by a gateway restart — not run.")
    # The resumed turn asks again.
    again = await second.pending(2)
    assert again != prompt_id
    await second.send("/deny", platform="text")
    await wait_until(lambda: second.approvals()[1][1] == "denied", 10, "the new prompt denied")
    assert (second.workdir / "x").exists()


async def test_an_unproven_command_asks_says_why_and_offers_only_once(make_approvals: MakeApprovals) -> None:
    """Issue 12.1: ``rm -f${x:-r}`` ran unasked on main; now it asks, and says why."""
    h = await make_approvals()
    x = victim(h.workdir)
    await h.send("!sh rm -f${opt:-r} ./x")
    turn = h.sent[-1]
    prompt = await h.prompt()
    assert [o.id for o in prompt.options] == ["once", "deny"]
    assert "cannot tell what `${opt:-r}` expands to [unproven]" in prompt.text
    assert (await h.record(prompt.prompt_id)).rule_keys == ("unproven",)
    with pytest.raises(AdmissionRefused, match="does not offer 'session'"):
        await h.tap(prompt.prompt_id, "session")
    assert h.approvals()[0][1] == "pending"
    await h.tap(prompt.prompt_id, "deny")
    assert (await h.final_for(h.btn, turn)).startswith("not run:")
    assert (x / "file.txt").read_text() == "keep me"


async def test_a_remembered_rule_does_not_cover_a_command_that_could_not_be_proven(
    make_approvals: MakeApprovals,
) -> None:
    h = await make_approvals()
    victim(h.workdir, "a")
    await h.send("!sh rm -rf ./a")
    prompt = await h.prompt()
    await h.tap(prompt.prompt_id, "session")
    assert (await h.final_for(h.btn, h.sent[-2])).startswith("exit code 0")
    b = victim(h.workdir, "b")
    final = await ask(h, "!sh d=b; rm -rf ./$d")  # resolved: proven, recursive_delete is remembered
    assert final.startswith("exit code 0") and not b.exists()
    c = victim(h.workdir, "c")
    await h.send("!sh rm -rf ./$HOME_DIR")  # recursive_delete too, but unproven: asks again
    turn = h.sent[-1]
    second = await h.prompt(2)
    assert [o.id for o in second.options] == ["once", "deny"]
    assert "recursive_delete" in second.text and "cannot tell what `$HOME_DIR` holds" in second.text
    await h.tap(second.prompt_id, "deny")
    assert (await h.final_for(h.btn, turn)).startswith("not run:")
    assert c.exists()
