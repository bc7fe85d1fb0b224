"""A request's file content parts, taken into the blob store before the request is admitted.

``image_url`` (a ``data:`` URL, or an http(s) URL fetched by ``kit.url_fetch``: public
addresses only unless ``platforms.api.allow_private_urls``), ``file`` (base64 ``file_data``),
``input_audio`` and the Responses API's ``input_image`` / ``input_file`` each go through the
engine's ``MediaIntake``: bounded in size and time, checked by content, stored by sha256. So a
bad file is the client's 400 naming its part (``messages.0.content.1``), the request admits
nothing, and the admitted message carries ``stored`` attachments the fetch step trusts (the API
adapter ``takes_uploads``: only this module makes them). Bytes sent inline are already in the
request body (bounded by ``max_body_bytes``); ``kit.inline`` decodes them.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from urllib.parse import unquote, urlsplit

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.inbound import Attachment
from chatgate.domain.media import MediaRefused, sanitize_name
from chatgate.domain.media_ports import MediaIntake
from chatgate.platforms.api.bodies import (
    AudioPart,
    FilePart,
    FilePartKind,
    ImagePart,
    InputFilePart,
    InputImagePart,
)
from chatgate.platforms.api.errors import ApiError
from chatgate.platforms.kit.inline import NotBase64, data_url, decode_base64, slices
from chatgate.platforms.kit.url_fetch import fetch_url

PLATFORM = "api"
STORED = "stored"
"""The attachment kind of a file already in the blob store (``engine.media_fetch.STORED``)."""
_FORMAT = re.compile(r"[A-Za-z0-9]{1,10}")


def _bad(param: str, message: str, code: str = "invalid_file") -> ApiError:
    return ApiError(400, code, f"{param}: {message}", param=param)


async def _decoded(text: str, param: str) -> bytes:
    try:
        return await decode_base64(text)
    except NotBase64 as exc:
        raise _bad(param, str(exc)) from None


def _url_name(url: str, fallback: str) -> str:
    last = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    return sanitize_name(last, fallback)


class FileTaker:
    """Takes one request's file parts in; ``media`` None means ``media.enabled`` is off."""

    def __init__(self, media: MediaIntake | None, allow_private_urls: bool) -> None:
        self.media = media
        self.allow_private_urls = allow_private_urls

    async def take(self, parts: Sequence[tuple[int, FilePartKind]], where: str) -> tuple[Attachment, ...]:
        """Each part stored, in order, as an attachment; a 400 naming the first bad one."""
        found: list[Attachment] = []
        for index, part in parts:
            param = f"{where}.{index}"
            if self.media is None:
                raise _bad(param, "this gateway does not take files (media.enabled is off)", "files_disabled")
            chunks, name = await self._open(part, param)
            try:
                item = await self.media.take(chunks, PLATFORM, name)
            except MediaRefused as exc:
                raise _bad(param, f"{name} was not accepted: {exc}") from None
            except StoreUnavailable as exc:
                raise ApiError(503, "storage_unavailable", f"the file could not be stored: {exc}") from exc
            found.append(Attachment(STORED, item.sha, item.mime, item.name, item.size))
        return tuple(found)

    async def _open(self, part: FilePartKind, param: str) -> tuple[AsyncIterator[bytes], str]:
        if isinstance(part, ImagePart):
            return await self._from_url(part.image_url.url, param, "image")
        if isinstance(part, InputImagePart):
            if part.image_url is None:
                raise _unsupported_id(param) if part.file_id else _bad(param, "image_url is missing")
            return await self._from_url(part.image_url, param, "image")
        if isinstance(part, AudioPart):
            fmt = part.input_audio.format
            if not _FORMAT.fullmatch(fmt):
                raise _bad(param, "input_audio.format must be a short name such as wav or mp3")
            return slices(await _decoded(part.input_audio.data, param)), f"audio.{fmt.lower()}"
        if isinstance(part, FilePart):
            data, name = part.file.file_data, part.file.filename
            if data is None:
                raise (
                    _unsupported_id(param) if part.file.file_id else _bad(param, "file.file_data is missing")
                )
            return await self._inline(data, param, sanitize_name(name, "file"))
        if isinstance(part, InputFilePart):
            if part.file_data is not None:
                return await self._inline(part.file_data, param, sanitize_name(part.filename, "file"))
            if part.file_url is not None:
                return await self._from_url(part.file_url, param, sanitize_name(part.filename, "file"))
            raise _unsupported_id(param) if part.file_id else _bad(param, "file_data or file_url is missing")
        raise _bad(param, "unsupported content part", "unsupported_content")  # pragma: no cover

    async def _inline(self, data: str, param: str, name: str) -> tuple[AsyncIterator[bytes], str]:
        """``file_data``: base64, or a ``data:`` URL of it (as OpenAI's own examples send)."""
        parsed = data_url(data) if data.startswith("data:") else None
        if parsed is not None:
            if not parsed[1]:
                raise _bad(param, "a data: URL must be base64 (data:<type>;base64,...)")
            data = parsed[1]
        return slices(await _decoded(data, param)), name

    async def _from_url(self, url: str, param: str, fallback: str) -> tuple[AsyncIterator[bytes], str]:
        if url.startswith("data:"):
            parsed = data_url(url)
            if parsed is None or not parsed[1]:
                raise _bad(param, "a data: URL must be base64 (data:<type>;base64,...)")
            mime, payload = parsed
            subtype = (mime or "").partition("/")[2]
            name = f"{fallback}.{subtype}" if subtype.isalnum() else fallback
            return slices(await _decoded(payload, param)), name
        if not url.lower().startswith(("http://", "https://")):
            raise _bad(param, "the URL must be a data: URL or an http(s) URL")
        return fetch_url(url, self.allow_private_urls, "the URL's server"), _url_name(url, fallback)


def _unsupported_id(param: str) -> ApiError:
    return _bad(
        param,
        "file_id is not supported (the gateway has no Files API): send the bytes (file_data) or a URL",
        "unsupported_parameter",
    )
