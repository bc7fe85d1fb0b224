"""What a fetched attachment is, and the rules every lane applies to one (no I/O here).

An attachment arrives as a reference (``Inbound.attachments``); the fetch step turns it into a
``MediaItem``: a blob in the content-addressed store (``sha`` is the sha256 of its bytes), with
the MIME type found in its content (never trusted from the name or the platform), its size and a
sanitised display name. A fetch that fails is recorded too, with a reason a person can read, so
a re-run of the turn does not fetch again and the agent and the user are told the same thing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, Literal, Protocol

import msgspec

from chatgate.domain.voice import VoiceSettings

MediaClass = Literal["image", "pdf", "text", "audio", "video", "other"]

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
DEFAULT_MAX_PIXELS = 40_000_000
"""Pixels an image may decode to (a 20 MB PNG can claim 100 000 x 100 000: a decompression bomb)."""
DEFAULT_INLINE_CHARS = 20_000
"""Characters of a text document or a PDF's text the model reads in one message."""
DEFAULT_HISTORY_FILES = 8
DEFAULT_RETENTION_DAYS = 90.0
"""Files are kept a season: long enough for a conversation to come back to them, not forever."""
DEFAULT_QUOTA_MB = 500.0
"""Per user, at once: 25 files at the 20 MB limit; a stranger cannot fill the disk alone."""
NAME_MAX = 120


class MediaRefused(Exception):
    """An attachment the gateway will not take, with the reason the user and the agent read."""


class MediaLimits(msgspec.Struct, frozen=True):
    """The operator's bounds on what a turn fetches (``media`` in the config)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    platform_max_bytes: dict[str, int] = msgspec.field(default_factory=dict)
    max_pixels: int = DEFAULT_MAX_PIXELS
    inline_chars: int = DEFAULT_INLINE_CHARS
    timeout_seconds: float = 60.0
    history_files: int = DEFAULT_HISTORY_FILES
    """The history's latest files sent to the model again each turn; older ones are named only."""
    voice: VoiceSettings = msgspec.field(default_factory=VoiceSettings)
    """How audio files (voice notes) are transcribed (``domain/voice.py``)."""
    retention_days: float = 0.0
    """Records and blobs older than this are removed (``engine/media_retention.py``); 0 keeps them."""
    quota_bytes_per_user: int = 0
    """The bytes of files one user may have stored (counted from the records); 0: no quota."""

    def bytes_for(self, platform: str) -> int:
        """A platform's own limit, never above the overall one."""
        return min(self.platform_max_bytes.get(platform, self.max_bytes), self.max_bytes)


class MediaItem(msgspec.Struct, frozen=True):
    """A stored attachment: its blob's sha256, what its content is, its size and display name."""

    sha: str
    mime: str
    size: int
    name: str

    @property
    def kind(self) -> MediaClass:
        return classify(self.mime)

    def to_dict(self) -> dict[str, Any]:
        return {"sha": self.sha, "mime": self.mime, "size": self.size, "name": self.name}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MediaItem:
        return cls(str(data["sha"]), str(data["mime"]), int(data["size"]), str(data["name"]))

    def label(self) -> str:
        """``photo.png (image/png, 1.2 kB)``: how the echo agent and the notes name it."""
        return f"{self.name} ({self.mime}, {human_size(self.size)})"


class MediaRecord(msgspec.Struct, frozen=True):
    """The outcome of one attachment's fetch: the item, or why there is none (``error``).

    ``key`` names the attachment: ``<inbox seq>:<index in the message>``."""

    key: str
    item: MediaItem | None
    error: str | None = None
    name: str = ""
    """The attachment's display name (sanitised), also when the fetch failed."""
    transcript: str | None = None
    """A voice note's or an audio file's words (``media.voice``), kept so a re-run does not
    transcribe again."""
    transcript_error: str | None = None
    """Why an audio file that was stored could not be transcribed (too long, corrupt...)."""
    owner: str | None = None
    """Whose file it is (``<platform>:<user id>``): a user's quota counts the sizes of their records."""


