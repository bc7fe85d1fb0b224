"""``chatgate run`` whose offline agent brings the whole process down on a magic text.

Run as ``python tests/support/poison_agent.py run ...`` (a ``GatewayProcess`` launcher):
the real CLI and gateway, with ``EchoAgent.stream`` exiting the process (``os._exit``,
no cleanup, like a segfault or an abort in a native library) when a turn's input holds
``POISON``. Every other message is answered as usual.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import AsyncIterator

from chatgate.agents.base import AgentEvent, AgentRequest
from chatgate.agents.echo import EchoAgent

POISON = "poison-pill-7f3a"
_echo_stream = EchoAgent.stream


async def _stream(self: EchoAgent, request: AgentRequest) -> AsyncIterator[AgentEvent]:
    async for event in _echo_stream(self, request):
        if POISON in request.model_input:
            os._exit(1)
        yield event


if __name__ == "__main__":
    EchoAgent.stream = _stream  # type: ignore[method-assign]
    sys.argv = ["chatgate", *sys.argv[1:]]
    runpy.run_module("chatgate.app.cli", run_name="__main__")
