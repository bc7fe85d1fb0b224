"""Split a long reply into parts that each fit a platform's length limit.

``split_text(text, limit, unit)`` returns the parts; ``join_parts(parts)`` gives the text back.

Length is counted by ``measure(text, unit)``: ``"chars"`` counts Python characters (code points),
``"utf16"`` counts UTF-16 code units (a character outside the BMP, e.g. most emoji, counts 2), which
is how Telegram counts its 4096 limit.

Contract of ``split_text`` (``limit >= 16``, else ``ValueError``):

- ``measure(part, unit) <= limit`` for every part, and no part is empty;
- the empty text gives ``[]`` (there is nothing to send); a text that fits gives ``[text]``, unchanged;
- a cut is never made inside an extended grapheme cluster (UAX #29, as implemented by the ``regex``
  module's ``\\X``): emoji ZWJ sequences, flags, skin tones, keycaps, combining marks, Hangul jamo,
  CRLF all stay whole. Python strings hold code points, so a surrogate pair is never cut either;
  the ``utf16`` budget counts both of its units. Last resort, when no grapheme boundary fits the
  budget (the limit less any fence markers; one absurd grapheme, e.g. a letter with 1000
  combining marks), the cut falls between code points;
- the cut prefers, in order: after a paragraph break (a blank line), after a line break, after a
  sentence end (``.``/``!``/``?`` then a space or tab, or ``。！？``), after whitespace, then any
  grapheme boundary. Each is taken as late as the budget allows, and a preferred break is used only
  if the part is then at least half the limit, otherwise the next preference is tried. The
  whitespace at a cut stays at the end of the earlier part (nothing is stripped);
- fenced code blocks (a line of 3+ backticks or tildes, indented by at most 3 spaces, with an
  optional info string such as ``python``; closed by a line with a run at least as long) are
  repaired: when a cut falls inside one, the part gets the closing marker ``"\\n" + run`` (e.g.
  ``"\\n```"``) and the next part starts with the reopening marker ``fence_line + "\\n"`` (e.g.
  ``"```python\\n"``). Both markers count against the limit. (A cut after a line break inside a
  block therefore leaves one empty line before the closing marker: the marker cannot reuse the
  text's own newline and still be removable exactly.) Every part then has balanced fences,
  except that a block the text itself leaves open stays open in the last part. A block is repaired
  only if ``measure(fence_line + "\\n", unit) <= limit // 4`` (so that markers never take more than
  half a part); a longer fence line is split like plain text. A line that opens or closes a fence
  (or merely starts like one) is never cut, unless it alone is longer than the budget.

"Preserves the text" means: ``join_parts(split_text(text, limit, unit)) == text`` for every text.
``join_parts`` concatenates the parts after removing the markers that ``split_text`` added: when a
part other than the last ends with ``"\\n"`` plus a bare fence run (3+ backticks or 3+ tildes and
nothing else on that line), that suffix is a closing marker and is dropped, and so is the first
line (through its ``"\\n"``) of the next part, the reopening marker. This is unambiguous because
``split_text`` never leaves an unrepaired part ending that way: it does not cut a line that starts
like a fence, and in the last-resort case where it must, it checks for exactly this shape. When no
cut falls inside a fenced block (in particular for text without fences), ``"".join(parts) == text``.

Not handled: fences nested in blockquotes or list items (``> ```...``), inline code spans and other
markup (``**bold**`` cut across parts stays cut); indented code blocks need no repair.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

import msgspec

from chatgate.domain.outbound import LengthUnit

MIN_LIMIT = 16

_FENCE_LIKE = re.compile(r" {0,3}(?:```|~~~)")
_OPENING = re.compile(r" {0,3}(`{3,}|~{3,})(.*)", re.DOTALL)
_CLOSING = re.compile(r" {0,3}(`{3,}|~{3,})[ \t\r]*")
_CLOSE_MARKER = re.compile(r"\n(?:`{3,}|~{3,})\Z")
_SENTENCE_END = ".!?"
_CJK_SENTENCE_END = "。！？"
_NO_BREAK_SPACE = "\u00a0\u2007\u202f"


def measure(text: str, unit: LengthUnit) -> int:
    """Length of ``text`` in ``unit``: code points, or UTF-16 code units (non-BMP counts 2)."""
    if unit == "chars":
        return len(text)
    if unit == "utf16":
        return len(text.encode("utf-16-le", "surrogatepass")) // 2
    raise ValueError(f"unknown length unit: {unit!r}")


class _Block(msgspec.Struct, frozen=True):
    """A fenced code block: a cut at ``first <= p <= last`` falls inside it."""

    first: int
    last: int
    reopen: str
    close: str


def _scan_fences(text: str) -> tuple[list[_Block], list[tuple[int, int]]]:
    """The fenced blocks, and the (start, end) of every line that starts like a fence."""
    blocks: list[_Block] = []
    fence_like: list[tuple[int, int]] = []
    opened: tuple[int, str, str] | None = None  # (first interior offset, fence line, run)
    pos = 0
    for line in text.split("\n"):
        end = pos + len(line)
        if _FENCE_LIKE.match(line):
            fence_like.append((pos, end))
            if opened is None:
                m = _OPENING.fullmatch(line)
                if m and not (m[1][0] == "`" and "`" in m[2]):
                    opened = (end + 1, line, m[1])
            else:
                m = _CLOSING.fullmatch(line)
                run = opened[2]
                if m and m[1][0] == run[0] and len(m[1]) >= len(run):
                    blocks.append(_Block(opened[0], pos, opened[1] + "\n", "\n" + run))
                    opened = None
        pos = end + 1
    if opened is not None and opened[0] <= len(text):
        blocks.append(_Block(opened[0], len(text), opened[1] + "\n", "\n" + opened[2]))
    return blocks, fence_like


def _is_paragraph_break(text: str, p: int) -> bool:
    """``text[:p]`` ends with a line break that ends a blank (whitespace-only) line."""
    prev = text.rfind("\n", 0, p - 1)
    return prev >= 0 and not text[prev + 1 : p - 1].strip()


def _unsafe_tail(text: str, start: int, p: int) -> int | None:
    """If ``text[start:p]`` ends like a closing marker, the offset of that marker's newline."""
    nl = text.rfind("\n", start, p)
    if nl < 0 or p - nl - 1 < 3:
        return None
    ch = text[nl + 1]
    if ch in "`~" and text.count(ch, nl + 1, p) == p - nl - 1:
        return nl
    return None


