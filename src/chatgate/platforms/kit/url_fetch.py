"""Fetching a file from a URL someone else chose, streamed, never from a private address.

The API's ``image_url`` parts and the relay's attachment URLs name any host their sender
likes: fetched naively, they would let a client read the gateway's own network (SSRF). So
the host is resolved here, and unless the operator allowed private addresses every address
it resolves to must be public (loopback, private, link-local, shared, reserved and multicast
addresses are refused: fail closed); the connection goes to the address that was checked (a
second DNS answer cannot point elsewhere), and each redirect is checked the same way.

HTTP/1.1 is spoken with h11 over asyncio streams: h11 is what the gateway's HTTP server
(uvicorn) already runs on, so this needs no optional extra, and connecting to the checked
address while naming the host (``Host``, TLS SNI and certificate check) is direct.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import ssl
from collections.abc import AsyncIterator
from urllib.parse import urljoin, urlsplit

import h11
import msgspec

from chatgate.domain.media import MediaRefused

MAX_REDIRECTS = 3
CONNECT_SECONDS = 10.0
READ_BYTES = 64 * 1024
_REDIRECTS = {301, 302, 303, 307, 308}


class Target(msgspec.Struct, frozen=True):
    scheme: str
    host: str
    port: int
    path: str

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def parse_url(url: str) -> Target:
    """An http(s) URL's parts; ``MediaRefused`` for any other scheme or a URL without a host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise MediaRefused("the URL is not valid") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise MediaRefused(f"only http and https URLs are fetched (not {scheme or 'a relative URL'}:)")
    if not parts.hostname:
        raise MediaRefused("the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise MediaRefused("a URL with credentials is not fetched")
    path = parts.path or "/"
    if parts.query:
        path += f"?{parts.query}"
    return Target(scheme, parts.hostname, port or (443 if scheme == "https" else 80), path)


def is_public(address: str) -> bool:
    """Whether ``address`` is reachable on the public internet (an IPv4-mapped IPv6 address
    is judged as the IPv4 address it is)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def vetted_address(host: str, port: int, allow_private: bool) -> str:
    """The address to connect to: ``host`` resolved, refused unless every answer is public."""
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), CONNECT_SECONDS)
    except (OSError, TimeoutError):
        raise MediaRefused(f"the host {host[:80]} could not be resolved") from None
    addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise MediaRefused(f"the host {host[:80]} could not be resolved")
    if not allow_private and not all(is_public(a) for a in addresses):
        raise MediaRefused(
            f"the host {host[:80]} is a private or local address, which the gateway does not fetch from"
        )
    return addresses[0]


async def _response(conn: h11.Connection, reader: asyncio.StreamReader) -> h11.Response:
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(READ_BYTES))
        elif isinstance(event, h11.Response):
            return event
        elif isinstance(event, h11.ConnectionClosed):
            raise MediaRefused("the server closed the connection without answering")
        # an informational response (100 Continue) is skipped


def _header(response: h11.Response, name: bytes) -> str | None:
    for key, value in response.headers:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def fetch_url(url: str, allow_private: bool = False, what: str = "the server") -> AsyncIterator[bytes]:
    """The body of ``url`` as it arrives; ``MediaRefused`` with a reason a person reads.

    The caller bounds size and time (``engine.ports.MediaIntake`` / the fetch step)."""
    for _ in range(MAX_REDIRECTS + 1):
        target = parse_url(url)
        address = await vetted_address(target.host, target.port, allow_private)
        tls = ssl.create_default_context() if target.scheme == "https" else None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    address, target.port, ssl=tls, server_hostname=target.host if tls else None
                ),
                CONNECT_SECONDS,
            )
        except (OSError, TimeoutError) as exc:
            raise MediaRefused(f"{what} could not be reached ({type(exc).__name__})") from None
        try:
            conn = h11.Connection(h11.CLIENT)
            headers = [
                ("Host", target.host_header),
                ("User-Agent", "chatgate"),
                ("Accept", "*/*"),
                ("Connection", "close"),
            ]
            writer.write(conn.send(h11.Request(method="GET", target=target.path, headers=headers)))
            writer.write(conn.send(h11.EndOfMessage()))
            await writer.drain()
            response = await _response(conn, reader)
            if response.status_code in _REDIRECTS:
                location = _header(response, b"location")
                if not location:
                    raise MediaRefused(f"{what} redirected without saying where")
                url = urljoin(url, location)
                continue
            if response.status_code != 200:
                raise MediaRefused(f"{what} refused the download (HTTP {response.status_code})")
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await reader.read(READ_BYTES))
                elif isinstance(event, h11.Data):
                    yield bytes(event.data)
                elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                    return
        except (OSError, h11.ProtocolError) as exc:
            raise MediaRefused(f"the download from {what} failed ({type(exc).__name__})") from None
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
    raise MediaRefused(f"{what} redirected more than {MAX_REDIRECTS} times")
