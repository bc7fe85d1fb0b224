"""Server-sent events as a model endpoint streams them: bytes in, complete events out.

The WHATWG event-stream rules the OpenAI-compatible servers follow: lines end in LF, CRLF or
CR; a blank line ends an event; ``data:`` lines join with LF; ``event:`` names it; a line
starting with ``:`` is a comment (keep-alives); one space after the colon is dropped. When a
read ends in CR and the next begins with LF, that LF is dropped: a CRLF split across two
reads is one line ending, not two. A UTF-8 byte-order mark that opens the stream is dropped
(one split across the first reads is not recognized).

An event larger than ``max_event_bytes`` is refused (``EventTooLarge``): the endpoint is the
operator's, but a server that never ends an event must not grow the buffer without bound.
"""

from __future__ import annotations

from typing import NamedTuple

MAX_EVENT_BYTES = 64 * 1024 * 1024
"""Generous: an image model's chunk carries a whole base64 image in one ``data:`` line."""


class Event(NamedTuple):
    name: str | None
    """The ``event:`` field; None for the default (unnamed) event."""
    data: bytes


class EventTooLarge(ValueError):
    pass


class SseDecoder:
    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._max = max_event_bytes
        self._tail: list[bytes] = []
        """The pieces of a line not yet ended, joined once it ends (a long line comes in many reads)."""
        self._tail_size = 0
        self._data: list[bytes] = []
        self._size = 0
        self._name: str | None = None
        self._after_cr = False
        self._started = False

    def feed(self, chunk: bytes) -> list[Event]:
        """The events ``chunk`` completes, in order."""
        if self._after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the LF of a CRLF the previous read split
        self._after_cr = False
        if not self._started and chunk:
            self._started = True
            chunk = chunk.removeprefix(b"\xef\xbb\xbf")  # one byte-order mark may open a stream
        if not chunk:
            return []
        self._after_cr = chunk.endswith(b"\r")
        if b"\n" not in chunk and b"\r" not in chunk:
            self._keep(chunk)
            return []
        buffer = b"".join((*self._tail, chunk)) if self._tail else chunk
        self._tail, self._tail_size = [], 0
        lines = buffer.splitlines()
        if not buffer.endswith((b"\n", b"\r")):
            self._keep(lines.pop())
        events: list[Event] = []
        for line in lines:
            self._line(line, events)
        return events

    def _keep(self, piece: bytes) -> None:
        self._tail.append(piece)
        self._tail_size += len(piece)
        if self._tail_size + self._size > self._max:
            raise EventTooLarge(f"an event of more than {self._max} bytes")

    def _line(self, line: bytes, events: list[Event]) -> None:
        if not line:
            if self._data:
                events.append(Event(self._name, b"\n".join(self._data)))
            self._data, self._size, self._name = [], 0, None
            return
        if line.startswith(b":"):
            return
        field, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            self._data.append(value)
            self._size += len(value) + 1
            if self._size > self._max:
                raise EventTooLarge(f"an event of more than {self._max} bytes")
        elif field == b"event":
            self._name = value.decode("utf-8", "replace")
