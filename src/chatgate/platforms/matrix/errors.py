"""What a client-server API call can fail with, without importing the HTTP client.

Every failure says whether the request may have reached the homeserver, because that
decides what a failed send means (the outbox's honest answer):

- ``RateLimited``: ``M_LIMIT_EXCEEDED`` (HTTP 429), with the delay the homeserver asked for
  (``retry_after_ms`` in the body, or the ``Retry-After`` header);
- ``ApiRefused``: any other error answer (``errcode``, HTTP status): the call was refused;
- ``NotSent``: the request never left (connection refused, DNS);
- ``MaybeSent``: it may have arrived (timeout, connection dropped, an unreadable answer).

``NotSent`` and ``MaybeSent`` are the domain's (``chatgate.domain.errors``), shared by every
platform; all are ``PlatformCallError``s, and ``str()`` of each never holds the access token.
"""

from __future__ import annotations

from chatgate.domain.errors import PlatformCallError


class ApiRefused(PlatformCallError):
    def __init__(self, what: str, status: int, errcode: str, message: str) -> None:
        super().__init__(f"{what}: HTTP {status} {errcode}: {message}")
        self.status = status
        self.errcode = errcode


class RateLimited(ApiRefused):
    def __init__(self, what: str, status: int, message: str, retry_after: float) -> None:
        super().__init__(what, status, "M_LIMIT_EXCEEDED", f"{message} (retry after {retry_after:.3f}s)")
        self.retry_after = retry_after