class BlobPieces(Protocol):
    """A blob's pieces as they are read; ``aclose`` lets go of what the reading holds (a file, a
    query) whether the reading finished, stopped early or never began."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    def __anext__(self) -> Awaitable[bytes]: ...

    async def aclose(self) -> None: ...


class BlobStream(msgspec.Struct, frozen=True):
    """A stored blob read piece by piece (about 1 MB each), never whole in memory: a download
    served or an upload made from it holds one piece at a time."""

    size: int
    chunks: BlobPieces


class BlobGone(Exception):
    """A stored file was removed (retention, a sweep) between delivery finding it and reading it."""


class FileBody:
    """A stored file an upload sends, read from the blob store piece by piece as the request is
    written: an upload holds one piece (about 1 MB) at a time, never the whole file.

    Each ``pieces()`` call reads the blob afresh, so an upload that must be sent again in the same
    attempt (Telegram's photo refused and sent as a document) reads it again. The first stream is
    the one delivery opened to find the blob; ``close()`` releases it if no upload read it.
    """

    def __init__(self, first: BlobStream, reopen: Callable[[], Awaitable[BlobStream | None]]) -> None:
        self.size = first.size
        self._first: BlobStream | None = first
        self._reopen = reopen

    async def pieces(self) -> AsyncIterator[bytes]:
        stream, self._first = self._first, None
        if stream is None:
            stream = await self._reopen()
            if stream is None:
                raise BlobGone("the file was removed from the store while it was sent")
        async with aclosing(stream.chunks) as chunks:
            async for piece in chunks:
                yield piece

    async def read(self) -> bytes:
        """The whole file, for a request that must hold it whole (a MIME message)."""
        return b"".join([piece async for piece in self.pieces()])

    async def close(self) -> None:
        stream, self._first = self._first, None
        if stream is not None:
            await stream.chunks.aclose()


class MediaContent(msgspec.Struct, frozen=True):
    """An item as the agent gets it: the bytes of an image, the text of a document, or a note."""

    item: MediaItem
    data: bytes | None = None
    text: str | None = None
    note: str | None = None
    encoded: str | None = None
    """An image's bytes in base64, made off the event loop (a 10 MB image takes a while)."""


def media_key(seq: int, index: int) -> str:
    return f"{seq}:{index}"


def human_size(size: int) -> str:
    """``1.2 kB``: decimal units, as people read a file size."""
    if size < 1000:
        return f"{size} B"
    value = float(size)
    for unit in ("kB", "MB"):
        value /= 1000
        if value < 1000:
            return f"{value:.1f} {unit}"
    return f"{value / 1000:.1f} GB"


_UNSAFE = re.compile(r"[^\w.\- ()+,@]+")


def sanitize_name(name: str | None, fallback: str = "file") -> str:
    """A display name that can never be a path: no directories, no control characters, no
    leading dots, at most ``NAME_MAX`` characters. It is shown and sent to the model only;
    blobs are stored by sha, so a name never reaches the file system."""
    text = unicodedata.normalize("NFKC", name or "")
    text = text.replace("\\", "/").rsplit("/", 1)[-1]
    text = "".join(c for c in text if unicodedata.category(c)[0] != "C")
    text = _UNSAFE.sub("_", text).strip(" ._")
    if len(text) > NAME_MAX:
        stem, dot, ext = text.rpartition(".")
        text = (stem[: NAME_MAX - len(ext) - 1] + dot + ext) if dot and len(ext) <= 10 else text[:NAME_MAX]
    return text or fallback


_MAGIC: tuple[tuple[int, bytes, str], ...] = (
    (0, b"\x89PNG\r\n\x1a\n", "image/png"),
    (0, b"\xff\xd8\xff", "image/jpeg"),
    (0, b"GIF87a", "image/gif"),
    (0, b"GIF89a", "image/gif"),
    (0, b"%PDF-", "application/pdf"),
    (0, b"OggS", "audio/ogg"),
    (0, b"ID3", "audio/mpeg"),
    (0, b"fLaC", "audio/flac"),
    (0, b"\x1a\x45\xdf\xa3", "video/webm"),
    (0, b"PK\x03\x04", "application/zip"),
    (0, b"\x1f\x8b", "application/gzip"),
    (0, b"BM", "image/bmp"),
)
"""Leading bytes of the formats people send a chat; the few with a container are below."""


def sniff(head: bytes) -> str:
    """The MIME type the content says it is (from its first bytes, at least 512 of them when
    there are that many); ``text/plain`` for valid UTF-8 text, else ``application/octet-stream``."""
    for offset, magic, mime in _MAGIC:
        if head[offset : offset + len(magic)] == magic:
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "audio/wav"
    if head[4:8] == b"ftyp":
        return "audio/mp4" if head[8:11] == b"M4A" else "video/mp4"
    if head[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        return "audio/mpeg"
    if _is_text(head):
        return "image/svg+xml" if _looks_like_svg(head) else "text/plain"
    return "application/octet-stream"


def _is_text(head: bytes) -> bool:
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3  # a character cut at the end of the sample
    return True


def _looks_like_svg(head: bytes) -> bool:
    lowered = head[:4096].lower()
    return b"<svg" in lowered or (b"<?xml" in lowered and b"svg" in lowered)


_TEXT_SUFFIXES = {
    "txt": "text/plain", "md": "text/markdown", "markdown": "text/markdown", "csv": "text/csv",
    "json": "application/json", "yaml": "text/yaml", "yml": "text/yaml", "toml": "text/plain",
    "xml": "text/xml", "html": "text/plain", "log": "text/plain", "ini": "text/plain",
}  # fmt: skip


def refine_text(mime: str, name: str) -> str:
    """A text file's type by its suffix, once the content proved it text (the name only narrows
    ``text/plain``; it never turns bytes into text). HTML is kept plain: it is never rendered."""
    if mime != "text/plain":
        return mime
    suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return _TEXT_SUFFIXES.get(suffix, "text/plain")


def classify(mime: str) -> MediaClass:
    if mime == "image/svg+xml":
        return "other"  # never an image: it can carry script
    if mime.startswith("image/"):
        return "image"
    if mime == "application/pdf":
        return "pdf"
    if mime.startswith("text/") or mime == "application/json":
        return "text"
    if mime.startswith("audio/"):
        return "audio"
    if mime.startswith("video/"):
        return "video"
    return "other"


def refused_note(name: str, reason: str) -> str:
    """The line the agent reads and the user sees for an attachment that did not come through."""
    return f"[attachment {name} was not received: {reason}]"


def with_attachments(text: str, items: tuple[MediaItem, ...], notes: tuple[str, ...]) -> str:
    """A message's text as the model reads it: each attached file named on a line of its own
    (its content goes alongside, ``agents/media_parts.py``), and a note for each that failed."""
    lines = [text] if text else []
    lines += [f"[attached: {item.label()}]" for item in items]
    lines += list(notes)
    return "\n".join(lines)
