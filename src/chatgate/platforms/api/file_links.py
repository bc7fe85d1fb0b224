"""The files the agent sent with an API answer, as the API shows them: a Markdown link per file at
the end of the answer's text (what every client shows) and the same list typed
(``chatgate_files``). A file is named ``file-<delivery id>-<n>``: the request's id and the file's
place in its turn (``outfiles.py`` serves it)."""

from __future__ import annotations

import re

from chatgate.domain.api_keys import ApiExchange

_MARKDOWN = re.compile(r"([\[\]()\\])")


def file_url(base: str, delivery_id: str, n: int) -> str:
    return f"{base.rstrip('/')}/v1/files/file-{delivery_id}-{n}/content"


def with_links(text: str, exchange: ApiExchange | None, delivery_id: str, base: str) -> str:
    """The answer, then a Markdown link per file (its caption after it)."""
    if exchange is None or not exchange.files:
        return text
    lines = []
    for n, file in enumerate(exchange.files):
        name = _MARKDOWN.sub(r"\\\1", file.name)  # a name's brackets stay text
        line = f"[{name}]({file_url(base, delivery_id, n)})"
        lines.append(f"{line} {file.caption}".rstrip())
    return (text.rstrip() + "\n\n" if text.strip() else "") + "\n".join(lines)


def file_objects(exchange: ApiExchange | None, delivery_id: str, base: str) -> list[dict[str, object]]:
    """The files as typed objects (OpenAI's file object, with where to fetch it)."""
    if exchange is None:
        return []
    return [
        {
            "id": f"file-{delivery_id}-{n}",
            "object": "file",
            "filename": file.name,
            "bytes": file.size,
            "mime_type": file.mime,
            "caption": file.caption,
            "url": file_url(base, delivery_id, n),
        }
        for n, file in enumerate(exchange.files)
    ]
