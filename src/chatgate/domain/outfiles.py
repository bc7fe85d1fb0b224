"""Files the agent sends: what a turn attached, and the outbox rows that carry them.

A file row is a ``final`` row whose target names its blob under ``FILE_KEY`` (sha, name,
MIME type, size); its text is the caption. It goes through the outbox like any reply:
idempotent by its key (``file:<seq>:<n>``), paced, retried, and marked as a possible
repeat after an ambiguous upload. A file the platform cannot take (no uploads, or over
its size limit) becomes a plain row saying so instead, decided when the turn is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from chatgate.domain.media import human_size
from chatgate.domain.outbox import OutboxDraft
from chatgate.domain.source import Source, egress_target

FILE_KEY = "file"
"""Outbox target key of a file row: ``{"sha", "name", "mime", "size"}``."""


class OutFile(msgspec.Struct, frozen=True):
    """One file a turn attached to its reply, already in the blob store."""

    sha: str
    name: str
    mime: str
    size: int
    caption: str = ""

    def as_target(self) -> dict[str, Any]:
        return {"sha": self.sha, "name": self.name, "mime": self.mime, "size": self.size}

    @classmethod
    def from_target(cls, target: Mapping[str, Any], caption: str = "") -> OutFile | None:
        """The file a row's target names, or None for a row without one (or a malformed one)."""
        raw = target.get(FILE_KEY)
        if not isinstance(raw, Mapping):
            return None
        sha, name, mime, size = raw.get("sha"), raw.get("name"), raw.get("mime"), raw.get("size")
        if not (isinstance(sha, str) and isinstance(name, str) and isinstance(mime, str)):
            return None
        if not isinstance(size, int):
            return None
        return cls(sha, name, mime, size, caption)

    @property
    def is_image(self) -> bool:
        return self.mime in ("image/png", "image/jpeg", "image/gif", "image/webp")


def refusal(file: OutFile, platform: str, limit: int) -> str:
    """The line the chat reads instead of a file the platform cannot take."""
    label = f"{file.name} ({human_size(file.size)})"
    if limit <= 0:
        return f"[file {label} could not be sent: this chat does not take files from the gateway]"
    return (
        f"[file {label} could not be sent: it is larger than the {human_size(limit)} "
        f"{platform.capitalize()} takes from a bot]"
    )


def file_drafts(
    source: Source,
    session_key: str,
    seq: int,
    files: list[OutFile],
    reply_to: str | None,
    limit: int,
    route: Mapping[str, str] | None = None,
) -> list[OutboxDraft]:
    """One row per file, after the turn's final; ``limit`` is the platform's largest upload
    (0: it takes none), so a file over it is a refusal row the chat reads instead."""
    drafts = []
    for n, file in enumerate(files):
        target: dict[str, Any] = {**egress_target(source), **(route or {})}
        text = file.caption
        if 0 < file.size <= limit:
            target[FILE_KEY] = file.as_target()
        else:
            text = refusal(file, source.platform, limit)
        drafts.append(
            OutboxDraft(
                idem_key=f"file:{seq}:{n}",
                platform=source.platform,
                chat_id=source.chat_id or "",
                session_key=session_key,
                kind="final",
                text=text,
                in_reply_to=reply_to,
                target=target,
            )
        )
    return drafts
