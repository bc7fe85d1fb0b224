"""An MCP server owned by the gateway, against real servers over stdio: our probe server
(tests/support/mcp_probe_server.py, written with the SDK) and ``mcp-server-time`` from PyPI.

Listing and naming, tiers from annotations, bounded output, a server killed mid-call
(a clear failed outcome, then a restart and a working call), and close reaping the process.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from chatgate.agents.tools.mcp_hub import McpHub
from chatgate.agents.tools.mcp_server import McpServerOwner
from chatgate.agents.tools.mcp_settings import (
    McpServerSettings,
    annotation_tier,
    bounded,
    function_name,
    rule_key,
)

PROBE = str(Path(__file__).parents[1] / "support" / "mcp_probe_server.py")


def probe(tmp_path: Path, **kw: object) -> McpServerSettings:
    env = {"MCP_PROBE_LOG": str(tmp_path / "calls.log"), "PYTHONPATH": os.pathsep.join(sys.path)}
    return McpServerSettings(
        name="probe", command=sys.executable, args=(PROBE,), env=env, restart_backoff_s=(0.05, 0.5), **kw
    )  # type: ignore[arg-type]


def time_server() -> McpServerSettings:
    exe = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    assert exe, "mcp-server-time is in the test extra"
    return McpServerSettings(name="time", command=exe, args=("--local-timezone", "UTC"))


@pytest.fixture
async def owners() -> AsyncIterator[Callable[[McpServerSettings], McpServerOwner]]:
    made: list[McpServerOwner] = []

    def make(settings: McpServerSettings) -> McpServerOwner:
        made.append(McpServerOwner(settings))
        return made[-1]

    yield make
    for owner in made:
        await owner.close()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


async def test_the_probe_lists_its_tools_with_prefixed_names_and_tiers(
    tmp_path: Path, owners: Callable[[McpServerSettings], McpServerOwner]
) -> None:
    owner = owners(probe(tmp_path))
    assert await owner.start()
    tools = {t.name: t for t in owner.tools()}
    assert tools["echo"].exposed == "probe__echo" and tools["echo"].policy == "allow"
    assert tools["write_note"].policy == "ask"  # destructive
    assert tools["unannotated"].policy == "ask"  # nothing known: fail closed
    spec = tools["echo"].spec()["function"]
    assert spec["name"] == "probe__echo" and spec["parameters"]["required"] == ["text"]
    outcome = await owner.call("echo", {"text": "hi"})
    assert (outcome.ok, outcome.text) == (True, "echo: hi")


async def test_operator_policy_beats_the_annotations(
    tmp_path: Path, owners: Callable[[McpServerSettings], McpServerOwner]
) -> None:
    owner = owners(probe(tmp_path, policy="deny", tools={"echo": "ask"}))
    assert await owner.start()
    tools = {t.name: t.policy for t in owner.tools()}
    assert tools["echo"] == "ask" and tools["pid"] == "deny" and tools["write_note"] == "deny"


async def test_output_is_bounded_with_a_note(
    tmp_path: Path, owners: Callable[[McpServerSettings], McpServerOwner]
) -> None:
    owner = owners(probe(tmp_path, output_cap=1000))
    assert await owner.start()
    outcome = await owner.call("big", {"size": 5000})
    assert outcome.ok and outcome.text.startswith("x" * 1000 + "\n[output truncated: 4000 more bytes of 5000")


async def test_a_server_killed_mid_call_gives_a_clear_error_then_restarts(
    tmp_path: Path, owners: Callable[[McpServerSettings], McpServerOwner]
) -> None:
    owner = owners(probe(tmp_path))
    assert await owner.start()
    first_pid = int((await owner.call("pid", {})).text)
    died = await owner.call("die", {})
    assert not died.ok and "failed during the call" in died.text and "restarted" in died.text
    after = await owner.call("pid", {})  # waits for the restart, then runs
    assert after.ok and int(after.text) != first_pid
    assert owner.connects == 2
    assert not alive(first_pid)


async def test_close_reaps_the_server_process(
    tmp_path: Path, owners: Callable[[McpServerSettings], McpServerOwner]
) -> None:
    owner = owners(probe(tmp_path))
    assert await owner.start()
    pid = int((await owner.call("pid", {})).text)
    await owner.close()
    assert not alive(pid)


async def test_a_tool_error_is_a_failed_outcome_and_the_connection_stays(
    tmp_path: Path, owners: Callable[[McpServerSettings], McpServerOwner]
) -> None:
    owner = owners(probe(tmp_path))
    assert await owner.start()
    outcome = await owner.call("no_such_tool", {})
    assert not outcome.ok and "no_such_tool" in outcome.text
    assert (await owner.call("echo", {"text": "still"})).ok and owner.connects == 1


async def test_the_registry_time_server_through_the_hub() -> None:
    hub = McpHub([time_server()])
    try:
        await hub.start()
        names = {t.exposed: t for t in hub.tools()}
        assert "time__get_current_time" in names
        found = hub.find("time__get_current_time")
        assert found is not None
        owner, tool = found
        outcome = await owner.call(tool.name, {"timezone": "UTC"})
        assert outcome.ok and '"timezone": "UTC"' in outcome.text.replace("'", '"')
    finally:
        await hub.close()


async def test_an_unreachable_server_does_not_stop_the_start(tmp_path: Path) -> None:
    missing = McpServerSettings(
        name="gone",
        command=str(tmp_path / "no-such-program"),
        connect_timeout_s=0.5,
        restart_backoff_s=(5, 5),
    )
    hub = McpHub([missing])
    try:
        await hub.start()
        assert hub.tools() == ()
    finally:
        await hub.close()


def test_names_tiers_keys_and_bounds() -> None:
    assert function_name("time", "get_current_time") == "time__get_current_time"
    odd = function_name("srv", "do.thing/now")
    assert odd.startswith("srv__do_thing_now_") and len(odd) <= 64
    long = function_name("srv", "t" * 100)
    assert len(long) == 64 and long != function_name("srv", "t" * 99)
    assert annotation_tier(None) == "ask"
    assert annotation_tier({"readOnlyHint": True}) == "allow"
    assert annotation_tier({"readOnlyHint": True, "destructiveHint": True}) == "ask"
    assert annotation_tier({"destructiveHint": False}) == "ask"
    assert rule_key("time__get_current_time") == "mcp_time__get_current_time"
    assert rule_key("Srv__X").startswith("mcp_srv__x_")
    assert bounded("héllo", 2) == "h\n[output truncated: 4 more bytes of 6 not shown]"
