"""An MCP server owned by the gateway, against real servers over stdio: our probe server
(tests/support/mcp_probe_server.py, written with the SDK) and ``mcp-server-time`` from PyPI.

Listing and naming, tiers from annotations, bounded output, a server killed mid-call
(a clear failed outcome, then a restart and a working call), and close reaping the process.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
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
from support.engine_harness import wait_until
from support.procs import free_port

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


class HttpProbe:
    """The probe server over streamable HTTP in a child process (killed and started again by tests)."""

    def __init__(self, tmp_path: Path) -> None:
        self.port = free_port()
        self.log = tmp_path / "calls.log"
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def start(self) -> None:
        env = {**os.environ, "MCP_PROBE_LOG": str(self.log), "PYTHONPATH": os.pathsep.join(sys.path)}
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, PROBE, "--http", str(self.port), env=env
        )
        for _ in range(300):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            return
        raise AssertionError("the HTTP probe did not listen")

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
        if self.proc is not None:
            await self.proc.wait()


@pytest.fixture
async def http_probe(tmp_path: Path) -> AsyncIterator[HttpProbe]:
    probe = HttpProbe(tmp_path)
    yield probe
    await probe.stop()


async def test_a_streamable_http_server_with_headers_from_the_config(
    http_probe: HttpProbe, owners: Callable[[McpServerSettings], McpServerOwner]
) -> None:
    await http_probe.start()
    owner = owners(
        McpServerSettings(
            name="web",
            url=http_probe.url,
            headers={"Authorization": "Bearer t0k"},
            restart_backoff_s=(0.05, 0.5),
        )
    )
    assert await owner.start()
    assert {t.exposed for t in owner.tools()} >= {"web__echo", "web__die"}
    assert (await owner.call("echo", {"text": "over http"})).text == "echo: over http"
    assert "auth Bearer t0k" in http_probe.log.read_text().splitlines()


async def test_a_dropped_http_server_is_a_clear_error_and_reconnected_when_back(
    http_probe: HttpProbe, owners: Callable[[McpServerSettings], McpServerOwner]
) -> None:
    await http_probe.start()
    owner = owners(
        McpServerSettings(name="web", url=http_probe.url, timeout_s=20, restart_backoff_s=(0.05, 0.2))
    )
    assert await owner.start()
    died = await owner.call("die", {})
    assert not died.ok and "failed during the call" in died.text, died.text
    await http_probe.stop()  # reaped: the port is free again
    await http_probe.start()  # the server comes back on the same port
    after = await owner.call("echo", {"text": "back"})
    assert (after.ok, after.text) == (True, "echo: back")
    assert owner.connects == 2


async def test_a_server_that_dies_while_idle_is_restarted_before_the_next_call(
    tmp_path: Path, owners: Callable[[McpServerSettings], McpServerOwner]
) -> None:
    owner = owners(probe(tmp_path, ping_interval_s=0.1))
    assert await owner.start()
    first = int((await owner.call("pid", {})).text)
    os.kill(first, signal.SIGKILL)
    await wait_until(lambda: owner.connects == 2, 20, "the restart after the idle death")
    after = await owner.call("pid", {})
    assert after.ok and int(after.text) != first and not alive(first)


async def test_a_call_past_its_timeout_fails_and_the_next_one_works(
    tmp_path: Path, owners: Callable[[McpServerSettings], McpServerOwner]
) -> None:
    owner = owners(probe(tmp_path, timeout_s=0.5))
    assert await owner.start()
    slow = await owner.call("sleep", {"seconds": 60})
    assert (slow.ok, slow.text) == (False, "the MCP server 'probe' did not answer within 0.5 s")
    assert (await owner.call("echo", {"text": "next"})).text == "echo: next"
    assert owner.connects == 1  # a slow tool is not a broken server


async def test_a_cancelled_call_leaves_the_connection_working(
    tmp_path: Path, owners: Callable[[McpServerSettings], McpServerOwner]
) -> None:
    owner = owners(probe(tmp_path))
    assert await owner.start()
    task = asyncio.ensure_future(owner.call("sleep", {"seconds": 60}))
    log = tmp_path / "calls.log"
    await wait_until(lambda: log.exists() and "sleep 60" in log.read_text(), 20, "the slow call running")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await owner.call("echo", {"text": "after"})).text == "echo: after"
    assert owner.connects == 1
