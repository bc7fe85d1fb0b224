"""Listening sockets and loopback addresses, shared by the gateway and the relay simulator."""

from __future__ import annotations

import socket

from chatgate.platforms.kit.origins import hostname as hostname
from chatgate.platforms.kit.origins import is_loopback as is_loopback


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