def _fence_layout(
    text: str, limit: int, unit: LengthUnit
) -> tuple[list[_Block], bytearray, list[_Block | None], set[int]]:
    """The code blocks, where a cut is allowed at all (never inside a fence marker line), which
    block each position is in (for blocks small enough to reopen), and the block edges to avoid."""
    n = len(text)
    blocks, fence_like = _scan_fences(text)
    allowed = bytearray(b"\x01") * (n + 1)
    for line_start, line_end in fence_like:
        allowed[line_start + 1 : line_end + 1] = bytes(line_end - line_start)
    block_at: list[_Block | None] = [None] * (n + 1)
    avoid: set[int] = set()
    for block in blocks:
        if measure(block.reopen, unit) <= limit // 4:
            block_at[block.first : block.last + 1] = [block] * (block.last + 1 - block.first)
            avoid.update((block.first, block.last))
    return blocks, allowed, block_at, avoid


@functools.cache
def _grapheme() -> Any:
    """UAX #29's clusters, from ``regex`` (re has no ``\\X``): imported at the first split, not at
    start, as most replies fit in one message."""
    import regex

    return regex.compile(r"\X")


def _break_points(
    text: str, allowed: bytearray, avoid: set[int]
) -> tuple[list[Sequence[int]], list[Sequence[int]]]:
    """Where a part may end, best first: paragraph, line, sentence, space; then the fallbacks
    (anywhere outside a fence marker, anywhere allowed, any grapheme, any code point)."""
    graphemes = [m.end() for m in _grapheme().finditer(text)][:-1]
    paragraph: list[int] = []
    line: list[int] = []
    sentence: list[int] = []
    space: list[int] = []
    anywhere: list[int] = []
    allowed_any: list[int] = []
    for p in graphemes:
        if not allowed[p]:
            continue
        allowed_any.append(p)
        if p in avoid:
            continue
        anywhere.append(p)
        prev = text[p - 1]
        if prev == "\n":
            line.append(p)
            if _is_paragraph_break(text, p):
                paragraph.append(p)
        if (prev in " \t" and p >= 2 and text[p - 2] in _SENTENCE_END) or prev in _CJK_SENTENCE_END:
            sentence.append(p)
        if prev.isspace() and prev not in _NO_BREAK_SPACE:
            space.append(p)
    preferred: list[Sequence[int]] = [paragraph, line, sentence, space]
    fallback: list[Sequence[int]] = [anywhere, allowed_any, graphemes, range(len(text) + 1)]
    return preferred, fallback


