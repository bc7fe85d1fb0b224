"""The ASGI edge every request passes first: its connection's budget, its real client, hang-ups.

- The connection's place in the budget (``budget.py``) is found by the client's address and
  port, as the socket gave them, and the scope carries a callable with which the app
  vouches for it (``platforms.kit.trust``). This runs before the proxy headers are read, so
  a forwarded address never picks another connection.
- ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed from ``http.trusted_proxies``
  only (uvicorn's middleware, given that list); from anyone else they are ignored.
- A client that hangs up while its body is read (``ClientDisconnect``) is one short line
  within a budget, never a traceback: 60 trickled bodies hung up each logged 3.2 KB.
"""

from __future__ import annotations

import logging

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from chatgate.app.http.budget import Budget, Holder
from chatgate.domain.log_budget import LogBudget
from chatgate.platforms.kit.trust import SCOPE_KEY

log = logging.getLogger(__name__)


class Edge:
    def __init__(self, app: ASGIApp, budget: Budget | None, trusted_proxies: list[str]) -> None:
        self._budget = budget
        self._app: ASGIApp = app
        if trusted_proxies:
            self._app = ProxyHeadersMiddleware(app, trusted_hosts=trusted_proxies)  # type: ignore[arg-type,assignment]
        self.hang_ups = LogBudget(log)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self._app(scope, receive, send)
            return
        client = scope.get("client")
        holder = None
        if self._budget is not None and client is not None:
            holder = self._budget.by_peer.get((str(client[0]), int(client[1])))
            if holder is not None:
                scope[SCOPE_KEY] = holder.vouch
        if holder is not None and scope["type"] == "websocket":
            send = _lingering(send, holder)
        try:
            await self._app(scope, receive, send)
        except ClientDisconnect:
            self.hang_ups.info(
                "hang-up",
                "a request ended before its body was read: the client hung up or was cut off (%s %s from %s)",
                scope.get("method", "?"),
                str(scope.get("path", "?"))[:100],
                client[0] if client else "?",
            )


CLOSE_GRACE = 1.0
"""Seconds a stranger's socket has to answer our close frame (uvicorn waits 10 for anyone)."""


def _lingering(send: Send, holder: Holder) -> Send:
    """``send``, and once the app closes a socket nobody vouched for, its connection goes
    ``CLOSE_GRACE`` seconds later whether or not the client answers the close frame: a
    socket closed for saying no hello must not keep its place for ten seconds more."""

    async def sending(message: Message) -> None:
        await send(message)
        if message["type"] == "websocket.close" and not holder.trusted:
            holder.linger(CLOSE_GRACE)

    return sending
