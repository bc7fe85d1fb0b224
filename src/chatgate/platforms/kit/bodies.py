"""A request body read whole only while it stays within a limit: a stranger's upload is never
held past what the route accepts (a declared length over it is refused before reading)."""

from __future__ import annotations

from starlette.requests import Request


async def bounded_body(request: Request, limit: int) -> bytes | None:
    """The body, or None when it is longer than ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
