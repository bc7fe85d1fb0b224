"""A crash seam for the tests: a real SIGKILL at a named point of sending, armed by a file.

``CG_TEST_EMAIL_CRASH_AT=<point>:<path>`` in the gateway's environment arms the point
(``after_smtp``: the server accepted the reply, the ledger does not know yet;
``after_smtp_file``: the same for a mail carrying a file the agent sent;
``after_append``: the Sent copy is made too). When the process reaches it and ``<path>``
exists, it removes the file (so the restarted gateway does not crash again) and kills itself
with SIGKILL: nothing runs after it, exactly as when the machine dies. Without the variable
this is one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "CG_TEST_EMAIL_CRASH_AT"


def crash_point(name: str) -> None:
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return
    point, _, path = spec.partition(":")
    if point != name or not path:
        return
    try:
        os.unlink(path)  # armed once; a test-only path, so no thread hop for it
    except FileNotFoundError:
        return
    os.kill(os.getpid(), signal.SIGKILL)
