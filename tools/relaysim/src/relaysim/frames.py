"""Newline-delimited JSON frames over WebSocket text messages.

A message may hold several frames or part of one, so lines are split with a
carry-over buffer. A line that is not a JSON object is reported and skipped;
it never ends the connection.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MAX_LINE = 4 * 1024 * 1024


def encode(frame: dict[str, Any]) -> str:
    return json.dumps(frame, ensure_ascii=False, separators=(",", ":")) + "\n"


@dataclass(frozen=True)
class BadLine:
    """A line that could not be used, with the reason to log."""

    reason: str
    excerpt: str


class LineDecoder:
    """Feed text messages in, get complete frames (or ``BadLine``s) out, in order."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self._carry = ""
        self._max_line = max_line
        self._discarding = False  # inside an oversized line: drop until its newline

    def feed(self, text: str) -> Iterator[dict[str, Any] | BadLine]:
        data = self._carry + text
        *lines, self._carry = data.split("\n")
        for line in lines:
            if self._discarding:
                self._discarding = False
                continue
            item = _parse(line)
            if item is not None:
                yield item
        if len(self._carry) > self._max_line:
            if not self._discarding:
                yield BadLine(f"line longer than {self._max_line} characters", self._carry[:80])
            self._carry = ""
            self._discarding = True


def _parse(line: str) -> dict[str, Any] | BadLine | None:
    stripped = line.strip()
    if not stripped:
        return None
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError as exc:
        return BadLine(f"not JSON ({exc.msg} at column {exc.colno})", stripped[:80])
    except (ValueError, RecursionError) as exc:
        return BadLine(f"not usable JSON ({type(exc).__name__})", stripped[:80])
    if not isinstance(value, dict):
        return BadLine(f"a frame must be a JSON object, not {type(value).__name__}", stripped[:80])
    if not isinstance(value.get("type"), str):
        return BadLine("a frame needs a string 'type'", stripped[:80])
    return value


def parse_buffer_id(value: Any) -> int | None:
    """A ``bufferId`` as the simulator issued it (a decimal string); None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
        return int(value)
    return None
