"""Which pages and hosts may talk to this gateway: loopback names, origins, DNS rebinding.

Shared by the platforms that serve browsers (the web chat's socket) and by the gateway's
own local endpoints (``/status``).
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection


def is_loopback(host: str | None) -> bool:
    """``localhost`` or a loopback IP (IPv4-mapped IPv6 included); nothing else, no DNS."""
    if not host:
        return False
    host = host.removeprefix("::ffff:")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def hostname(netloc: str) -> str:
    """The host part of a ``Host`` header or URL authority, without port or IPv6 brackets."""
    host = netloc.lower().rsplit("@", 1)[-1]
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def names_this_host(conn: HTTPConnection, allowed: frozenset[str]) -> bool:
    """The ``Host`` asked for is a loopback name, an IP literal, or an allowed origin's host.

    A DNS-rebinding page (a name of the attacker's that resolves to this machine) always
    asks for a name of the attacker's; an operator's ``curl`` asks for an address or
    ``localhost``.
    """
    host = hostname(conn.headers.get("host", ""))
    if is_loopback(host) or host in {hostname(urlsplit(o).netloc) for o in allowed}:
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def origin_allowed(conn: HTTPConnection, allowed: frozenset[str], loopback_bind: bool) -> bool:
    """Refuse cross-site requests: a page elsewhere must not drive this gateway (and its tools).

    Browsers always send ``Origin`` on a WebSocket; other clients usually send none, and
    a client that can set headers can reach the port anyway. Same-origin means the
    ``Host`` the browser asked for; on a loopback bind that host must itself be a
    loopback name, or DNS rebinding (a name of the attacker's that resolves to
    127.0.0.1) would pass as same-origin.
    """
    origin = conn.headers.get("origin")
    if origin is None or origin.rstrip("/") in allowed:
        return True
    host = conn.headers.get("host", "").lower()
    parsed = urlsplit(origin)
    if not parsed.netloc or parsed.netloc.lower() != host:
        return False
    return not loopback_bind or is_loopback(hostname(host))
