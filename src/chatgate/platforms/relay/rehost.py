"""A file the agent sends, re-hosted by the connector for its ``send_media`` op.

The contract's ``send_media`` names its file by ``source_url``: a public URL, or a re-host the
connector makes with ``POST /relay/media`` (a 25 MB cap, about an hour's life). The contract
leaves the request's shape to the connector; chatgate sends the one documented in
docs/relay-protocol.md: the file's bytes as the body (its type as ``Content-Type``, its name as
the ``filename`` query parameter, its length as ``Content-Length``), the same bearer token as
the WebSocket's upgrade, and reads ``{"url": ...}`` back.

The connector is the operator's own (its URL is configured), so no address check applies; the
body streams from the blob store piece by piece (h11 over asyncio streams, as the URL fetcher
and the HTTP server speak it: no optional extra). The request asks ``Expect: 100-continue``, so
a connector that refuses the file by its headers (a lower cap) answers before any of the body is
sent, instead of resetting a connection the answer may be lost with; one that never says
``100 Continue`` gets the body after a second anyway. Nothing is posted in a chat by this step:
every failure is a plain retry, or a refusal when the connector says the file is too large.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from urllib.parse import quote

import h11

from chatgate.domain.media import FileBody
from chatgate.domain.outfiles import OutFile
from chatgate.platforms.kit.url_fetch import parse_url
from chatgate.platforms.relay.auth import make_upgrade_token

ANSWER_MAX_BYTES = 64 * 1024
CONNECT_SECONDS = 10.0
CONTINUE_SECONDS = 1.0
"""How long the body waits for ``100 Continue`` (or an early refusal) before it is sent anyway."""


class RehostRefused(Exception):
    """The connector refused the file for good (it is too large, or not a file it takes)."""


class RehostFailed(Exception):
    """The re-host did not happen (the connector unreachable, an error, a bad answer): retry."""


def media_url(base: str) -> str:
    """The configured connector base (``wss://relay.example``, ``http://host:port/relay``) as
    the re-host endpoint's URL."""
    raw = base.strip().rstrip("/").removesuffix("/relay")
    if raw.startswith("wss://"):
        raw = "https://" + raw.removeprefix("wss://")
    elif raw.startswith("ws://"):
        raw = "http://" + raw.removeprefix("ws://")
    return raw + "/relay/media"


async def rehost(base: str, gateway_id: str, secret: str, file: OutFile, body: FileBody) -> str:
    """The connector's URL for the file; ``RehostRefused`` or ``RehostFailed`` otherwise."""
    target = parse_url(f"{media_url(base)}?filename={quote(file.name)}")
    token = make_upgrade_token(gateway_id, secret)
    conn = h11.Connection(h11.CLIENT)
    request = h11.Request(
        method="POST",
        target=target.path,
        headers=[
            ("Host", target.host_header),
            ("Authorization", f"Bearer {token}"),
            ("Content-Type", file.mime),
            ("Content-Length", str(body.size)),
            ("Expect", "100-continue"),
            ("Connection", "close"),
        ],
    )
    tls = ssl.create_default_context() if target.scheme == "https" else None
    try:
        async with asyncio.timeout(CONNECT_SECONDS + 30.0 + body.size / 1_000_000):
            reader, writer = await asyncio.open_connection(target.host, target.port, ssl=tls)
            try:
                writer.write(conn.send(request) or b"")
                await writer.drain()
                early = await _early_status(conn, reader)
                if early is None:
                    await _send_body(conn, writer, body)
                status, answer = await _answer(conn, reader, early or 0)
            finally:
                writer.close()
    except (OSError, TimeoutError, h11.ProtocolError) as exc:
        raise RehostFailed(f"the connector's re-host failed ({type(exc).__name__})") from None
    return _url_of(status, answer)


async def _early_status(conn: h11.Connection, reader: asyncio.StreamReader) -> int | None:
    """The final status the connector answered before the body (a refusal), or None: send it
    (``100 Continue`` came, or nothing within ``CONTINUE_SECONDS``)."""
    try:
        async with asyncio.timeout(CONTINUE_SECONDS):
            while True:
                event = await _next_event(conn, reader)
                if isinstance(event, h11.InformationalResponse):
                    return None
                if isinstance(event, h11.Response):
                    return event.status_code
    except TimeoutError:
        return None


async def _send_body(conn: h11.Connection, writer: asyncio.StreamWriter, body: FileBody) -> None:
    async for piece in body.pieces():
        writer.write(conn.send(h11.Data(data=piece)) or b"")
        await writer.drain()
    writer.write(conn.send(h11.EndOfMessage()) or b"")
    await writer.drain()


async def _next_event(conn: h11.Connection, reader: asyncio.StreamReader) -> object:
    """The answer's next event, reading as it needs (a cancelled read loses no data)."""
    while (event := conn.next_event()) is h11.NEED_DATA:
        data = await reader.read(ANSWER_MAX_BYTES)
        conn.receive_data(data)
        if not data and conn.their_state is not h11.DONE:
            raise RehostFailed("the connector closed the connection without answering")
    return event


async def _answer(conn: h11.Connection, reader: asyncio.StreamReader, status: int) -> tuple[int, bytes]:
    """The final status and body (``status`` already read when the connector answered early)."""
    body = b""
    while True:
        event = await _next_event(conn, reader)
        if isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > ANSWER_MAX_BYTES:
                raise RehostFailed("the connector's answer is too long")
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            return status, body


def _url_of(status: int, answer: bytes) -> str:
    if status == 413:
        raise RehostRefused("the connector refused the file: it is larger than its re-host takes (HTTP 413)")
    if status in (400, 415):
        raise RehostRefused(f"the connector refused the file (HTTP {status})")
    if status != 200:
        raise RehostFailed(f"the connector's re-host answered HTTP {status}")
    try:
        url = json.loads(answer).get("url")
    except (ValueError, AttributeError):
        url = None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise RehostFailed("the connector's re-host answered without a URL")
    return url
