"""The durable fetch step: a turn's attachments are fetched before the agent is asked.

Admission committed each message with its attachment references only (it stays as fast as
a text message). When a turn takes its items up, every attachment without a recorded outcome
is fetched through its adapter (``engine.ports.MediaSource``), bounded in size and time,
checked (``media_ingest``), put in the blob store, and its outcome recorded (``Media``). A
process that dies mid-download recorded nothing: the re-run turn fetches again. A finished
fetch, or a failed one, is recorded: the re-run reads it and fetches nothing.

A failure is never the turn's failure: the agent reads a note saying which file did not come
through and why, the user sees the same line (a notice committed with the turn), and the rest
of the message is answered.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import msgspec

from chatgate.domain.context import render_turn_input
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbound import Attachment, Inbound
from chatgate.domain.media import (
    BlobStream,
    MediaContent,
    MediaItem,
    MediaLimits,
    MediaRecord,
    MediaRefused,
    media_key,
    refused_note,
    sanitize_name,
    with_attachments,
)
from chatgate.domain.media_ports import media_source
from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.store_roles import Media
from chatgate.domain.turns import QueuedItem
from chatgate.domain.voice import heard, transcript_line, transcript_notice, untranscribed_note
from chatgate.engine.media_ingest import check, extract_pdf_text
from chatgate.engine.media_quota import Limit, Quota, owner_of
from chatgate.engine.media_retention import RetentionSweeper, expired_note
from chatgate.engine.ports import Adapter
from chatgate.engine.replies import reply_draft
from chatgate.engine.voice import Transcriber
from chatgate.engine.voice_decode import NoAudio

log = logging.getLogger(__name__)
T = TypeVar("T")

STORED = "stored"
"""``Attachment.kind`` of a file already in the blob store: ``ref`` is its sha256, and the
adapter that made it vouches for its type and size (the web chat signs what it uploaded)."""
_FALLBACK_NAMES = {
    "photo": "photo.jpg", "voice": "voice.ogg", "video_note": "video.mp4", "sticker": "sticker",
}  # fmt: skip


async def bounded(work: Awaitable[T], limits: MediaLimits) -> T:
    """Parsing a file (in a thread) within ``timeout_seconds``: a pathological image or PDF
    cannot hold the turn (the thread finishes on its own; its result is dropped)."""
    try:
        return await asyncio.wait_for(work, limits.timeout_seconds)
    except TimeoutError:
        raise MediaRefused(f"the file could not be read within {limits.timeout_seconds:.0f} s") from None


def takes_uploads(adapter: Adapter | None) -> bool:
    """Whether the adapter's ``stored`` attachments name blobs it took in and vouches for (the
    web chat signs each upload's ref); any other platform's are ordinary, untrusted data."""
    return adapter is not None and getattr(adapter, "takes_uploads", False) is True


def stored_item(attachment: Attachment, name: str) -> MediaItem:
    return MediaItem(
        attachment.ref, attachment.mime or "application/octet-stream", attachment.size or 0, name
    )


def display_name(attachment: Attachment) -> str:
    """The attachment's name as shown (sanitised; a photo without one is ``photo.jpg``)."""
    return sanitize_name(attachment.name, _FALLBACK_NAMES.get(attachment.kind, attachment.kind or "file"))


def message_id(inbound: Inbound) -> tuple[str, str]:
    """What names a message across ``fold_edits`` (which keeps the original's delivery id)."""
    return (inbound.transport, inbound.delivery_id)


