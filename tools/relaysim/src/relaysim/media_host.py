"""The connector's re-host for ``send_media`` (``POST /relay/media``), and the URLs it serves.

The contract caps a re-host at 25 MB with about an hour's life and leaves the request's shape
to the connector; the simulator takes the shape chatgate documents (docs/relay-protocol.md):
the file's bytes as the body, its type as ``Content-Type``, its name as ``?filename=``, the
gateway's relay bearer token, and answers ``{"url", "expires_at"}``. Uploads are kept in memory
(a simulator's run is short) and counted, so a test can tell a re-host that happened twice.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from starlette.requests import Request
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
        if self.refusal is not None:
            return JSONResponse({"error": "refused by the test"}, status_code=self.refusal)
        declared = request.headers.get("content-length", "")
        if not declared.isdigit():
            return JSONResponse({"error": "Content-Length is required"}, status_code=411)
        if int(declared) > CAP_BYTES:
            return JSONResponse({"error": "over the 25 MB re-host cap"}, status_code=413)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > CAP_BYTES:
                return JSONResponse({"error": "over the 25 MB re-host cap"}, status_code=413)
        if not body:
            return JSONResponse({"error": "an empty file"}, status_code=400)
        media_id = secrets.token_hex(12)
        expires = time.time() + TTL_SECONDS
        mime = request.headers.get("content-type", "application/octet-stream")
        name = request.query_params.get("filename", "file")
        self.hosted[media_id] = Hosted(gateway_id, name, mime, bytes(body), expires)
        return JSONResponse({"url": f"{self._base_url()}/relay/media/{media_id}", "expires_at": int(expires)})

    async def serve(self, request: Request) -> Response:
        found = self.hosted.get(str(request.path_params["media_id"]))
        if found is None or found.expires_at < time.time():
            return Response(status_code=404)
        return Response(found.data, media_type=found.mime)

    def fetch(self, url: str) -> Hosted | None:
        """What a ``source_url`` of this host names (None: not one of its re-hosts)."""
        prefix = f"{self._base_url()}/relay/media/"
        return self.hosted.get(url.removeprefix(prefix)) if url.startswith(prefix) else None
