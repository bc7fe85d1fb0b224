"""Telling the HTTP server that a connection's client proved who it is.

The server gives every connection a place in a budget for strangers until the app vouches
for it (``app/http/budget.py``): strangers' connections are pushed out to make room for
new ones, a vouched-for connection never is. An adapter vouches once a credential checks
out (a web chat hello with the right token or a session cookie, an API key, a signed
delivery), through the callable the server put in the ASGI scope. Outside the gateway's
server (a test's bare app) there is none, and vouching does nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection

SCOPE_KEY = "chatgate.vouch"


def vouch(conn: HTTPConnection) -> None:
    """This request's (or socket's) client proved who it is: its connection leaves the budget."""
    found: Callable[[], Any] | None = conn.scope.get(SCOPE_KEY)
    if found is not None:
        found()