class TurnMedia(msgspec.Struct, frozen=True):
    """The fetched attachments of one turn, by message."""

    by_message: Mapping[tuple[str, str], tuple[MediaRecord, ...]] = msgspec.field(default_factory=dict)
    sources: Mapping[tuple[str, str], QueuedItem] = msgspec.field(default_factory=dict)
    show_transcripts: bool = False
    """Quote each voice note's transcript back to its sender (``media.voice.show_transcript``)."""

    def items(self, inbound: Inbound) -> tuple[MediaItem, ...]:
        return tuple(r.item for r in self.by_message.get(message_id(inbound), ()) if r.item is not None)

    def notes(self, inbound: Inbound) -> tuple[str, ...]:
        """One line per attachment of the message that did not come through, and each voice
        note's transcript (marked as one) or why it has none."""
        lines = []
        for record in self.by_message.get(message_id(inbound), ()):
            if record.item is None:
                lines.append(refused_note(record.name, record.error or "unknown"))
            elif record.transcript is not None:
                what = heard(record.item.kind)
                lines.append(transcript_line(record.name or record.item.name, record.transcript, what))
            elif record.transcript_error is not None:
                what = heard(record.item.kind)
                lines.append(
                    untranscribed_note(record.name or record.item.name, record.transcript_error, what)
                )
        return tuple(lines)

    def text(self, inbound: Inbound) -> str:
        """The message's text as the model reads it, its files named (``with_attachments``)."""
        return with_attachments(inbound.text, self.items(inbound), self.notes(inbound))

    def inputs(self, messages: Sequence[Inbound], shared: bool) -> list[str]:
        """Each message as the model reads it (``render_turn_input`` of its ``text``)."""
        return [render_turn_input(self.text(m), sender=m.source.user_name, shared=shared) for m in messages]

    def all_items(self) -> list[MediaItem]:
        return [r.item for records in self.by_message.values() for r in records if r.item is not None]

    def notices(self, session_key: str, route: Mapping[str, str]) -> list[OutboxDraft]:
        """The lines the user sees (recorded before the agent runs, as replies to their message): the
        files that did not come through, the voice notes that could not be transcribed, and,
        with ``show_transcripts``, what was heard of each voice note."""
        drafts: list[OutboxDraft] = []
        for ident, records in self.by_message.items():
            inbound = self.sources[ident].inbound
            for record in records:
                text = self._notice(record)
                if text is not None:
                    idem, reply_to = f"media:{record.key}", inbound.message_ref
                    draft = reply_draft(inbound.source, session_key, "notice", text, idem, reply_to, route)
                    drafts.append(draft)
        return drafts

    def _notice(self, record: MediaRecord) -> str | None:
        if record.item is None:
            return refused_note(record.name, record.error or "unknown")
        if record.transcript_error is not None:
            what = heard(record.item.kind)
            return untranscribed_note(record.name or record.item.name, record.transcript_error, what)
        if record.transcript is not None and self.show_transcripts:
            return transcript_notice(record.transcript)
        return None


def sweep(scratch: Path, before: float) -> int:
    """Remove the partial downloads a killed predecessor left (older than this process); the
    state directory's lock (or, in a fleet, each process's own state directory) makes them its."""
    removed = 0
    if not scratch.is_dir():
        return 0
    for entry in scratch.iterdir():
        with contextlib.suppress(FileNotFoundError):
            if entry.name.startswith("in-") and entry.stat().st_mtime < before:
                entry.unlink()
                removed += 1
    return removed


