"""The connector's re-host for ``send_media`` (``POST /relay/media``), and the URLs it serves.

The contract caps a re-host at 25 MB with about an hour's life and leaves the request's shape
to the connector; the simulator takes the shape chatgate documents (docs/relay-protocol.md):
the file's bytes as the body, its type as ``Content-Type``, its name as ``?filename=``, the
gateway's relay bearer token, and answers ``{"url", "expires_at"}``. Uploads are kept in memory
(a simulator's run is short) and counted, so a test can tell a re-host that happened twice; a
test can also refuse uploads, lower the cap, or stall an upload to kill the gateway during it.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from relaysim.auth import TokenRejected, bearer, verify_token

CAP_BYTES = 25 * 1024 * 1024
TTL_SECONDS = 3600


@dataclass(frozen=True)
class Hosted:
    gateway_id: str
    name: str
    mime: str
    data: bytes
    expires_at: float


class MediaHost:
    def __init__(
        self, secrets_of: Callable[[], Mapping[str, Sequence[str]]], base_url: Callable[[], str]
    ) -> None:
        self._secrets_of = secrets_of
        self._base_url = base_url
        self.hosted: dict[str, Hosted] = {}
        self.refusal: int | None = None
        """An HTTP status every upload is answered with instead (a test's broken re-host)."""
        self.cap_bytes = CAP_BYTES
        """The largest upload taken (a test lowers it to play a connector with a smaller cap)."""
        self.stall_uploads = 0
        """How many of the next uploads stop reading their body until ``release()`` (a test kills
        the gateway meanwhile)."""
        self.uploads_seen = 0
        """Uploads that passed the token check, whatever became of them."""
        self._released = asyncio.Event()

    def release(self) -> None:
        """Let stalled uploads go on (their gateway may be gone by then)."""
        self._released.set()

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/relay/media", self.upload, methods=["POST"]),
            Route("/relay/media/{media_id}", self.serve, methods=["GET"]),
        ]

    async def upload(self, request: Request) -> Response:
        try:
            gateway_id = verify_token(bearer(request.headers.get("authorization")), self._secrets_of())
        except TokenRejected as exc:
            return JSONResponse({"error": exc.reason}, status_code=401)
        self.uploads_seen += 1
        if self.refusal is not None:
            return JSONResponse({"error": "refused by the test"}, status_code=self.refusal)
        declared = request.headers.get("content-length", "")
        if not declared.isdigit():
            return JSONResponse({"error": "Content-Length is required"}, status_code=411)
        if int(declared) > self.cap_bytes:
            return _too_large(self.cap_bytes)
        if self.stall_uploads > 0:
            self.stall_uploads -= 1
            await self._released.wait()
        try:
            body = await self._body(request)
        except ClientDisconnect:
            return Response(status_code=400)  # nobody is left to read it
        if body is None:
            return _too_large(self.cap_bytes)
        if not body:
            return JSONResponse({"error": "an empty file"}, status_code=400)
        media_id = secrets.token_hex(12)
        expires = time.time() + TTL_SECONDS
        mime = request.headers.get("content-type", "application/octet-stream")
        name = request.query_params.get("filename", "file")
        self.hosted[media_id] = Hosted(gateway_id, name, mime, body, expires)
        return JSONResponse({"url": f"{self._base_url()}/relay/media/{media_id}", "expires_at": int(expires)})

    async def _body(self, request: Request) -> bytes | None:
        """The upload's bytes, or None past the cap (a body longer than it declared)."""
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.cap_bytes:
                return None
        return bytes(body)

    async def serve(self, request: Request) -> Response:
        found = self.hosted.get(str(request.path_params["media_id"]))
        if found is None or found.expires_at < time.time():
            return Response(status_code=404)
        return Response(found.data, media_type=found.mime)

    def missing(self, url: str) -> bool:
        """A ``source_url`` on this host that serves nothing (a public URL is not fetched here)."""
        if not url.startswith(f"{self._base_url()}/relay/media/"):
            return False
        found = self.fetch(url)
        return found is None or found.expires_at < time.time()

    def fetch(self, url: str) -> Hosted | None:
        """What a ``source_url`` of this host names (None: not one of its re-hosts)."""
        prefix = f"{self._base_url()}/relay/media/"
        return self.hosted.get(url.removeprefix(prefix)) if url.startswith(prefix) else None


def _too_large(cap: int) -> Response:
    return JSONResponse({"error": f"over the {cap // 2**20} MB re-host cap"}, status_code=413)
