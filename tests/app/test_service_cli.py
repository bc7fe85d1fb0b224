"""``chatgate service``: the user unit it writes, checked line by line and by ``systemd-analyze
verify`` when that exists. HOME, XDG_CONFIG_HOME and XDG_RUNTIME_DIR point into tmp_path, so
neither the real home nor the real user manager is touched (systemctl --user finds no bus)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from chatgate.app.cli.service import unit_text


def chatgate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATGATE_", "DBUS_"))}
    env.update(
        HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "xdg"),
        XDG_RUNTIME_DIR=str(tmp_path / "run"),
    )
    return subprocess.run(
        [sys.executable, "-m", "chatgate", *args], capture_output=True, text=True, env=env, timeout=60
    )


def unit_lines(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "conf dir" / "chatgate.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump({"shutdown": {"hard_deadline_seconds": 95}}))
    return path


def test_install_writes_a_unit_with_the_restart_policy_limits_state_dir_and_config(tmp_path, config):
    state = tmp_path / "state"
    done = chatgate(tmp_path, "service", "install", "--config", str(config), "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    unit = tmp_path / "xdg" / "systemd" / "user" / "chatgate.service"
    assert f"Wrote {unit}" in done.stdout
    assert "nothing was enabled" in done.stdout  # no user manager reachable: printed, not enabled
    keys = unit_lines(unit.read_text())
    assert keys["Restart"] == "on-failure"
    assert "RestartPreventExitStatus" not in keys  # exit 78 (a secret not there yet) is retried too
    assert keys["StartLimitIntervalSec"] == "0"  # never gives up: the growing delay is the backoff
    assert keys["EnvironmentFile"] == f"-{state / 'chatgate.env'}"
    assert f"Secrets (bot tokens, API keys) go in {state / 'chatgate.env'}" in done.stdout
    assert keys["LimitNOFILE"] == "65536"
    assert int(keys["TimeoutStopSec"]) > 95
    assert keys["Environment"] == f"CHATGATE_STATE_DIR={state}"
    assert f"--state-dir {state}" in keys["ExecStart"]
    assert f"--config '{config}'" in keys["ExecStart"]  # quoted: the path has a space
    assert keys["WantedBy"] == "default.target"
    assert state.is_dir()
    assert not (tmp_path / "home" / ".config").exists()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_written_unit_passes_systemd_analyze_verify(tmp_path, config):
    done = chatgate(
        tmp_path, "service", "install", "--config", str(config), "--state-dir", str(tmp_path / "s")
    )
    assert done.returncode == 0, done.stderr
    unit = tmp_path / "xdg" / "systemd" / "user" / "chatgate.service"
    verify = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert verify.returncode == 0, verify.stderr
    assert "chatgate.service" not in verify.stderr, verify.stderr  # no warning about our unit


def test_print_changes_nothing_and_a_broken_config_is_refused_before_anything_is_written(tmp_path, config):
    printed = chatgate(tmp_path, "service", "install", "--print", "--config", str(config))
    assert printed.returncode == 0 and "Restart=on-failure" in printed.stdout
    assert not (tmp_path / "xdg").exists()
    config.write_text("agent:\n  kind: nope\n")
    broken = chatgate(tmp_path, "service", "install", "--config", str(config))
    assert broken.returncode == 78 and "agent.kind" in broken.stderr
    assert not (tmp_path / "xdg").exists()


def test_status_and_uninstall(tmp_path, config):
    missing = chatgate(tmp_path, "service", "status")
    assert missing.returncode == 3 and "Not installed" in missing.stdout
    assert chatgate(tmp_path, "service", "install", "--config", str(config)).returncode == 0
    written = chatgate(tmp_path, "service", "status")
    assert written.returncode == 3 and "written but not managed" in written.stdout
    removed = chatgate(tmp_path, "service", "uninstall")
    assert removed.returncode == 0 and "Removed" in removed.stdout
    assert not (tmp_path / "xdg" / "systemd" / "user" / "chatgate.service").exists()
    again = chatgate(tmp_path, "service", "uninstall")
    assert again.returncode == 0 and "nothing to remove" in again.stdout


def test_the_restart_delay_grows_where_systemd_can_and_is_gentle_where_it_cannot(tmp_path):
    state = tmp_path / "state"
    new = unit_lines(unit_text(None, state, 40, systemd=256))
    assert (new["Restart"], new["RestartSec"], new["RestartSteps"], new["RestartMaxDelaySec"]) == (
        "on-failure", "5", "6", "300",
    )  # fmt: skip
    old = unit_lines(unit_text(None, state, 40, systemd=252))
    assert (old["Restart"], old["RestartSec"]) == ("on-failure", "30")
    assert "RestartSteps" not in old  # systemd before 254 would warn about a key it does not know
    assert unit_lines(unit_text(None, state, 40))["RestartSec"] == "30"  # no systemd here: the portable form


def test_a_service_installed_before_its_secrets_is_written_and_names_what_is_missing(tmp_path, config):
    config.write_text(
        yaml.safe_dump({"platforms": {"telegram": {"enabled": True, "token_env": "LATER_TOKEN"}}})
    )
    state = tmp_path / "state"
    done = chatgate(tmp_path, "service", "install", "--config", str(config), "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    assert "Not set yet: LATER_TOKEN" in done.stdout and "chatgate doctor" in done.stdout
    assert (tmp_path / "xdg" / "systemd" / "user" / "chatgate.service").exists()
