"""``GET /v1/files/{file_id}/content``: a file the agent sent with an API answer (``file_links.py``).

A file is named ``file-<delivery id>-<n>`` (the request's id and the file's place in its turn), so
the route finds it through the request's exchange, which only the key that made it may read: no
link of another key works, and nothing but the store decides what a link names. The bytes come
from the blob store as a download (``kit/downloads.py``), never rendered.
"""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.responses import Response

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.media import human_size
from chatgate.platforms.api.adapter import ApiAdapter
from chatgate.platforms.api.errors import ApiError
from chatgate.platforms.api.lane import owned_exchange
from chatgate.platforms.kit.downloads import download_response

_FILE_ID = re.compile(r"file-([0-9a-f]{32})-(\d{1,4})")


async def content(adapter: ApiAdapter, request: Request) -> Response:
    """``GET /v1/files/{file_id}/content``: one of the key's files, as a download."""
    key = await adapter.authenticate(request)
    ident = str(request.path_params["file_id"])
    found = _FILE_ID.fullmatch(ident)
    exchange = await owned_exchange(adapter, key, f"resp_{found.group(1)}") if found else None
    n = int(found.group(2)) if found else -1
    if exchange is None or not 0 <= n < len(exchange.files):
        raise ApiError(404, "not_found", f"no file {ident[:60]!r} was sent to this API key")
    file = exchange.files[n]
    media = adapter.files.media
    try:
        blob = await media.open_blob(file.sha) if media is not None else None
    except StoreUnavailable as exc:
        raise ApiError(503, "storage_unavailable", f"the file could not be read: {exc}") from exc
    if blob is None:
        raise ApiError(
            404, "file_gone", f"{file.name} ({human_size(file.size)}) is no longer stored (media retention)"
        )
    return download_response(blob, file.name, file.mime)
