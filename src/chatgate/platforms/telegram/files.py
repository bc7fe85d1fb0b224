"""Fetching a file a Telegram message carries: ``getFile`` for its path, then its download.

The Bot API serves a bot files up to 20 MB (``getFile`` answers "file is too big" past that)
from ``<api base>/file/bot<token>/<file_path>``; the path stays valid for at least an hour,
and a ``file_id`` from an old message may be gone. Each refusal becomes a ``MediaRefused``
whose reason a person reads; the token (in the download URL) never appears in one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from chatgate.domain.errors import PlatformCallError
from chatgate.domain.inbound import Attachment
from chatgate.domain.media import MediaRefused
from chatgate.platforms.telegram.errors import ApiRefused, Call

Download = Callable[[str], AsyncIterator[bytes]]
GET_FILE_TIMEOUT = 30.0


def refusal(exc: ApiRefused) -> str:
    if exc.says("file is too big"):
        return "Telegram lets a bot download files up to 20 MB only"
    if exc.says("wrong file_id") or exc.says("temporarily unavailable") or exc.says("invalid file_id"):
        return "Telegram no longer has this file (it may have expired)"
    return f"Telegram refused the download ({exc.code})"


async def open_file(call: Call, download: Download, attachment: Attachment) -> AsyncIterator[bytes]:
    """The file's bytes as they arrive."""
    try:
        info: Any = await call("getFile", GET_FILE_TIMEOUT, file_id=attachment.ref)
    except ApiRefused as exc:
        raise MediaRefused(refusal(exc)) from None
    except PlatformCallError as exc:  # its text is not redacted here: name the kind only
        raise MediaRefused(f"Telegram could not be asked for the file ({type(exc).__name__})") from None
    path = info.get("file_path") if isinstance(info, dict) else None
    if not isinstance(path, str) or not path:
        raise MediaRefused("Telegram gave no download path for this file")
    async for chunk in download(path):
        yield chunk
