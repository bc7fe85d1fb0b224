"""What the agent reads of a mail: HTML reduced to text, the quoted history and the signature cut.

Mail clients quote the whole thread below (or above) a reply, and every message carries the
sender's signature: passed on, the agent would read each earlier turn again with every new
one, and answer text the person never wrote now. What is cut, in order:

- everything from the first attribution line ("On <date>, <name> wrote:", Outlook's
  "-----Original Message-----" or its "From:" block under a rule) to the end;
- lines quoted with ``>``;
- the signature: from the standard delimiter ``-- `` (RFC 3676) to the end, and a trailing
  "Sent from my ..." line.

If cutting leaves nothing (a person who only quoted), the result is empty, and the decoder
decides what such a mail is (an attachment alone, or nothing to answer).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_BLOCK = frozenset(
    {"p", "div", "br", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "table", "hr"}
)
_SKIP = frozenset({"script", "style", "head", "title"})
MAX_HTML_CHARS = 1_000_000
"""HTML beyond this is not parsed (the message size bound already keeps it near this)."""

_ATTRIBUTION = re.compile(
    r"^\s*(on\b.{0,200}\bwrote:|le\b.{0,200}\ba écrit\s*:|am\b.{0,200}\bschrieb\b.{0,80}:"
    r"|-{2,}\s*original message\s*-{2,}|_{10,})\s*$",
    re.IGNORECASE,
)
_OUTLOOK_FROM = re.compile(r"^\s*\*?from:\*?\s.+$", re.IGNORECASE)
_SENT_FROM = re.compile(r"^\s*sent from my \w[\w\s]{0,40}$", re.IGNORECASE)


class _TextOf(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0
        self._quoted = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self._skipping += 1
        elif tag == "blockquote":
            self._quoted += 1  # a quoted reply in HTML: what someone else wrote
        if tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self._skipping = max(0, self._skipping - 1)
        elif tag == "blockquote":
            self._quoted = max(0, self._quoted - 1)
        if tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping and not self._quoted:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """The readable text of an HTML body: blocks become lines, scripts, styles and quoted
    blockquotes are dropped, entities decoded; whitespace inside a line collapsed."""
    parser = _TextOf()
    parser.feed(html[:MAX_HTML_CHARS])
    parser.close()
    lines = [" ".join(line.split()) for line in "".join(parser.parts).splitlines()]
    return _squeeze_blank(lines)


def _squeeze_blank(lines: list[str]) -> str:
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


def _cut_history(lines: list[str]) -> list[str]:
    for i, line in enumerate(lines):
        if _ATTRIBUTION.match(line):
            return lines[:i]
        # Outlook: "From: Ann <ann@x>" followed by Sent:/Date:/To: lines opens the quoted mail
        if _OUTLOOK_FROM.match(line) and i + 1 < len(lines):
            nxt = lines[i + 1].strip().lower()
            if nxt.startswith(("sent:", "date:", "to:", "*sent:*")):
                return lines[:i]
    return lines


def _cut_signature(lines: list[str]) -> list[str]:
    for i, line in enumerate(lines):
        if line.rstrip("\r") in ("-- ", "--"):
            return lines[:i]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    if lines and _SENT_FROM.match(lines[-1]):
        lines = lines[:-1]
    return lines


def what_they_wrote(text: str) -> str:
    """The new text of a reply: no quoted history, no quoted lines, no signature."""
    lines = text.replace("\r\n", "\n").split("\n")
    kept = _cut_signature(_cut_history(lines))
    kept = [line for line in kept if not line.lstrip().startswith(">")]
    cleaned = _squeeze_blank([line.rstrip() for line in kept])
    return cleaned
