"""Addresses and listening sockets, shared by the gateway and the relay simulator."""

from __future__ import annotations

import ipaddress
import socket


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


def listen_tcp(host: str, port: int, backlog: int) -> socket.socket:
    """A non-blocking listening socket; raises ``OSError`` (closed) when it cannot bind.

    Created TCP-typed on purpose: asyncio sets ``TCP_NODELAY`` only on sockets accepted
    from such a listener, and without it each reply frame waits for the peer's delayed
    ACK (~40 ms).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(backlog)
    sock.setblocking(False)
    return sock
