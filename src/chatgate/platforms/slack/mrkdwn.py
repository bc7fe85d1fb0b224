"""The agent's Markdown as Slack mrkdwn (for ``text`` of chat.postMessage / chat.update).

Slack's mrkdwn is not Markdown: bold is ``*b*``, italic ``_i_``, strike ``~s~``, links
``<url|label>``, no headings, and ``&``, ``<`` and ``>`` must be escaped (they start
entities and links). So:

- fenced code blocks keep their body (escaped) and lose the language tag, which Slack
  would show as text; a block left open runs to the end;
- code spans stay as they are (escaped);
- ``**b**`` / ``__b__`` become ``*b*``, ``*i*`` / ``_i_`` become ``_i_``, ``~~s~~``
  becomes ``~s~``; an opener must touch a word (``2 * 3`` stays literal);
- ``[label](url)`` becomes ``<url|label>`` for http(s) and mailto URLs, and stays literal
  text otherwise; a heading line becomes a bold line; ``-``/``*`` bullets become ``•``;
- a ``>`` that starts a line (a quote) is kept, every other one is escaped.

Slack counts its limit on the text as sent, and the escapes make it longer than the
Markdown: the adapter's ``max_length`` leaves room for that.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"\[([^\[\]\n]+)\]\(([^()\s]+)\)")
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$")
_BULLET = re.compile(r"^(\s*)[-*+][ \t]+")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC_STAR = re.compile(r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_SAFE_SCHEMES = ("http://", "https://", "mailto:")
_BOLD_MARK = "\x00"


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def markdown_to_mrkdwn(markdown: str) -> str:
    out: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        opened = _FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)[0] * 3
            out.append("```")
        elif fence is not None and line.strip().startswith(fence):
            fence = None
            out.append("```")
        elif fence is not None:
            out.append(escape(line))
        else:
            out.append(_line(line))
    if fence is not None:
        out.append("```")
    return "\n".join(out)


def _line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading:
        return f"*{_inline(heading.group(1)).strip('*')}*"
    quote = ""
    if line.startswith(">"):
        quote, line = ">", line[1:]
    bullet = _BULLET.match(line)
    if bullet:
        line = f"{bullet.group(1)}• {line[bullet.end() :]}"
    return quote + _inline(line)


def _inline(text: str) -> str:
    parts: list[str] = []
    at = 0
    for span in _CODE_SPAN.finditer(text):
        parts.append(_styled(text[at : span.start()]))
        parts.append(f"`{escape(span.group(2))}`")
        at = span.end()
    parts.append(_styled(text[at:]))
    return "".join(parts)


def _styled(text: str) -> str:
    links: list[str] = []

    def link(match: re.Match[str]) -> str:
        label, url = match.group(1), match.group(2)
        if not url.startswith(_SAFE_SCHEMES):
            return match.group(0)
        links.append(f"<{escape(url).replace('|', '%7C')}|{escape(label)}>")
        return f"\x01{len(links) - 1}\x01"

    text = escape(_LINK.sub(link, text.replace(_BOLD_MARK, "").replace("\x01", "")))
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group(2)}{_BOLD_MARK}", text)
    text = _ITALIC_STAR.sub(lambda m: f"_{m.group(1)}_", text)
    text = _STRIKE.sub(lambda m: f"~{m.group(1)}~", text)
    text = text.replace(_BOLD_MARK, "*")
    return re.sub("\x01(\\d+)\x01", lambda m: links[int(m.group(1))], text)
