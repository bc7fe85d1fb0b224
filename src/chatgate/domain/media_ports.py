"""The ports through which files come in: an adapter that fetches the files its events name,
and the intake a platform that receives files itself hands them to."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, cast

from chatgate.domain.inbound import Attachment
from chatgate.domain.media import BlobStream, FileBody, MediaItem
from chatgate.domain.outbound import DeliveryResult
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.outfiles import OutFile


class MediaSource(Protocol):
    """An adapter that can fetch the files its events refer to (``Inbound.attachments``).

    ``open_attachment`` streams the file's bytes as they arrive (never whole in memory); the
    engine bounds its size and time. An attachment the platform no longer has (an expired
    link, a deleted file) raises ``MediaRefused`` with the reason a person reads."""

    def open_attachment(self, attachment: Attachment) -> AsyncIterator[bytes]: ...


class MediaIntake(Protocol):
    """Where a platform that receives files itself (the web chat's upload) hands one in: it is
    streamed, bounded, checked and stored (``MediaRefused`` says why not)."""

    async def take(
        self, chunks: AsyncIterator[bytes], platform: str, name: str, owner: str | None = None
    ) -> MediaItem:
        """``owner`` (``<platform>:<user id>``): whose quota the file counts against, when known."""
        ...

    async def read_blob(self, sha: str) -> bytes | None:
        """A stored file's bytes (a download the platform serves itself: the web chat's); None if gone."""
        ...

    async def open_blob(self, sha: str) -> BlobStream | None:
        """A stored file as a stream of pieces (a download served without holding it whole)."""
        ...

    async def signing_key(self, name: str) -> bytes:
        """The store's secret ``name``, the same on every process (``Media.shared_key``)."""
        ...


def media_source(adapter: object | None) -> MediaSource | None:
    """The adapter as a ``MediaSource``, or None when it cannot fetch files (yet)."""
    if adapter is None or not callable(getattr(adapter, "open_attachment", None)):
        return None
    return cast(MediaSource, adapter)


class FilePlatform(Protocol):
    """A platform that uploads the files the agent sends (``Capabilities.max_upload_bytes``).

    ``body`` streams the blob as the request is written (``FileBody.pieces``; never whole in
    memory); ``caption`` is the row's text, already marked as a possible repeat when an earlier
    upload's outcome was unknown. Results mean what they mean for a text send: an upload whose
    request may have reached the platform is ``Ambiguous``.
    """

    async def send_file(
        self, row: OutboxRow, file: OutFile, body: FileBody, caption: str
    ) -> DeliveryResult: ...


def file_sender(adapter: object) -> FilePlatform | None:
    """The adapter as a file platform, or None (a file row then fails with a reason)."""
    caps = getattr(adapter, "capabilities", None)
    if caps is None or getattr(caps, "max_upload_bytes", 0) <= 0:
        return None
    if not callable(getattr(adapter, "send_file", None)):
        return None
    return cast(FilePlatform, adapter)
