"""MCP tool calls go through the approval gate: the real engine (SQLite file, broker, turn
runner), the real OpenAI agent against a local OpenAI-compatible server scripted to call the
tool, and real MCP servers over stdio (our probe server, and ``mcp-server-time`` from PyPI).

Whether a call ran is read from the probe's own call log, not from what the gateway says.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.fake_openai_server import API_KEY, CallTools, FakeOpenAIServer, Reply, ScriptedCall, running
from chatgate.agents.openai_agent import OpenAIAgent
from chatgate.agents.tools.mcp_hub import McpHub
from chatgate.agents.tools.mcp_settings import McpServerSettings, Policy
from support.approval_harness import ApprovalHarness, MakeApprovals, make_approvals
from support.media_files import png

__all__ = ["make_approvals"]

PROBE = str(Path(__file__).parents[1] / "support" / "mcp_probe_server.py")


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with running() as srv:
        yield srv


def call(name: str, args: dict[str, object], call_id: str = "call_1") -> CallTools:
    return CallTools((ScriptedCall(name, json.dumps(args), call_id=call_id),))


def tool_results(server: FakeOpenAIServer) -> list[str]:
    return [m["content"] for r in server.requests for m in r.body["messages"] if m.get("role") == "tool"]


def probe_hub(tmp_path: Path, tools: dict[str, Policy] | None = None) -> McpHub:
    env = {"MCP_PROBE_LOG": str(tmp_path / "calls.log"), "PYTHONPATH": os.pathsep.join(sys.path)}
    settings = McpServerSettings(
        name="probe",
        command=sys.executable,
        args=(PROBE,),
        env=env,
        tools=tools or {},
        restart_backoff_s=(0.05, 0.5),
    )
    return McpHub([settings])


def ran(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


class Setup:
    def __init__(self, make: MakeApprovals, server: FakeOpenAIServer, tmp_path: Path) -> None:
        self.make, self.server, self.tmp = make, server, tmp_path
        self.agent = OpenAIAgent(
            base_url=server.base_url, model="m", api_key=API_KEY, timeout_s=10.0, max_retries=0
        )

    async def start(self, hub: McpHub, **options: Any) -> ApprovalHarness:
        return await self.make(agent=self.agent, mcp=hub, **options)


@pytest.fixture
async def setup(make_approvals: MakeApprovals, server: FakeOpenAIServer, tmp_path: Path) -> Iterator[Setup]:
    s = Setup(make_approvals, server, tmp_path)
    yield s  # type: ignore[misc]
    await s.agent.aclose()


async def test_the_tools_are_offered_with_prefixed_names(setup: Setup) -> None:
    setup.server.script(Reply("hi"))
    h = await setup.start(probe_hub(setup.tmp, tools={"pid": "deny"}))
    await h.send("hello")
    assert await h.final_for(h.btn, h.sent[-1]) == "hi"
    offered = {t["function"]["name"] for t in setup.server.requests[0].body["tools"]}
    assert {"probe__echo", "probe__write_note", "probe__unannotated", "shell"} <= offered
    assert "probe__pid" not in offered  # denied tools are not offered


@pytest.mark.parametrize("answer", ["once", "deny"])
async def test_an_ask_tool_waits_for_the_prompt_showing_server_tool_and_arguments(
    setup: Setup, answer: str
) -> None:
    setup.server.script(call("probe__write_note", {"text": "rm all"}), Reply("Done."))
    h = await setup.start(probe_hub(setup.tmp))
    await h.send("write a note")
    turn = h.sent[-1]
    prompt = await h.prompt()
    assert "call this MCP tool" in prompt.text
    assert "MCP server: probe" in prompt.text and "Tool: write_note" in prompt.text
    assert 'Arguments: {"text": "rm all"}' in prompt.text
    assert "which says it may destroy or overwrite things" in prompt.text
    assert [o.id for o in prompt.options] == ["once", "session", "deny"]  # destructive: never "always"
    assert ran(setup.tmp) == []  # nothing runs before the answer
    await h.tap(prompt.prompt_id, answer)
    assert await h.final_for(h.btn, turn) == "Done."
    (result,) = tool_results(setup.server)
    if answer == "once":
        assert result == "written" and ran(setup.tmp) == ["write_note rm all"]
    else:
        assert result.startswith("not run: Ann denied") and ran(setup.tmp) == []
    assert [(state, tier) for _, state, tier, _ in h.approvals()] == [
        ("approved", "once") if answer == "once" else ("denied", None)
    ]


async def test_a_session_approval_is_remembered_for_that_tool(setup: Setup) -> None:
    setup.server.script(
        call("probe__unannotated", {}), Reply("one"), call("probe__unannotated", {}, "call_2"), Reply("two")
    )
    h = await setup.start(probe_hub(setup.tmp))
    await h.send("first")
    prompt = await h.prompt()
    await h.tap(prompt.prompt_id, "session")
    assert await h.final_for(h.btn, h.sent[0]) == "one"
    await h.send("second")
    assert await h.final_for(h.btn, h.sent[-1]) == "two"
    assert len(h.btn.prompts) == 1 and ran(setup.tmp) == ["unannotated", "unannotated"]


async def test_a_denied_tool_never_runs_and_an_allowed_one_runs_unasked(setup: Setup) -> None:
    setup.server.script(
        call("probe__write_note", {"text": "x"}),
        Reply("refused"),
        call("probe__echo", {"text": "y"}),
        Reply("ok"),
    )
    h = await setup.start(probe_hub(setup.tmp, tools={"write_note": "deny", "echo": "allow"}))
    await h.send("deny me")
    assert await h.final_for(h.btn, h.sent[-1]) == "refused"
    await h.send("allow me")
    assert await h.final_for(h.btn, h.sent[-1]) == "ok"
    denied, allowed = tool_results(setup.server)[:1] + tool_results(setup.server)[-1:]
    assert denied == "there is no tool 'probe__write_note'"  # a denied tool is not even offered
    assert allowed == "echo: y"
    assert ran(setup.tmp) == ["echo y"] and h.btn.prompts == [] and h.approvals() == []


async def test_a_server_killed_mid_call_is_a_tool_error_and_the_next_call_works(setup: Setup) -> None:
    setup.server.script(
        call("probe__die", {}), Reply("it broke"), call("probe__echo", {"text": "back"}), Reply("ok")
    )
    h = await setup.start(probe_hub(setup.tmp))
    await h.send("crash it")
    assert await h.final_for(h.btn, h.sent[-1]) == "it broke"
    await h.send("again")
    assert await h.final_for(h.btn, h.sent[-1]) == "ok"
    crashed, after = tool_results(setup.server)[0], tool_results(setup.server)[-1]
    assert "failed during the call" in crashed and "restarted" in crashed
    assert after == "echo: back"
    assert ran(setup.tmp)[-1] == "echo back" and ran(setup.tmp)[0].startswith("die ")


async def test_the_registry_time_server_through_an_approval(setup: Setup) -> None:
    exe = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    assert exe, "mcp-server-time is in the test extra"
    hub = McpHub(
        [McpServerSettings(name="time", command=exe, args=("--local-timezone", "UTC"), policy="ask")]
    )
    setup.server.script(call("time__get_current_time", {"timezone": "Europe/Paris"}), Reply("It is late."))
    h = await setup.start(hub)
    await h.send("what time is it in Paris?")
    prompt = await h.prompt()
    assert "MCP server: time" in prompt.text and "Tool: get_current_time" in prompt.text
    assert "Europe/Paris" in prompt.text and "is set to ask in agent.mcp.servers.time" in prompt.text
    await h.tap(prompt.prompt_id, "once")
    assert await h.final_for(h.btn, h.sent[0]) == "It is late."
    (result,) = tool_results(setup.server)
    assert json.loads(result)["timezone"] == "Europe/Paris"


async def test_a_text_prompt_is_answered_with_deny_and_the_model_reads_it(setup: Setup) -> None:
    setup.server.script(call("probe__write_note", {"text": "n"}), Reply("Not written."))
    h = await setup.start(probe_hub(setup.tmp))
    await h.send("write it", platform="text")
    turn = h.sent[-1]
    shown = await h.delivered(h.text, lambda r: r.kind == "notice" and "Approval needed" in r.text)
    assert "call this MCP tool" in shown.text and "Tool: write_note" in shown.text
    assert "/approve (once), /approve session or /deny" in shown.text  # destructive: no "always"
    await h.send("/deny", platform="text")
    reply = await h.delivered(h.text, lambda r: r.kind == "command")
    assert reply.text.startswith("Denied by Ann") and "Call: MCP server: probe" in reply.text
    assert await h.final_for(h.text, turn) == "Not written."
    (result,) = tool_results(setup.server)
    assert result.startswith("not run: Ann denied this call") and ran(setup.tmp) == []


async def test_the_registry_git_server_tiers_from_its_annotations(setup: Setup, tmp_path: Path) -> None:
    """``mcp-server-git`` on a temporary repository: ``git_status`` (read-only) runs unasked;
    ``git_add`` (writes) asks, and a denial leaves the index untouched."""
    exe = shutil.which("mcp-server-git", path=str(Path(sys.executable).parent))
    assert exe, "mcp-server-git is in the test extra"
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ("git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com")
    await asyncio.to_thread(subprocess.run, [*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("a\n")
    hub = McpHub([McpServerSettings(name="git", command=exe, args=("--repository", str(repo)))])
    tools = {"repo_path": str(repo)}
    setup.server.script(
        call("git__git_status", tools),
        Reply("Status read."),
        call("git__git_add", {**tools, "files": ["a.txt"]}, "call_2"),
        Reply("Not added."),
    )
    h = await setup.start(hub)
    await h.send("status?")
    assert await h.final_for(h.btn, h.sent[-1]) == "Status read."
    assert h.btn.prompts == []  # read-only: no prompt
    assert "a.txt" in tool_results(setup.server)[0]
    await h.send("add it")
    turn = h.sent[-1]
    prompt = await h.prompt()
    assert "MCP server: git" in prompt.text and "Tool: git_add" in prompt.text
    assert "which says it may change things (not read-only)" in prompt.text
    assert [o.id for o in prompt.options] == ["once", "session", "always", "deny"]
    await h.tap(prompt.prompt_id, "deny")
    assert await h.final_for(h.btn, turn) == "Not added."
    staged = await asyncio.to_thread(
        subprocess.run, [*git, "diff", "--cached", "--name-only"], capture_output=True, text=True, check=True
    )
    assert staged.stdout == ""


async def test_a_tools_image_audio_and_file_are_sent_after_the_reply_and_a_fake_image_refused(
    setup: Setup,
) -> None:
    setup.server.script(call("probe__picture", {"red": 200}), Reply("drawn"))
    h = await setup.start(probe_hub(setup.tmp, tools={"picture": "allow"}), media=True)
    await h.send("draw")
    assert await h.final_for(h.btn, h.sent[-1]) == "drawn"
    (result,) = tool_results(setup.server)
    lines = result.splitlines()
    assert lines[0] == "a picture"
    assert lines[-4:] == [
        "[tool-file 1 is sent to the user after the reply as tool-file-1.png]",
        "[tool-file 2 was not sent: it is application/pdf, not an image]",
        "[tool-file 3 is sent to the user after the reply as tool-file-3.wav]",
        "[tool-file 4 is sent to the user after the reply as report.csv]",
    ]
    image = png(40, 30, (200, 0, 0))
    assert await h.store.read_blob(hashlib.sha256(image).hexdigest()) == image  # stored by its content
    assert await h.store.read_blob(hashlib.sha256(b"a,b\n1,2\n").hexdigest()) == b"a,b\n1,2\n"
    db = sqlite3.connect(h.path)
    try:
        rows = db.execute(
            "SELECT text, target_json FROM outbox WHERE idem_key LIKE 'file:%' ORDER BY id"
        ).fetchall()
    finally:
        db.close()
    named = [
        name
        for name in ("tool-file-1.png", "tool-file-3.wav", "report.csv")
        for row in rows
        if name in row[0] + row[1]
    ]
    assert len(rows) == 3 and named == ["tool-file-1.png", "tool-file-3.wav", "report.csv"], rows
