"""A file the agent sends, re-hosted by the connector for its ``send_media`` op.

The contract's ``send_media`` names its file by ``source_url``: a public URL, or a re-host the
connector makes with ``POST /relay/media`` (a 25 MB cap, about an hour's life). The contract
leaves the request's shape to the connector; chatgate sends the one documented in
docs/relay-protocol.md: the file's bytes as the body (its type as ``Content-Type``, its name as
the ``filename`` query parameter, its length as ``Content-Length``), the same bearer token as
the WebSocket's upgrade, and reads ``{"url": ...}`` back.

The connector is the operator's own (its URL is configured), so no address check applies; the
body streams from the blob store piece by piece (h11 over asyncio streams, as the URL fetcher
and the HTTP server speak it: no optional extra). Nothing is posted in a chat by this step: every
failure is a plain retry, or a refusal when the connector says the file is too large.
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
from chatgate.platforms.relay.frames.incoming import REHOST_MAX_BYTES

ANSWER_MAX_BYTES = 64 * 1024
CONNECT_SECONDS = 10.0


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
            ("Connection", "close"),
        ],
    )
    tls = ssl.create_default_context() if target.scheme == "https" else None
    try:
        async with asyncio.timeout(CONNECT_SECONDS + 30.0 + body.size / 1_000_000):
            reader, writer = await asyncio.open_connection(target.host, target.port, ssl=tls)
            try:
                writer.write(conn.send(request) or b"")
                async for piece in body.pieces():
                    writer.write(conn.send(h11.Data(data=piece)) or b"")
                    await writer.drain()
                writer.write(conn.send(h11.EndOfMessage()) or b"")
                await writer.drain()
                status, answer = await _answer(conn, reader)
            finally:
                writer.close()
    except (OSError, TimeoutError, h11.ProtocolError) as exc:
        raise RehostFailed(f"the connector's re-host failed ({type(exc).__name__})") from None
    return _url_of(status, answer)


async def _answer(conn: h11.Connection, reader: asyncio.StreamReader) -> tuple[int, bytes]:
    status, body = 0, b""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(ANSWER_MAX_BYTES)
            conn.receive_data(data)
            if not data and conn.their_state is not h11.DONE:
                raise RehostFailed("the connector closed the connection without answering")
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > ANSWER_MAX_BYTES:
                raise RehostFailed("the connector's answer is too long")
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            return status, body


def _url_of(status: int, answer: bytes) -> str:
    if status == 413:
        raise RehostRefused(
            f"the connector refused the file: over its {REHOST_MAX_BYTES // 2**20} MB re-host cap"
        )
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
