"""Relay frames on the wire: newline-delimited JSON objects in WebSocket text messages.

A message may hold several frames or part of one, so ``FrameSplitter`` reassembles
lines across messages. A line longer than ``MAX_FRAME_BYTES`` is dropped (and the
rest of it skipped up to the next newline) instead of growing the buffer forever.
``parse_frame`` validates one line straight into its typed frame (``frames.Incoming``)
or says why it is not one; ``encode`` writes an outgoing frame.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from pydantic import TypeAdapter, ValidationError

from chatgate.platforms.relay.frames import INTAKE_TYPES, Incoming, Outgoing, describe, read_buffer_id

MAX_FRAME_BYTES = 1024 * 1024
EXCERPT_CHARS = 80
RECORD_EXCERPT_CHARS = 500
"""A refused delivery's excerpt is recorded with it, so it keeps more of the line."""

_INCOMING: TypeAdapter[Incoming] = TypeAdapter(Incoming)
_NOT_PARSED = frozenset({"json_invalid", "string_unicode"})
"""Errors of the fast parser itself (not of a frame's fields): the standard parser has the last word."""


class BadFrame(msgspec.Struct, frozen=True):
    """A line that is not a usable frame, with why (logged and counted by the reader).

    ``frame_type`` is set when the line was a JSON object with a known ``type``; for an
    intake frame (``frames.INTAKE_TYPES``) ``buffer_id`` is its ``bufferId`` if it had a
    usable one, so the refusal can be recorded and acknowledged instead of replayed forever.
    """

    reason: str
    excerpt: str
    frame_type: str | None = None
    buffer_id: str | None = None


class FrameSplitter:
    """Reassembles newline-delimited lines from WebSocket messages."""

    def __init__(self, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self._max = max_bytes
        self._buffer = ""
        self._skipping = False

    def feed(self, chunk: str | bytes) -> list[str | BadFrame]:
        """The complete, non-blank lines (without their newline), or why a piece is not one."""
        if isinstance(chunk, bytes):
            try:
                chunk = chunk.decode("utf-8")
            except UnicodeDecodeError:
                return [BadFrame("binary message is not UTF-8", repr(chunk[:EXCERPT_CHARS]))]
        out: list[str | BadFrame] = []
        *lines, rest = (self._buffer + chunk).split("\n")
        for line in lines:
            if self._skipping:
                self._skipping = False  # the tail of an oversized frame ends here
                continue
            if line.strip():
                out.append(line)
        if len(rest) > self._max:
            out.append(BadFrame(f"frame longer than {self._max} bytes", rest[:EXCERPT_CHARS]))
            rest = ""
            self._skipping = True
        self._buffer = rest
        return out


def parse_frame(line: str, max_bytes: int = MAX_FRAME_BYTES) -> Incoming | BadFrame:
    """One line as its typed frame; never raises on input."""
    if len(line) > max_bytes:
        return BadFrame(f"frame longer than {max_bytes} bytes", line[:EXCERPT_CHARS])
    try:
        return _INCOMING.validate_json(line)
    except ValidationError as exc:
        if exc.errors(include_url=False, include_input=False)[0]["type"] not in _NOT_PARSED:
            return _refused(exc, line, None)
    except RecursionError:
        pass
    # The fast parser is stricter than JSON: it refuses a lone surrogate escape ("\ud800"), which
    # JSON allows (admission refuses it, with a reason, and the frame is acknowledged), and
    # nesting deeper than 200. The standard parser decides what is JSON.
    try:
        raw = json.loads(line)
    except RecursionError:
        return BadFrame("JSON nested too deeply", line[:EXCERPT_CHARS])
    except ValueError as exc:
        return BadFrame(f"not JSON: {exc}", line[:EXCERPT_CHARS])
    try:
        return _INCOMING.validate_python(raw)
    except ValidationError as exc:
        return _refused(exc, line, raw)
    except RecursionError:
        return BadFrame("JSON nested too deeply", line[:EXCERPT_CHARS])


def _refused(exc: ValidationError, line: str, raw: Any) -> BadFrame:
    """Why a JSON line is not a frame; for an intake frame, with what is needed to record it."""
    first = exc.errors(include_url=False)[0]
    if first["type"] in ("dict_type", "model_attributes_type"):
        return BadFrame("frame is not a JSON object", line[:EXCERPT_CHARS])
    if first["type"] == "union_tag_not_found":
        return BadFrame("frame has no string 'type'", line[:EXCERPT_CHARS])
    if first["type"] == "union_tag_invalid":
        kind = first["input"].get("type")
        if not isinstance(kind, str):
            return BadFrame("frame has no string 'type'", line[:EXCERPT_CHARS])
        return BadFrame(f"unknown frame type {kind!r}", line[:EXCERPT_CHARS])
    if not first["loc"]:
        return BadFrame(f"not a frame: {first['msg']}", line[:EXCERPT_CHARS])
    kind = str(first["loc"][0])  # the union's tag: the frame's type
    if kind not in INTAKE_TYPES:
        return BadFrame(describe(exc, kind), line[:EXCERPT_CHARS], kind)
    if raw is None:
        try:
            raw = json.loads(line)
        except (ValueError, RecursionError):  # what the fast parser took and this one refuses
            raw = {}
    buffer_id = read_buffer_id(raw.get("bufferId")) if isinstance(raw, dict) else None
    return BadFrame(describe(exc, kind), line[:RECORD_EXCERPT_CHARS], kind, buffer_id)


def encode(frame: Outgoing) -> str:
    """One frame as its line: compact JSON, non-ASCII kept as is, ``None`` fields left out."""
    return frame.model_dump_json(exclude_none=True) + "\n"
