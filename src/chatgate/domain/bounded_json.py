"""JSON from a stranger, parsed within bounds: one short reason for every way it can be bad.

``json.loads`` fails in four different ways on hostile input (``UnicodeDecodeError``,
``JSONDecodeError``, ``ValueError`` for an integer over Python's digit limit, and
``RecursionError`` for deep nesting, which is not a ``ValueError`` and escaped handlers
as a 500 with a traceback). A value that parses but is nested near the interpreter's
limit then breaks the next recursive walk over it (``json.dumps``, a validator). So every
body a client sends is parsed here: the result is at most ``max_depth`` levels deep, or
``BadJson`` says why in a line short enough to log and to answer with.
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any

from chatgate.domain.errors import ChatgateError

MAX_DEPTH = 100
"""Deeper than any real request or webhook (GitHub's and Slack's stay under 10)."""
_MAX_DIGITS = sys.get_int_max_str_digits()


class BadJson(ChatgateError, ValueError):
    """Not usable JSON; ``reason`` is one short line without the input in it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def depth_of(value: Any) -> int:
    """How deeply ``value`` nests lists and objects (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        level += 1
        deepest = max(deepest, level)
        stack.extend((child, level) for child in children)
    return deepest


def parse(raw: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    """``raw`` (UTF-8 if bytes) as JSON; ``BadJson`` when it is not, or nests deeper than ``max_depth``."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadJson(f"not UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(raw)
    except RecursionError:
        raise BadJson(f"nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as exc:
        raise BadJson(f"not JSON: {exc.msg} at {exc.pos}") from None
    except ValueError:  # Python's guard on int("9" * 5000)
        raise BadJson(f"a number has more than {_MAX_DIGITS} digits") from None
    if depth_of(value) > max_depth:
        raise BadJson(f"nested deeper than {max_depth} levels")
    return value


def digest(value: Any) -> str:
    """The SHA-256 of ``value``'s canonical JSON: equal for equal values, however they were written."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
