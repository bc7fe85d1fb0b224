"""A file row's send: its blob, streamed from the store, to the adapter's upload
(``FilePlatform.send_file``). Delivery paces and settles it like any row (``delivery.py``)."""

from __future__ import annotations

from typing import Protocol

from chatgate.domain.media import BlobGone, BlobStream, FileBody
from chatgate.domain.media_ports import file_sender
from chatgate.domain.outbound import DeliveryResult, Rejected
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.outfiles import OutFile
from chatgate.engine.ports import Adapter, marked_text


class BlobReader(Protocol):
    """What delivery reads of the media role: a file row's blob, as a stream."""

    async def open_blob(self, sha: str) -> BlobStream | None: ...


async def send_file(
    adapter: Adapter, row: OutboxRow, file: OutFile, blobs: BlobReader | None, duplicate_marker: str
) -> DeliveryResult:
    """A platform that takes no files, or a blob that is gone, fails the row for good (the size
    limit was checked when it was recorded, and again here against the adapter's own)."""
    sender = file_sender(adapter)
    if sender is None:
        return Rejected(f"the {row.platform} adapter uploads no files")
    if file.size > adapter.capabilities.max_upload_bytes:
        return Rejected(f"{file.name} is larger than {row.platform} takes")
    first = await blobs.open_blob(file.sha) if blobs is not None else None
    if blobs is None or first is None:
        return Rejected(f"the file {file.name} is no longer stored")
    reader = blobs
    body = FileBody(first, lambda: reader.open_blob(file.sha))
    caption = marked_text(row, duplicate_marker).strip()  # the marker alone, on a bare file
    try:
        return await sender.send_file(row, file, body, caption)
    except BlobGone:
        return Rejected(f"the file {file.name} is no longer stored")
    finally:
        await body.close()
