"""The agent's Markdown as Telegram HTML, well-formed by construction.

Telegram's HTML mode accepts a handful of tags and the entities ``&lt;``, ``&gt;``,
``&amp;`` and ``&quot;``; anything else makes it refuse the whole message ("can't
parse entities"). So every character of the input is either escaped or consumed
by a construct whose tags are emitted as a matched pair:

- fenced code blocks (three or more backticks or tildes) become
  ``<pre><code class="language-x">``; a block left open runs to the end;
- ```code``` spans become ``<code>``;
- ``**bold**`` / ``__bold__`` become ``<b>``, ``*italic*`` / ``_italic_`` ``<i>``,
  ``~~strike~~`` ``<s>``; an opener needs a closer in the same line block, so a
  stray ``*`` (a list bullet, ``2 * 3``) or an intraword ``_`` (``snake_case``)
  stays literal;
- ``[text](url)`` becomes a link for http(s), mailto and tg URLs, literal text
  otherwise;
- a Markdown heading line (``# Title``) becomes bold.

Emphasis is matched innermost-first within the span of its opener and closer,
so tags always nest. Telegram counts its 4096 limit on the text *after* parsing,
which is never longer than the Markdown it came from.
"""

from __future__ import annotations

import bisect
import html
import re

import msgspec