def split_text(text: str, limit: int, unit: LengthUnit = "chars") -> list[str]:
    """Split ``text`` into parts of at most ``limit`` (in ``unit``); see the module docstring."""
    if limit < MIN_LIMIT:
        raise ValueError(f"limit must be at least {MIN_LIMIT}, got {limit}")
    total = measure(text, unit)
    if not text:
        return []
    if total <= limit:
        return [text]
    n = len(text)
    cum: Sequence[int]
    if unit == "chars":
        cum = range(n + 1)
    else:
        cum = list(accumulate((2 if ord(c) > 0xFFFF else 1 for c in text), initial=0))

    blocks, allowed, block_at, avoid = _fence_layout(text, limit, unit)

    preferred, fallback = _break_points(text, allowed, avoid)
    close_cost = {id(b): measure(b.close, unit) for b in blocks}
    reopen_cost = {id(b): measure(b.reopen, unit) for b in blocks}

    def choose(start: int, head: int) -> int:
        """The cut for a part that starts at ``start`` and carries ``head`` units of marker."""
        top = bisect.bisect_right(cum, cum[start] + limit - head) - 1
        for rank, candidates in enumerate(preferred + fallback):
            i = bisect.bisect_right(candidates, top) - 1
            while i >= 0 and candidates[i] > start:
                p = candidates[i]
                block = block_at[p]
                size = head + cum[p] - cum[start] + (close_cost[id(block)] if block else 0)
                if size > limit:
                    i -= 1
                    continue
                if block is None and (nl := _unsafe_tail(text, start, p)) is not None:
                    i = bisect.bisect_right(candidates, nl + 3) - 1
                    continue
                if rank < len(preferred) and 2 * size < limit:
                    break
                return p
        raise AssertionError("unreachable: one code point always fits")  # pragma: no cover

    parts: list[str] = []
    start = 0
    reopen = ""
    head = 0
    while head + cum[n] - cum[start] > limit:
        p = choose(start, head)
        cut_in = block_at[p]
        parts.append(reopen + text[start:p] + (cut_in.close if cut_in else ""))
        reopen = cut_in.reopen if cut_in else ""
        head = reopen_cost[id(cut_in)] if cut_in else 0
        start = p
    parts.append(reopen + text[start:])
    return parts


def join_parts(parts: Sequence[str]) -> str:
    """The text that ``split_text`` split into ``parts``: the parts without the fence markers it added."""
    out: list[str] = []
    reopened = False
    last = len(parts) - 1
    for i, part in enumerate(parts):
        if reopened:
            part = part[part.index("\n") + 1 :]
        reopened = False
        if i < last and (m := _CLOSE_MARKER.search(part)):
            part = part[: m.start()]
            reopened = True
        out.append(part)
    return "".join(out)
