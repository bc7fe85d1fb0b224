"""The command line, run as a real subprocess."""

from __future__ import annotations

import ast
import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

from chatgate import __version__
from chatgate.domain.inbound import Inbound
from chatgate.domain.inbox import AdmitRequest
from chatgate.domain.source import Source
from chatgate.store.sqlite import SqliteStore

CLI = [sys.executable, "-m", "chatgate.app.cli"]


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_version_prints_the_package_version() -> None:
    result = _run("version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"chatgate {__version__}"


def test_invalid_config_exits_78_naming_the_key_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("sessions:\n  busy_polcy: queue\n")
    result = _run("run", "--config", str(bad), "--state-dir", str(tmp_path / "state"))
    assert result.returncode == 78
    assert "sessions.busy_polcy" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "state").exists(), "nothing is touched before the config is valid"


def test_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = _run("run", "--state-dir", str(tmp_path / "state"), "--port", str(port))
    assert result.returncode == 78, "a restart will not free the port: the config must change (issue 31)"
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "--port" in result.stderr
    assert "Traceback" not in result.stderr


def test_sessions_lists_sessions_with_last_activity(tmp_path: Path) -> None:
    state = tmp_path / "state"

    async def seed() -> None:
        store = SqliteStore(state / "chatgate.db")
        await store.open()
        try:
            for chat in ("alpha", "beta", "a-chat-id-much-longer-than-the-header-and-the-old-column"):
                source = Source(platform="web", chat_id=chat, chat_type="dm", user_id="u1")
                inbound = Inbound(transport="web", delivery_id=f"{chat}/1", source=source, text="hi")
                await store.admit(AdmitRequest(inbound=inbound, session_key=f"agent:main:web:dm:{chat}"))
        finally:
            await store.close()

    asyncio.run(seed())
    result = _run("sessions", "--state-dir", str(state))
    assert result.returncode == 0, result.stderr
    assert "agent:main:web:dm:alpha" in result.stdout
    assert "agent:main:web:dm:beta" in result.stdout
    assert "LAST ACTIVITY" in result.stdout
    lines = result.stdout.splitlines()
    state_column = {
        line.index("STATE") if line.startswith("SESSION KEY") else line.rindex("idle") for line in lines
    }
    assert len(lines) == 4 and len(state_column) == 1, f"the columns are not aligned:\n{result.stdout}"


def test_sessions_without_a_database_says_so(tmp_path: Path) -> None:
    result = _run("sessions", "--state-dir", str(tmp_path / "empty"))
    assert result.returncode == 0
    assert "no sessions yet" in result.stdout


def _running_line(tmp_path: Path, **settings: str) -> str:
    """The first stdout line of ``chatgate run`` (the running line) with these CHATGATE_ settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    env.update(settings)
    proc = subprocess.Popen(
        [*CLI, "run", "--state-dir", str(tmp_path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        return proc.stdout.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_the_running_line_puts_an_ipv6_address_in_brackets(tmp_path: Path) -> None:
    line = _running_line(tmp_path, CHATGATE_HTTP__HOST="::1")
    assert " is running: open http://[::1]:" in line, line


def test_with_the_web_chat_off_the_running_line_offers_no_page(tmp_path: Path) -> None:
    """Issue 31, item 8: the line said "open http://…/" and that address answered 404."""
    line = _running_line(tmp_path, CHATGATE_PLATFORMS__WEB__ENABLED="false")
    assert " is running: http://127.0.0.1:" in line and "no chat page" in line, line
    assert "open" not in line, line


def test_relay_sim_names_the_command_it_moved_to_and_exits_2() -> None:
    result = _run("relay-sim", "--gateway-id", "local", "--port", "8787")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "run: chatgate-relay-sim --gateway-id local --port 8787" in lines[0]
    assert result.stdout == ""


def test_other_commands_still_refuse_unknown_options() -> None:
    result = _run("version", "--bogus")
    assert result.returncode == 2
    assert "unrecognized arguments: --bogus" in result.stderr


def test_chatgate_never_imports_the_relay_simulator() -> None:
    """The simulator is a test tool (tools/relaysim): it may import chatgate, never the reverse."""
    src = Path(__file__).resolve().parents[2] / "src" / "chatgate"
    offenders = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            offenders += [f"{path.relative_to(src)}: {n}" for n in names if n.split(".")[0] == "relaysim"]
    assert offenders == []
    code = "import sys, chatgate.app.cli.main, chatgate.app.gateway; print('relaysim' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout == "False\n"


def test_bare_chatgate_prints_a_short_guide_and_exits_0() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "chatgate"], capture_output=True, text=True, timeout=60, env=_clean_env()
    )
    assert result.returncode == 0, result.stderr
    assert "chatgate run" in result.stdout and "State lives in" in result.stdout
    assert "required" not in result.stderr


def test_dash_dash_version_and_python_dash_m_chatgate_work() -> None:
    for argv in ([sys.executable, "-m", "chatgate", "--version"], [*CLI, "--version"]):
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=_clean_env())
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"chatgate {__version__}"


def test_run_host_to_a_public_address_still_needs_an_access_token(tmp_path: Path) -> None:
    result = _run("run", "--host", "0.0.0.0", "--state-dir", str(tmp_path / "state"))
    assert result.returncode == 78
    assert "platforms.web.access_token_env" in result.stderr


def test_run_log_level_refuses_a_level_that_is_not_one() -> None:
    result = _run("run", "--log-level", "loud")
    assert result.returncode == 2
    assert "'loud' is not one of debug, info, warning, error" in result.stderr


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}


def test_every_subcommand_help_opens_with_what_it_does() -> None:
    """Issue 31, item 8: ``chatgate init --help`` and the rest had no description."""
    import argparse

    from chatgate.app.cli.main import build_parser

    missing = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    if not child.description:
                        missing.append(f"{path} {name}")
                    walk(child, f"{path} {name}")

    walk(build_parser(), "chatgate")
    assert missing == []