_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*([^`\s]*)[^`\n]*$")
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$")
_LINK = re.compile(r"\[([^\[\]\n]+)\]\(([^()\s]+)\)")
_SAFE_SCHEMES = ("http://", "https://", "mailto:", "tg://")
_LANG = re.compile(r"[A-Za-z0-9_+#.-]{1,32}")
_DELIMS: tuple[tuple[str, str], ...] = (("**", "b"), ("__", "b"), ("~~", "s"), ("*", "i"), ("_", "i"))
_EMPHASIS = re.compile("[" + re.escape("".join(sorted({d[0] for d, _ in _DELIMS}))) + "]")
"""The characters an emphasis delimiter starts with: between two of them (and atoms) is plain text."""


def escape(text: str) -> str:
    return html.escape(text, quote=False)


def _run_end(s: str, i: int) -> int:
    """The end of the run of backticks that starts at ``i``."""
    j = i
    while j < len(s) and s[j] == "`":
        j += 1
    return j


def markdown_to_html(text: str) -> str:
    """Render ``text`` (the agent's Markdown) as Telegram HTML."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        opened = _FENCE_OPEN.match(lines[i])
        if opened is None:
            out.append(_render_line(lines[i]))
            i += 1
            continue
        run, lang = opened.group(1), opened.group(2)
        closer = re.compile(rf" {{0,3}}{re.escape(run[0])}{{{len(run)},}}[ \t]*")
        end = next((j for j in range(i + 1, len(lines)) if closer.fullmatch(lines[j])), len(lines))
        out.append(_pre("\n".join(lines[i + 1 : end]), lang))
        i = end + 1  # past the closing fence (a block left open runs to the end)
    return "\n".join(out)


def _pre(body: str, lang: str) -> str:
    if lang and _LANG.fullmatch(lang):
        return f'<pre><code class="language-{escape(lang)}">{escape(body)}</code></pre>'
    return f"<pre>{escape(body)}</pre>"


def _render_line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading is not None:
        return f"<b>{_Inline(heading.group(1)).render()}</b>"
    return _Inline(line).render() if line else ""


class _Atom(msgspec.Struct, frozen=True):
    end: int
    html: str


class _Inline:
    """Inline Markdown of one line: code spans and links are atoms, emphasis nests."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.atoms: dict[int, _Atom] = {}
        self._find_code_spans()
        self._find_links()
        self._starts = sorted(self.atoms)
        self.closers = {d: self._closer_positions(d) for d, _ in _DELIMS}

    def _covered(self, pos: int) -> bool:
        idx = bisect.bisect_right(self._starts, pos) - 1
        return idx >= 0 and pos < self.atoms[self._starts[idx]].end

    def _find_code_spans(self) -> None:
        s = self.text
        i = s.find("`")
        while i >= 0:
            j = _run_end(s, i)
            run = j - i
            close = None
            k = s.find("`", j)
            while k >= 0:
                m = _run_end(s, k)
                if m - k == run:
                    close = k
                    break
                k = s.find("`", m)
            if close is not None and s[j:close].strip():
                self.atoms[i] = _Atom(close + run, f"<code>{escape(s[j:close])}</code>")
                i = s.find("`", close + run)
            else:
                i = s.find("`", j)  # an unmatched run of backticks is literal text

    def _find_links(self) -> None:
        spans = list(self.atoms.items())
        for match in _LINK.finditer(self.text):
            start, end = match.span()
            if any(a < end and atom.end > start for a, atom in spans):
                continue  # overlaps a code span: the code wins
            label, url = match.group(1), match.group(2)
            if url.lower().startswith(_SAFE_SCHEMES):
                inner = _Inline(label).render()
                self.atoms[start] = _Atom(end, f'<a href="{html.escape(url, quote=True)}">{inner}</a>')

    def _closer_positions(self, delim: str) -> list[int]:
        s, n = self.text, len(delim)
        found = []
        start = 0
        while (pos := s.find(delim, start)) >= 0:
            start = pos + 1
            if self._covered(pos) or self._covered(pos + n - 1) or pos == 0 or s[pos - 1].isspace():
                continue
            if n == 1 and (s[pos - 1] == delim or (pos + 1 < len(s) and s[pos + 1] == delim)):
                continue
            if delim[0] == "_" and pos + n < len(s) and s[pos + n].isalnum():
                continue
            found.append(pos)
        return found

    def _plain_until(self, i: int, end: int) -> int:
        """The first position from ``i`` where a construct may start (an emphasis delimiter's
        character or an atom), or ``end`` if none does before it. The run before it is escaped
        at once, not a character at a time. The search stops at the next atom: searching past
        it would read the rest of the line again at every atom of a line full of code spans."""
        idx = bisect.bisect_left(self._starts, i)
        if idx < len(self._starts) and self._starts[idx] < end:
            end = self._starts[idx]
        found = _EMPHASIS.search(self.text, i, end)
        return found.start() if found is not None else end

    def _can_open(self, delim: str, pos: int) -> bool:
        s, n = self.text, len(delim)
        nxt = pos + n
        if nxt >= len(s) or s[nxt].isspace():
            return False
        if n == 1 and (s[nxt] == delim or (pos > 0 and s[pos - 1] == delim)):
            return False
        return not (delim[0] == "_" and pos > 0 and s[pos - 1].isalnum())

    def _closer(self, delim: str, start: int, end: int) -> int | None:
        positions = self.closers[delim]
        idx = bisect.bisect_left(positions, start)
        if idx < len(positions) and positions[idx] + len(delim) <= end:
            return positions[idx]
        return None

    def render(self) -> str:
        return self._render(0, len(self.text))

    def _render(self, i: int, end: int) -> str:
        s = self.text
        out: list[str] = []
        while i < end:
            plain = self._plain_until(i, end)
            if plain > i:  # no construct starts in s[i:plain]: escaped as one run
                out.append(escape(s[i:plain]))
                i = plain
                continue
            atom = self.atoms.get(i)
            if atom is not None and atom.end <= end:
                out.append(atom.html)
                i = atom.end
                continue
            for delim, tag in _DELIMS:
                if s.startswith(delim, i) and self._can_open(delim, i):
                    close = self._closer(delim, i + len(delim) + 1, end)
                    if close is not None:
                        inner = self._render(i + len(delim), close)
                        out.append(f"<{tag}>{inner}</{tag}>")
                        i = close + len(delim)
                        break
            else:
                out.append(escape(s[i]))
                i += 1
        return "".join(out)
