"""The garbage collector rests while a gateway starts, then runs with the start's objects frozen.

Each check runs the ``chatgate`` command's own entry (``chatgate.app.cli.entry``) in a
real Python process: the collector's state is the process's, and a test process must keep its
own collector as it is.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

RUN_DRIVER = """
import gc, json, os, signal, sys, threading, time

seen = {"held_at_exec": None, "enabled_when_running": None}
real = sys.stdout

class Tap:
    def write(self, text):
        if "is running" in text:
            seen["enabled_when_running"] = gc.isenabled()
        return real.write(text)
    def flush(self):
        real.flush()

def stop_once_collecting():
    deadline = time.monotonic() + 60
    while (seen["enabled_when_running"] is None or not gc.isenabled()) and time.monotonic() < deadline:
        time.sleep(0.05)
    seen["frozen"] = gc.get_freeze_count()
    os.kill(os.getpid(), signal.SIGTERM)

from chatgate.app.cli import entry  # noqa: E402

sys.stdout = Tap()
sys.argv = ["chatgate", "run", "--config", sys.argv[1], "--state-dir", sys.argv[2]]
watcher = threading.Thread(target=stop_once_collecting, daemon=True)
original_hold = entry.collector.hold

def hold():
    original_hold()
    seen["held_at_exec"] = not gc.isenabled()
    watcher.start()

entry.collector.hold = hold
code = entry.main()
seen["code"] = code
seen["enabled_after"] = gc.isenabled()
sys.stderr.write("RESULT " + json.dumps(seen) + "\\n")
"""

COMMAND_DRIVER = """
import gc, json, sys
from chatgate.app.cli import entry
sys.argv = ["chatgate", *sys.argv[1:]]
code = entry.main()
result = {"code": code, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}
sys.stderr.write("RESULT " + json.dumps(result) + "\\n")
"""


def _result(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    lines = [line for line in proc.stderr.splitlines() if line.startswith("RESULT ")]
    assert lines, f"the driver printed no result (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    result: dict[str, object] = json.loads(lines[-1].removeprefix("RESULT "))
    return result


def test_a_gateway_starts_with_the_collector_held_then_collects_with_the_start_frozen(tmp_path: Path) -> None:
    config = tmp_path / "chatgate.yaml"
    config.write_text(yaml.safe_dump({"http": {"host": "127.0.0.1", "port": 0}, "agent": {"echo": {}}}))
    proc = subprocess.run(
        [sys.executable, "-c", RUN_DRIVER, str(config), str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    result = _result(proc)
    assert "is running" in proc.stdout, proc.stdout
    assert result["held_at_exec"] is True, "the entry holds the collector before it imports the gateway"
    assert result["enabled_when_running"] is False, "the collector rests through the start"
    assert isinstance(result["frozen"], int) and result["frozen"] > 10_000, result
    assert result["enabled_after"] is True
    assert result["code"] == 0, proc.stderr[-3000:]


def test_a_command_other_than_run_collects_as_usual(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", COMMAND_DRIVER, "version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    result = _result(proc)
    assert result == {"code": 0, "enabled": True, "frozen": result["frozen"]}, result
    assert isinstance(result["frozen"], int) and result["frozen"] > 0, "what the imports made is frozen"
