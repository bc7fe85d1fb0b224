"""``chatgate run`` whose echo agent journals the start and end of every turn with its pid.

Run as ``python tests/support/recording_agent.py run ...`` (a ``GatewayProcess`` launcher)
with ``TURN_JOURNAL`` naming a file: each turn appends ``{"ev": "start"|"end", "pid",
"key", "t", "how"}`` lines (one ``O_APPEND`` write each, so processes never interleave a line).
A fleet test reads the journal to prove no two turns of one session ever overlapped.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
from collections.abc import AsyncIterator

from chatgate.agents.base import AgentEvent, AgentFailed, AgentRequest, Final
from chatgate.agents.echo import EchoAgent

_echo_stream = EchoAgent.stream


def _journal(event: str, key: str, how: str = "") -> None:
    entry = {"ev": event, "pid": os.getpid(), "key": key, "t": time.time(), "how": how}
    line = json.dumps(entry) + "\n"
    fd = os.open(os.environ["TURN_JOURNAL"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


async def _stream(self: EchoAgent, request: AgentRequest) -> AsyncIterator[AgentEvent]:
    """The turn's agent work ends with its last event: the turn returns on ``Final`` without
    closing the stream (it is closed later, maybe after the commit), so the end is journaled
    before that event is handed over; a turn stopped midway ends where it stopped."""
    _journal("start", request.session_key)
    ended = False
    try:
        async for event in _echo_stream(self, request):
            if isinstance(event, (Final, AgentFailed)):
                _journal("end", request.session_key, "done")
                ended = True
            yield event
    finally:
        if not ended:
            _journal("end", request.session_key, "stopped")  # /stop, a lost lease, shutdown


def read_journal(path: str) -> list[dict[str, object]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


if __name__ == "__main__":
    EchoAgent.stream = _stream  # type: ignore[method-assign]
    sys.argv = ["chatgate", *sys.argv[1:]]
    runpy.run_module("chatgate.app.cli", run_name="__main__")
