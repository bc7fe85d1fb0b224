"""Tool-call approvals over the API: the stream shows the prompt as an event, the key's owner
answers it with ``POST /v1/approvals/{id}`` through the approvals engine, nobody else can.

The echo agent turns ``!sh <command>`` into a shell call; ``rm -rf x`` always asks. "Not run"
and "ran" are checked on disk, in the gateway's working directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from support.api_harness import poll_until

TOOLS: dict[str, Any] = {"tools": {"enabled": True}, "agent": {"echo": {"chunk_delay_ms": 0}}}


def victim(world) -> Path:
    target = world.gateway.workdir / "x"
    target.mkdir(parents=True)
    (target / "keep.txt").write_text("keep me")
    return target


async def _events(response: httpx.Response):
    """(event name, data) of each SSE event of a streaming response."""
    name = None
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data = line.removeprefix("data: ")
            yield name, (data if data == "[DONE]" else json.loads(data))
            name = None


def _chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "chatgate", "messages": [{"role": "user", "content": text}], **extra}


async def test_a_prompt_is_an_event_in_the_stream_and_the_owners_answer_lets_the_turn_go_on(api):
    world = await api(**TOOLS)
    target = victim(world)
    async with (
        world.http() as http,
        http.stream("POST", "/v1/chat/completions", json=_chat("!sh rm -rf x", stream=True)) as resp,
    ):
        assert resp.status_code == 200
        seen: list[tuple[str | None, Any]] = []
        async for name, data in _events(resp):
            seen.append((name, data))
            if name == "chatgate.approval_required":
                approval = data["chatgate"]["approval"]
                assert data["choices"][0]["delta"] == {} and target.exists()
                assert {o["id"] for o in approval["options"]} >= {"once", "deny"}
                answer = await http.post(approval["answer_url"], json={"option": "once"})
                assert answer.status_code == 200, answer.text
                assert answer.json()["outcome"] == "approved"
            if data == "[DONE]":
                break
    names = [n for n, _ in seen]
    assert names.index("chatgate.approval_required") < names.index("chatgate.approval_resolved")
    assert not target.exists()  # approved once: it ran
    finish = [
        d for n, d in seen if isinstance(d, dict) and d.get("choices") and d["choices"][0]["finish_reason"]
    ]
    assert finish and finish[-1]["choices"][0]["finish_reason"] == "stop"
    # Every chunk has a choice (clients read choices[0]); tool progress never enters content, so
    # the streamed text is exactly the stored final (issue 28).
    chunks = [d for _, d in seen if isinstance(d, dict)]
    assert all(len(d["choices"]) == 1 for d in chunks)
    streamed = "".join(d["choices"][0]["delta"].get("content") or "" for d in chunks)
    async with world.http() as http:
        stored = (await http.get(f"/v1/chat/completions/{chunks[0]['id']}")).json()
    assert streamed == stored["choices"][0]["message"]["content"] and streamed
    assert "⚙" not in streamed and "rm -rf" not in streamed


async def test_a_waiting_prompt_shows_on_the_running_response_and_a_deny_means_not_run(api):
    world = await api(**TOOLS)
    target = victim(world)
    async with world.http() as http:
        async with http.stream(
            "POST", "/v1/responses", json={"model": "chatgate", "input": "!sh rm -rf x", "stream": True}
        ) as resp:
            async for name, data in _events(resp):
                if name == "response.created":
                    response_id = data["response"]["id"]
                if name == "chatgate.approval_required":
                    prompt_id = data["approval"]["prompt_id"]
                    break  # the client goes away while the prompt waits
        running = (await http.get(f"/v1/responses/{response_id}")).json()
        assert running["status"] == "in_progress"
        assert [a["prompt_id"] for a in running["chatgate"]["pending_approvals"]] == [prompt_id]
        assert [(i["type"], i["status"], i["prompt_id"]) for i in running["output"]] == [
            ("chatgate_approval_request", "in_progress", prompt_id)
        ]
        # Another key cannot see or answer it; a second answer after the first changes nothing.
        _, other = await world.new_key()
        async with world.http(token=other) as stranger:
            refused = await stranger.post(f"/v1/approvals/{prompt_id}", json={"option": "once"})
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
        denied = await http.post(f"/v1/approvals/{prompt_id}", json={"option": "deny"})
        assert denied.status_code == 200 and denied.json()["outcome"] == "denied"
        late = await http.post(f"/v1/approvals/{prompt_id}", json={"option": "once"})
        assert late.status_code == 409 and late.json()["error"]["code"] == "already_resolved"

        async def finished() -> bool:
            return (await http.get(f"/v1/responses/{response_id}")).json()["status"] == "completed"

        await poll_until(finished, "the denied turn to finish")
    assert target.exists() and (target / "keep.txt").read_text() == "keep me"


async def test_a_bad_answer_is_a_400_and_changes_nothing(api):
    world = await api(**TOOLS)
    victim(world)
    async with world.http() as http:
        async with http.stream(
            "POST", "/v1/responses", json={"model": "chatgate", "input": "!sh rm -rf x", "stream": True}
        ) as resp:
            async for name, data in _events(resp):
                if name == "chatgate.approval_required":
                    prompt_id = data["approval"]["prompt_id"]
                    break
        wrong = await http.post(f"/v1/approvals/{prompt_id}", json={"option": "maybe"})
        unknown = await http.post("/v1/approvals/nope", json={"option": "once"})
        record = await world.gateway.store.get_approval(prompt_id)
    assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "option"
    assert unknown.status_code == 404
    assert record is not None and record.state == "pending"


async def test_a_non_streaming_request_that_needs_approval_answers_at_once_with_the_approval(api):
    """Issue 28: no blocking with no id to look the approval up; the unmodified client sees it."""
    world = await api(**TOOLS)
    target = victim(world)
    async with world.client() as client, world.http() as http:
        waiting = await client.responses.create(model="chatgate", input="!sh rm -rf x")
        with pytest.raises(openai.ConflictError) as chat:
            await client.chat.completions.create(
                model="chatgate", messages=[{"role": "user", "content": "!sh rm -rf x"}], user="other"
            )
        assert waiting.status == "in_progress" and target.exists()
        pending = (waiting.model_extra or {})["chatgate"]["pending_approvals"]
        assert [(i.type, i.id) for i in waiting.output] == [
            ("chatgate_approval_request", f"apr_{pending[0]['prompt_id']}")
        ]
        error = chat.value.body
        assert isinstance(error, dict) and error["code"] == "approval_required"
        assert error["status"] == "requires_approval" and error["approval"]["prompt_id"] in chat.value.message
        for prompt_id in (pending[0]["prompt_id"], error["approval"]["prompt_id"]):
            denied = await http.post(f"/v1/approvals/{prompt_id}", json={"option": "deny"})
            assert denied.status_code == 200, denied.text

        async def finished() -> bool:
            done = await client.responses.retrieve(waiting.id)
            fetched = await http.get(f"/v1/chat/completions/{error['completion_id']}")
            return done.status == "completed" and fetched.status_code == 200

        await poll_until(finished, "both denied turns to finish")
    assert target.exists() and (target / "keep.txt").read_text() == "keep me"


async def test_on_responses_an_approval_is_a_typed_output_item_and_never_text(api):
    """Issue 28: the unmodified client streams /v1/responses; the approval arrives as an output
    item of its own type (added while it waits, done with its outcome), the completed response
    lists it after the message, and the streamed text is exactly the stored answer."""
    world = await api(**TOOLS)
    target = victim(world)
    added: list[Any] = []
    done: list[Any] = []
    deltas: list[str] = []
    async with world.client() as client, world.http() as http:
        stream = await client.responses.create(model="chatgate", input="!sh rm -rf x", stream=True)
        async for ev in stream:
            if ev.type == "response.output_item.added" and ev.output_index > 0:
                added.append(ev.item)
                answer = await http.post(ev.item.answer_url, json={"option": "once"})
                assert answer.status_code == 200, answer.text
            elif ev.type == "response.output_item.done" and ev.output_index > 0:
                done.append(ev.item)
            elif ev.type == "response.output_text.delta":
                deltas.append(ev.delta)
            elif ev.type == "response.completed":
                final = ev.response
        stored = await client.responses.retrieve(final.id)
    assert [(i.type, i.status) for i in added] == [("chatgate_approval_request", "in_progress")]
    assert [(i.type, i.status, i.outcome) for i in done] == [
        ("chatgate_approval_request", "completed", "approved")
    ]
    assert added[0].id == done[0].id == f"apr_{added[0].prompt_id}"
    assert [item.type for item in final.output] == ["message", "chatgate_approval_request"]
    assert not target.exists()  # approved once: it ran
    assert "".join(deltas) == final.output_text == stored.output_text and deltas
    assert "rm -rf" not in final.output_text and "⚙" not in final.output_text