class MediaFetcher:
    """Fetches a turn's attachments once, durably, and loads stored items for the agent."""

    def __init__(
        self,
        store: Media,
        adapters: Mapping[str, Adapter],
        limits: MediaLimits,
        scratch: Path,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._adapters = adapters
        self.limits = limits
        self._scratch = scratch
        self._clock = clock
        self._born = clock()
        self._swept = False
        self._voice = Transcriber(limits.voice)
        self.quota = Quota(store, limits)
        days = limits.retention_days
        self.sweeper = RetentionSweeper(store, days) if days > 0 else None

    def start(self) -> None:
        """The retention sweep's task, when ``media.retention_days`` is set (``stop`` ends it)."""
        if self.sweeper is not None:
            self.sweeper.start()

    async def stop(self) -> None:
        if self.sweeper is not None:
            await self.sweeper.stop()

    def close(self) -> None:
        """Shutdown: the voice notes' thread (``engine/voice.py``)."""
        self._voice.close()

    async def fetch(self, items: Sequence[QueuedItem]) -> TurnMedia:
        """Every attachment of ``items`` with its outcome: recorded before, or fetched now."""
        by_message: dict[tuple[str, str], tuple[MediaRecord, ...]] = {}
        sources: dict[tuple[str, str], QueuedItem] = {}
        if not self._swept and any(q.inbound.attachments for q in items):
            await asyncio.to_thread(sweep, self._scratch, self._born)
            self._swept = True
        for queued in items:
            attachments = queued.inbound.attachments
            if not attachments:
                continue
            records = []
            for index, attachment in enumerate(attachments):
                key = media_key(queued.seq, index)
                record = await self._store.media_record(key)
                if record is None:
                    record = await self._fetch_one(queued, key, attachment)
                records.append(record)
            by_message[message_id(queued.inbound)] = tuple(records)
            sources[message_id(queued.inbound)] = queued
        return TurnMedia(by_message, sources, self.limits.voice.show_transcript)

    async def _fetch_one(self, queued: QueuedItem, key: str, attachment: Attachment) -> MediaRecord:
        platform = queued.inbound.source.platform
        name = display_name(attachment)
        source = media_source(self._adapters.get(platform))
        owner = owner_of(queued.inbound.source)
        item: MediaItem | None = None
        error: str | None = None
        if attachment.kind == STORED and takes_uploads(self._adapters.get(platform)):
            item = stored_item(attachment, name)  # an upload: checked when it came in
            error = await self.quota.refusal(owner, item.size)
            item = None if error else item
        elif source is None:
            error = f"files from {platform} cannot be fetched yet"
        else:
            try:
                limit = await self.quota.limit(owner, self.limits.bytes_for(platform), attachment.size)
                item = await self._download(source.open_attachment(attachment), name, limit)
            except MediaRefused as exc:
                error = str(exc)
            except TimeoutError:
                error = f"the download did not finish within {self.limits.timeout_seconds:.0f} s"
            except StoreUnavailable:
                raise  # the turn is fenced and re-run: nothing was recorded, it fetches again
            except Exception as exc:  # the platform's failure is this file's, never the turn's
                log.warning("fetching attachment %s failed: %s: %s", key, type(exc).__name__, exc)
                error = f"the download failed ({type(exc).__name__})"
        if error is not None:
            log.info("attachment %s not received: %s", key, error, extra={"platform": platform})
        transcript: str | None = None
        transcript_error: str | None = None
        if item is not None and item.kind in ("audio", "video") and self._voice.enabled:  # a video: its sound
            transcript, transcript_error = await self._transcribe(key, item)
        record = MediaRecord(key, item, error, name, transcript, transcript_error, owner)
        return await self._store.record_media(record, self._clock())

    async def _transcribe(self, key: str, item: MediaItem) -> tuple[str | None, str | None]:
        """The audio's transcript, or why there is none (recorded with the fetch: a re-run of
        the turn reads it; a process killed meanwhile recorded nothing and transcribes again)."""
        data = await self._store.read_blob(item.sha)
        if data is None:
            return None, "the file is no longer stored"
        try:
            words = await self._voice.transcribe(data)
            return words[: self.limits.inline_chars], None  # a remote server's answer, bounded
        except NoAudio:
            return None, None if item.kind == "video" else "it has no audio"  # a silent video is fine
        except MediaRefused as exc:
            log.info("voice note %s not transcribed: %s", key, exc)
            return None, str(exc)
        except StoreUnavailable:
            raise
        except Exception as exc:  # the recogniser's failure is this note's, never the turn's
            log.warning("transcribing %s failed: %s: %s", key, type(exc).__name__, exc)
            return None, f"the transcription failed ({type(exc).__name__})"

    async def read_blob(self, sha: str) -> bytes | None:
        """``MediaIntake.read_blob``: a stored file, for a platform that serves downloads itself."""
        return await self._store.read_blob(sha)

    async def open_blob(self, sha: str) -> BlobStream | None:
        """``MediaIntake.open_blob``: a stored file in pieces, for a download the platform serves."""
        return await self._store.open_blob(sha)

    async def signing_key(self, name: str) -> bytes:
        """``MediaIntake.signing_key``: the store's shared secret (a web upload's signing key)."""
        return await self._store.shared_key(name)

    async def take(
        self, chunks: AsyncIterator[bytes], platform: str, name: str, owner: str | None = None
    ) -> MediaItem:
        """``engine.ports.MediaIntake``: a file a platform received itself (a web chat upload),
        bounded and checked like a fetched one, and stored; ``MediaRefused`` says why not (the
        ``owner``'s quota among the reasons)."""
        try:
            limit = await self.quota.limit(owner, self.limits.bytes_for(platform), None)
            return await self._download(chunks, sanitize_name(name), limit)
        except TimeoutError:
            raise MediaRefused(
                f"the upload did not finish within {self.limits.timeout_seconds:.0f} s"
            ) from None

    async def _download(self, chunks: AsyncIterator[bytes], name: str, limit: Limit) -> MediaItem:
        async with asyncio.timeout(self.limits.timeout_seconds):
            try:
                ingested = await limit.ingest(chunks, self._scratch)
            finally:
                closer = getattr(chunks, "aclose", None)  # an async generator's connection, now
                if closer is not None:
                    with contextlib.suppress(Exception):
                        await closer()
        try:
            mime = await bounded(asyncio.to_thread(check, ingested, name, self.limits), self.limits)
            await self._store.put_blob(ingested.sha, ingested.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                await asyncio.to_thread(os.unlink, ingested.path)
            raise
        return MediaItem(ingested.sha, mime, ingested.size, name)

    async def contents(
        self, turn: Iterable[MediaItem], history: Sequence[HistoryEntry]
    ) -> dict[str, MediaContent]:
        """What the agent reads of each item of this turn and of the history, by sha. Only the
        history's latest ``history_files`` files are loaded again; older ones are named only."""
        found: dict[str, MediaContent] = {}
        for item in turn:
            if item.sha not in found:
                found[item.sha] = await self._content(item)
        budget = self.limits.history_files
        for entry in reversed(history):
            for item in entry.media:
                if item.sha in found:
                    continue
                if budget > 0:
                    found[item.sha] = await self._content(item)
                    budget -= 1
                else:
                    found[item.sha] = MediaContent(item, note="sent earlier in this conversation")
        return found

    async def _content(self, item: MediaItem) -> MediaContent:
        kind = item.kind
        if kind == "audio" and self._voice.enabled:
            return MediaContent(item, note="the model does not hear audio; its transcript is in the message")
        if kind == "video" and self._voice.enabled:
            return MediaContent(
                item, note="the model does not see video; its sound's transcript is in the message"
            )
        if kind in ("audio", "video", "other"):
            return MediaContent(item, note=f"{kind} files are not read by the model yet")
        data = await self._store.read_blob(item.sha)
        if data is None:
            days = self.limits.retention_days
            return MediaContent(item, note=expired_note(days) if days else "the file is no longer stored")
        if kind == "image":
            encoded = await asyncio.to_thread(lambda: base64.b64encode(data).decode("ascii"))
            return MediaContent(item, data=data, encoded=encoded)
        limit = self.limits.inline_chars
        if kind == "pdf":
            try:
                text, cut = await bounded(asyncio.to_thread(extract_pdf_text, data, limit), self.limits)
            except MediaRefused as exc:
                return MediaContent(item, note=str(exc))
            except Exception as exc:  # a PDF that opened at ingest but fails to extract
                return MediaContent(item, note=f"its text could not be extracted ({type(exc).__name__})")
        else:
            decoded = data.decode("utf-8", errors="replace")
            text, cut = decoded[:limit], len(decoded) > limit
        note = f"cut at {limit} characters" if cut else None
        return MediaContent(item, text=text, note=note)
