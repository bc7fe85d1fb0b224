"""Run ``chatgate run`` (Telegram only) in this process and record what it had imported
when its first ``getUpdates`` arrived: ``python first_poll_probe.py DIR [--webhook]`` writes
``DIR/modules.json`` and exits with the gateway's code (``--webhook``: with a webhook route).

The Bot API double runs on a thread of its own with its own event loop, so ``sys.modules``
at its first ``getUpdates`` is exactly what the gateway had imported by then. The HTTP
stack (uvicorn, starlette) is held back: an import of it waits until that first
``getUpdates`` (at most ``HOLD_SECONDS``), and the threads that waited are recorded, so a
start that imports it before polling shows up as ``MainThread`` in ``held``. A fresh
interpreter is the point: the test runs this as a subprocess.
"""

from __future__ import annotations

import asyncio
import importlib.abc
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "platforms"))

from telegram_double import TOKEN, BotApiDouble

TOKEN_ENV = "PROBE_TELEGRAM_TOKEN"
HELD = ("uvicorn", "starlette")
HOLD_SECONDS = 30.0


class HoldImports(importlib.abc.MetaPathFinder):
    """Delays the first import of ``HELD`` until ``until`` is set; records who waited and how it ended."""

    def __init__(self, until: threading.Event) -> None:
        self.until = until
        self.held: list[dict[str, Any]] = []

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname in HELD and not self.until.is_set():
            released = self.until.wait(HOLD_SECONDS)
            self.held.append(
                {"module": fullname, "thread": threading.current_thread().name, "released": released}
            )
        return None  # the usual finders import it


class DoubleThread(threading.Thread):
    """The double on its own loop; ``first_poll`` holds ``sorted(sys.modules)`` at the first getUpdates."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.ready = threading.Event()
        self.polled = threading.Event()
        self.first_poll: list[str] | None = None
        self.base = ""

    def run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        double = BotApiDouble()
        poll = double._m_getUpdates

        async def get_updates(params: dict[str, Any]) -> Any:
            if self.first_poll is None:
                self.first_poll = sorted(sys.modules)
                self.polled.set()
            return await poll(params)

        double._m_getUpdates = get_updates  # type: ignore[method-assign]
        await double.start()
        self.base = double.base
        self.ready.set()
        await asyncio.Event().wait()  # a daemon thread: ends with the process


def main(out: Path, webhook: bool) -> int:
    from chatgate.app.cli.main import main as chatgate

    double = DoubleThread()
    double.start()
    double.ready.wait(30)
    hold = HoldImports(double.polled)
    sys.meta_path.insert(0, hold)
    config = {
        "http": {"host": "127.0.0.1", "port": 0},
        "platforms": {
            "web": {"enabled": False},
            "telegram": {"enabled": True, "token_env": TOKEN_ENV, "api_base": double.base},
        },
        "locks": {"credential_dir": str(out / "locks")},
    }
    if webhook:  # a route of its own: the HTTP server starts with the gateway
        route = {"secret_env": "PROBE_HOOK_SECRET", "target": {"platform": "telegram", "chat_id": "1"}}
        config["hooks"] = {"enabled": True, "routes": {"ci": route}}
        os.environ["PROBE_HOOK_SECRET"] = "probe-hook-secret"
    (out / "chatgate.yaml").write_text(json.dumps(config), encoding="utf-8")
    os.environ[TOKEN_ENV] = TOKEN

    def stop_after_first_poll() -> None:
        # A SIGTERM during start() is acted on once start() returned, so ``after_start``
        # (taken at exit) holds the whole start's imports whenever this arrives.
        double.polled.wait(60)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_after_first_poll, daemon=True).start()
    code = chatgate(["run", "--config", str(out / "chatgate.yaml"), "--state-dir", str(out / "state")])
    result = {"at_first_poll": double.first_poll, "after_start": sorted(sys.modules), "held": hold.held}
    (out / "modules.json").write_text(json.dumps(result), encoding="utf-8")
    return code


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), "--webhook" in sys.argv[2:]))
