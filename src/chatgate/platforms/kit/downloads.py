"""A stored file served as a download, never rendered: what the web chat's and the API's file links
answer with, so a file the agent sent (an SVG, an HTML page) can never run script in a browser."""

from __future__ import annotations

from urllib.parse import quote

from starlette.responses import StreamingResponse

from chatgate.domain.media import BlobStream, sanitize_name


def download_response(blob: BlobStream, name: str, mime: str) -> StreamingResponse:
    """Streamed piece by piece from the blob store (a 100 MB file never sits whole in memory), as
    an attachment, with sniffing and every active content switched off."""
    safe = sanitize_name(name)
    headers = {
        "Content-Disposition": f"attachment; filename=\"{safe}\"; filename*=UTF-8''{quote(safe)}",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox; default-src 'none'",
        "Cache-Control": "private, no-store",
        "Content-Length": str(blob.size),
    }
    return StreamingResponse(blob.chunks, media_type=mime or "application/octet-stream", headers=headers)
