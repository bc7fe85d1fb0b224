"""Fetching a file a Slack message carries: ``url_private_download`` with the bot token.

Slack serves a message's files from ``files.slack.com`` to a caller that shows the bot token
(``Authorization: Bearer``; the bot needs the ``files:read`` scope). The token goes to that
host only (or to ``api_base``'s, for a test double): a URL anywhere else is never fetched.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from chatgate.domain.inbound import Attachment
from chatgate.domain.media import FileBody, MediaRefused

FILE_HOSTS = frozenset({"files.slack.com"})
CONNECT_TIMEOUT = 15.0
READ_TIMEOUT = 60.0


def attachments_of(event: dict[str, Any]) -> tuple[Attachment, ...]:
    """The message's files as references (the private download URL is the ref)."""
    found = []
    files = event.get("files")
    for item in files if isinstance(files, list) else ():
        if not isinstance(item, dict):
            continue
        url = item.get("url_private_download") or item.get("url_private")
        if not isinstance(url, str):
            continue
        mime = item.get("mimetype") if isinstance(item.get("mimetype"), str) else None
        name = item.get("name") if isinstance(item.get("name"), str) else None
        size = item.get("size") if isinstance(item.get("size"), int) else None
        found.append(Attachment("file", url, mime, name, size))
    return tuple(found)


def may_download(url: str, api_base: str) -> bool:
    parts = urlsplit(url)
    host = parts.hostname or ""
    return parts.scheme in ("https", "http") and (host in FILE_HOSTS or host == urlsplit(api_base).hostname)


async def download(url: str, token: str, api_base: str) -> AsyncIterator[bytes]:
    """The file's bytes as they arrive; ``MediaRefused`` with a reason a person reads."""
    import aiohttp

    if not may_download(url, api_base):
        raise MediaRefused("the file is not on Slack's servers")
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT, sock_read=READ_TIMEOUT)
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(url, headers=headers, allow_redirects=False) as response,
        ):
            if response.status != 200:
                status = response.status
                raise MediaRefused(
                    f"Slack refused the download (HTTP {status}; does the app have files:read?)"
                )
            async for chunk in response.content.iter_chunked(64 * 1024):
                yield chunk
    except (aiohttp.ClientError, TimeoutError, ConnectionError) as exc:
        raise MediaRefused(f"the download from Slack failed ({type(exc).__name__})") from None


async def put_upload(url: str, api_base: str, name: str, mime: str, body: FileBody, timeout: float) -> None:
    """The bytes of ``files.getUploadURLExternal``'s ``upload_url`` (step two of Slack's external
    upload), only to Slack's file host: ``OSError`` or ``ValueError`` when it did not take them."""
    import aiohttp

    from chatgate.platforms.kit.upload import FilePayload  # imports aiohttp: at the first upload

    if not may_upload(url, api_base):
        raise ValueError("the upload URL is not on Slack's servers")
    form = aiohttp.FormData()
    form.add_field("file", FilePayload(body, mime), filename=name)  # streamed from the store
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
        session.post(url, data=form, allow_redirects=False) as response,
    ):
        if response.status != 200:
            raise ValueError(f"Slack refused the upload (HTTP {response.status})")


def may_upload(url: str, api_base: str) -> bool:
    return may_download(url, api_base)
