"""``agent.mcp`` mistakes are caught when the config loads (or at start, for a variable that
is not set), each naming its key."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from chatgate.app.config import ConfigError, load_config
from chatgate.app.config.mcp import mcp_servers
from chatgate.domain.errors import StartupError


def _load(tmp_path: Path, servers: str) -> str:
    path = tmp_path / "chatgate.yaml"
    path.write_text("agent:\n  mcp:\n    servers:\n" + servers)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    return str(err.value)


@pytest.mark.parametrize(
    ("servers", "expected"),
    [
        ("      t: {}\n", "agent.mcp.servers.t"),
        ("      t: {command: x, url: 'http://h/mcp'}\n", "set either command"),
        ("      t: {url: 'ftp://h/mcp'}\n", "agent.mcp.servers.t.url"),
        ("      t: {url: 'http://h/mcp', args: [a]}\n", "are for a stdio server"),
        ("      t: {command: x, headers_env: {Authorization: TOKEN}}\n", "headers_env is for an HTTP server"),
        ("      t: {command: x, policy: maybe}\n", "agent.mcp.servers.t.policy"),
        ("      t: {command: x, tools: {a: sometimes}}\n", "agent.mcp.servers.t.tools.a"),
        ("      t: {command: x, timeout_seconds: 0}\n", "agent.mcp.servers.t.timeout_seconds"),
        ("      t: {command: x, output_cap: 10}\n", "agent.mcp.servers.t.output_cap"),
        ("      t: {command: x, comand: y}\n", "agent.mcp.servers.t.comand"),
        ("      t: {command: x, env_from: {K: 'sk-abcdef0123456789abcdef0123456789'}}\n", "env_from"),
        ("      'a b': {command: x}\n", "not a usable server name"),
    ],
)
def test_a_mistake_names_its_key(tmp_path: Path, servers: str, expected: str) -> None:
    assert expected in _load(tmp_path, servers)


def test_a_good_config_and_its_variables_read_at_start(tmp_path: Path) -> None:
    path = tmp_path / "chatgate.yaml"
    path.write_text(
        "agent:\n  mcp:\n    servers:\n"
        f"      time: {{command: '{sys.executable}', policy: ask, tools: {{get_current_time: allow}}}}\n"
        "      docs: {url: 'https://h/mcp', headers_env: {Authorization: DOCS_AUTH}}\n"
        "      git: {command: sh, env: {A: '1'}, env_from: {TOKEN: GIT_TOKEN}}\n"
    )
    config = load_config(path).agent.mcp
    environ = {"DOCS_AUTH": "Bearer t", "GIT_TOKEN": "s", "PATH": os.environ["PATH"]}
    time, docs, git = mcp_servers(config, environ)
    assert (time.transport, time.policy, dict(time.tools)) == ("stdio", "ask", {"get_current_time": "allow"})
    assert (docs.transport, dict(docs.headers)) == ("http", {"Authorization": "Bearer t"})
    assert dict(git.env) == {"A": "1", "TOKEN": "s"}
    with pytest.raises(StartupError, match=r"agent.mcp.servers.docs.headers_env.Authorization: .* DOCS_AUTH"):
        mcp_servers(config, {"GIT_TOKEN": "s", "PATH": os.environ["PATH"]})


def test_a_command_not_on_path_stops_the_start_naming_its_key(tmp_path: Path) -> None:
    path = tmp_path / "chatgate.yaml"
    path.write_text("agent:\n  mcp:\n    servers:\n      gone: {command: no-such-mcp-server-here}\n")
    config = load_config(path).agent.mcp
    with pytest.raises(
        StartupError, match=r"agent.mcp.servers.gone.command: 'no-such-mcp-server-here' is not"
    ):
        mcp_servers(config, dict(os.environ))
