"""The openai agent's tool calls go through the same approvals: a local OpenAI-compatible
server (real HTTP, the real SDK) asks for ``rm -rf ./x``; the prompt, the answer and the
tool result flow end to end, and the model reads what really happened."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from agents.fake_openai_server import API_KEY, CallTools, FakeOpenAIServer, Reply, ScriptedCall, running
from chatgate.agents.openai_agent import OpenAIAgent
from support.approval_harness import MakeApprovals, make_approvals

__all__ = ["make_approvals"]

RM_X = ScriptedCall("shell", json.dumps({"command": "rm -rf ./x"}), call_id="call_rm", pieces=3)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with running() as srv:
        yield srv


def tool_results(server: FakeOpenAIServer) -> list[str]:
    return [m["content"] for r in server.requests for m in r.body["messages"] if m.get("role") == "tool"]


@pytest.mark.parametrize("answer", ["deny", "once"])
async def test_a_model_tool_call_waits_for_the_answer_and_reads_the_outcome(
    make_approvals: MakeApprovals, server: FakeOpenAIServer, answer: str
) -> None:
    server.script(CallTools((RM_X,)), Reply("Here is what happened."))
    agent = OpenAIAgent(base_url=server.base_url, model="m", api_key=API_KEY, timeout_s=10.0, max_retries=0)
    try:
        h = await make_approvals(agent=agent)
        (h.workdir / "x").mkdir()
        await h.send("please clean up x")
        turn = h.sent[-1]
        prompt = await h.prompt()
        assert "rm -rf ./x" in prompt.text
        assert len(server.requests) == 1  # the model waits with the agent: no second request yet
        await h.tap(prompt.prompt_id, answer)
        assert await h.final_for(h.btn, turn) == "Here is what happened."
        (result,) = tool_results(server)
        if answer == "deny":
            assert result.startswith("not run: Ann denied this command") and (h.workdir / "x").exists()
        else:
            assert result.startswith("exit code 0") and not (h.workdir / "x").exists()
    finally:
        await agent.aclose()
