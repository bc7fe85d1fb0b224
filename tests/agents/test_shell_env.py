"""Issue 27, finding 4: a command sees a minimal environment, sandboxed or not.

On main every command inherited the gateway's whole environment: a model key and a bot
token were one ``env`` away, and the sandbox did not change that. Now a command gets PATH,
HOME (the work directory), LANG/LC_ALL, TERM=dumb, git's settings and what ``tools.env``
names. Real shell, real bubblewrap, the real gateway wiring for ``tools.env``.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest
import yaml

from chatgate.agents.tools.runner import ShellToolRunner
from chatgate.agents.tools.sandbox import BwrapSandbox
from chatgate.app.config import ConfigError, load_config
from chatgate.app.gateway import Gateway

HAVE_BWRAP = shutil.which("bwrap") is not None or bool(os.environ.get("CI"))
SANDBOXES = [False, pytest.param(True, marks=pytest.mark.skipif(not HAVE_BWRAP, reason="needs bubblewrap"))]
SHOW = "env; echo ---; tr '\\0' '\\n' < /proc/self/environ; echo ---; printenv; echo ---; sh -c 'printenv'"
BASE = {"PATH", "HOME", "LANG", "LC_ALL", "TERM", "PWD", "OLDPWD", "SHLVL", "_", "GIT_EXEC_PATH"}


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Secrets exported in the gateway's own environment, as an operator would."""
    tag = uuid.uuid4().hex
    values = {
        "OPENAI_API_KEY": f"sk-test-{tag}",
        "TELEGRAM_BOT_TOKEN": f"123456:bot-{tag}",
        "SLACK_BOT_TOKEN": f"xoxb-{tag}",
        "DATABASE_URL": f"postgresql://chatgate:pw-{tag}@db/chatgate",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def names(output: str) -> set[str]:
    return {line.split("=", 1)[0] for line in output.splitlines() if "=" in line and line[:1].isalpha()}


@pytest.mark.parametrize("sandbox", SANDBOXES, ids=["unsandboxed", "sandboxed"])
async def test_a_secret_in_the_gateways_environment_never_reaches_a_command(
    tmp_path: Path, secrets: dict[str, str], sandbox: bool
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    runner = ShellToolRunner(work, 60.0, 64_000, BwrapSandbox(work) if sandbox else None)
    result = await runner.execute(SHOW, "c1")
    assert result.status == "ok" and result.content.count("---") == 3, result.content
    for value in secrets.values():
        assert value not in result.content
    assert f"HOME={work}" in result.content and "TERM=dumb" in result.content
    assert "LANG=C.UTF-8" in result.content and "LC_ALL=C.UTF-8" in result.content
    from chatgate.agents.tools import git_guard  # imported here: the secrets check runs on any version

    allowed = BASE | set(git_guard.env(None))
    assert names(result.content) <= allowed, names(result.content) - allowed


@pytest.mark.parametrize("sandbox", SANDBOXES, ids=["unsandboxed", "sandboxed"])
async def test_a_variable_tools_env_names_is_passed_and_nothing_else(
    tmp_path: Path, secrets: dict[str, str], sandbox: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHATGATE_TEST_VISIBLE", "shown")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "The Agent")
    work = tmp_path / "work"
    work.mkdir()
    box = BwrapSandbox(work) if sandbox else None
    runner = ShellToolRunner(
        work, 60.0, 64_000, box, env=("CHATGATE_TEST_VISIBLE", "GIT_AUTHOR_NAME", "UNSET_X")
    )
    result = await runner.execute(SHOW, "c1")
    assert result.content.count("CHATGATE_TEST_VISIBLE=shown") == 4, result.content
    assert result.content.count("GIT_AUTHOR_NAME=The Agent") == 4
    assert "UNSET_X" not in result.content  # named but not set: absent, not empty
    assert not any(value in result.content for value in secrets.values())


def test_the_path_a_command_gets_has_no_relative_entry_and_not_the_work_directory(tmp_path: Path) -> None:
    from chatgate.agents.tools.env import search_path

    work = tmp_path / "work"
    given = f"::bin:.:/usr/bin:{work}:{work}/bin:/usr/lib/../bin:/opt/tool/bin:/bin"
    assert search_path(given, work, ("/g/bin",)) == "/g/bin:/usr/bin:/opt/tool/bin:/bin"


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("HOME", "is the work directory"),
        ("PATH", "is the gateway's PATH already"),
        ("GIT_CONFIG_GLOBAL", "so git runs no program its configuration names"),
        ("GIT_DIR", "change which repository and configuration git uses"),
        ("LD_PRELOAD", "load code"),
        ("BASH_ENV", "changes what the shell does"),
        ("BASH_FUNC_ls%%", "not a variable name"),
        ("OPENAI KEY", "not a variable name"),
    ],
)
def test_tools_env_refuses_what_would_undo_the_check_naming_the_variable(
    tmp_path: Path, name: str, said: str
) -> None:
    path = tmp_path / "chatgate.yaml"
    path.write_text(yaml.safe_dump({"tools": {"env": [name]}}))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "tools.env" in str(err.value) and said in str(err.value)
    with pytest.raises(ValueError, match=said):
        ShellToolRunner(tmp_path, 1.0, 1, env=(name,))


async def test_the_gateway_passes_tools_env_and_hides_its_state_directory(
    tmp_path: Path, secrets: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHATGATE_TEST_VISIBLE", "shown")
    state = tmp_path / "state"
    state.mkdir()
    path = tmp_path / "chatgate.yaml"
    sandbox = "bwrap" if HAVE_BWRAP else "none"
    path.write_text(
        yaml.safe_dump({"tools": {"enabled": True, "sandbox": sandbox, "env": ["CHATGATE_TEST_VISIBLE"]}})
    )
    gateway = Gateway(load_config(path), state)
    try:
        tools = gateway.engine.tools
        assert tools is not None
        shell = tools.shell
        assert shell.env == ("CHATGATE_TEST_VISIBLE",)
        if HAVE_BWRAP:
            assert shell.sandbox is not None and shell.sandbox.hide == (state.absolute(),)
        shell.workdir.mkdir(parents=True, exist_ok=True)
        result = await shell.execute(f"printenv CHATGATE_TEST_VISIBLE; env; ls -A {state}", "c1")
        assert "shown" in result.content
        assert not any(value in result.content for value in secrets.values())
        if HAVE_BWRAP:
            assert "chatgate.db" not in result.content and "workdir" in result.content
    finally:
        await gateway.stop()
