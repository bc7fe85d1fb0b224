"""``python stop_while_building.py run ...``: ``chatgate`` whose SIGTERM arrives while the
gateway's parts are built, inside code that catches every ``Exception`` (as library code does:
pydantic wrapped one in a ``SchemaError``). A start must still end with 0, not run on."""

from __future__ import annotations

import contextlib
import os
import signal
import sys

import chatgate.app.gateway as gateway
from chatgate.app.cli.main import main

real_build = gateway.build_platforms


def build_with_a_stop(*args: object, **kwargs: object) -> object:
    with contextlib.suppress(Exception):  # the broad catch of library code is the point
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before kill's caller goes on
    return real_build(*args, **kwargs)  # type: ignore[arg-type]


gateway.build_platforms = build_with_a_stop  # type: ignore[assignment]
sys.exit(main(sys.argv[1:]))
