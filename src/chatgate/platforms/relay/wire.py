"""Relay frames on the wire: newline-delimited JSON objects in WebSocket text messages.

A message may hold several frames or part of one, so lines are reassembled
across messages. A line longer than ``MAX_FRAME_BYTES`` is dropped (and the rest
of it skipped up to the next newline) instead of growing the buffer forever.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from chatgate.domain.outbound import Capabilities

MAX_FRAME_BYTES = 1024 * 1024
CONTRACT_VERSION = 1
LEGACY_OPS = frozenset({"send", "edit", "typing", "follow_up"})


@dataclass(frozen=True, slots=True)
class BadFrame:
    """A line that is not a usable frame, with why (logged and counted by the reader)."""

    reason: str
    excerpt: str


class FrameSplitter:
    """Reassembles newline-delimited frames from WebSocket messages."""

    def __init__(self, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self._max = max_bytes
        self._buffer = ""
        self._skipping = False

    def feed(self, chunk: str | bytes) -> list[dict[str, Any] | BadFrame]:
        if isinstance(chunk, bytes):
            try:
                chunk = chunk.decode("utf-8")
            except UnicodeDecodeError:
                return [BadFrame("binary message is not UTF-8", repr(chunk[:80]))]
        out: list[dict[str, Any] | BadFrame] = []
        *lines, rest = (self._buffer + chunk).split("\n")
        for line in lines:
            if self._skipping:
                self._skipping = False  # the tail of an oversized frame ends here
                continue
            if line.strip():
                out.append(parse_line(line, self._max))
        if len(rest) > self._max:
            out.append(BadFrame(f"frame longer than {self._max} bytes", rest[:80]))
            rest = ""
            self._skipping = True
        self._buffer = rest
        return out


def parse_line(line: str, max_bytes: int = MAX_FRAME_BYTES) -> dict[str, Any] | BadFrame:
    if len(line) > max_bytes:
        return BadFrame(f"frame longer than {max_bytes} bytes", line[:80])
    try:
        frame = json.loads(line)
    except ValueError as exc:
        return BadFrame(f"not JSON: {exc}", line[:80])
    except RecursionError:
        return BadFrame("JSON nested too deeply", line[:80])
    if not isinstance(frame, dict):
        return BadFrame("frame is not a JSON object", line[:80])
    if not isinstance(frame.get("type"), str):
        return BadFrame("frame has no string 'type'", line[:80])
    return frame


def encode(frame: dict[str, Any]) -> str:
    return json.dumps(frame, ensure_ascii=False, separators=(",", ":")) + "\n"


class Descriptor(BaseModel):
    """A fronted platform's capabilities; unknown fields are ignored (forward compatible)."""

    model_config = ConfigDict(extra="ignore")

    contract_version: int = CONTRACT_VERSION
    platform: str
    label: str = ""
    max_message_length: int = Field(0, ge=0)
    supports_draft_streaming: bool = False
    supports_edit: bool = False
    supports_threads: bool = False
    markdown_dialect: str = "plain"
    len_unit: Literal["chars", "utf16"] = "chars"
    supported_ops: list[str] | None = None

    @field_validator("platform")
    @classmethod
    def _platform_name(cls, value: str) -> str:
        name = value.strip().lower()
        if not name:
            raise ValueError("platform must not be empty")
        return name

    def supports(self, op: str) -> bool:
        """An op beyond the legacy set is used only when advertised."""
        if self.supported_ops:
            return op in self.supported_ops
        return op in LEGACY_OPS

    def capabilities(self) -> Capabilities:
        return Capabilities(
            edit=self.supports_edit and self.supports("edit"),
            drafts=False,
            buttons=self.supports("prompt"),
            threads=self.supports_threads,
            max_length=self.max_message_length or 4096,
            length_unit=self.len_unit,
            markdown=self.markdown_dialect,
            typing=self.supports("typing"),
            edit_interval=1.0,
        )


def parse_descriptor(frame: dict[str, Any]) -> Descriptor | BadFrame:
    raw = frame.get("descriptor")
    if not isinstance(raw, dict):
        return BadFrame("descriptor frame without a 'descriptor' object", str(raw)[:80])
    try:
        return Descriptor.model_validate(raw)
    except ValidationError as exc:
        return BadFrame(f"invalid descriptor: {exc.errors()[0]['msg']}", json.dumps(raw)[:80])
