"""A forgiving shell lexer: words, operators and redirections, quotes undone.

Used by ``shell_views``; it never fails on unbalanced input, it just stops early.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# ---------------------------------------------------------------- lexing

Token = tuple[str, str]  # ("w", word) | ("o", operator) | ("r", redirection operator)
_OPS = ("&&", "||", ";;", "|&", ";", "&", "|", "\n", "(", ")")
_REDIRS = ("&>>", "&>", ">>", ">|", ">&", "<<<", "<<", "<>", "<&", ">", "<")
_WRITE_REDIRS = frozenset({"&>>", "&>", ">>", ">|", ">&", "<>", ">"})
_ANSI = dict(zip("ntrabeEfv", "\n\t\r\a\b\x1b\x1b\f\v", strict=True))
_IFS = re.compile(r"\$(?:\{IFS[^}]*\}|IFS(?![A-Za-z0-9_]))")
_HEX = re.compile(r"[0-9A-Fa-f]+")
_BRACES = re.compile(r"\{([^{}]*,[^{}]*)\}")
_QUOTES = re.compile(r"[\"'\\]")
_FLATTEN = re.compile(r"[$<>]\(|`")
_COMPACT = re.compile(r"[\s\"'\\]+")


def _find_close(text: str, start: int) -> int:
    """Index of the ``)`` closing a ``$(`` whose body starts at ``start``, or -1."""
    stack = ["("]  # "(" inside parentheses, '"' inside double quotes (where only $( nests)
    i, n = start, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 1
        elif stack[-1] == '"':
            if c == '"':
                stack.pop()
            elif text.startswith("$(", i):
                stack.append("(")
                i += 1
        elif c == "'":
            i = text.find("'", i + 1)
            if i < 0:
                return -1
        elif c in '"(':
            stack.append(c)
        elif c == ")":
            stack.pop()
            if not stack:
                return i
        i += 1
    return -1


class _Lexer:
    """A POSIX-ish word splitter; substitutions are handed to ``substitute`` and inlined."""

    def __init__(self, text: str, substitute: Callable[[str, str], str]) -> None:
        self.text, self.substitute = text, substitute
        self.i, self.ok = 0, True
        self.tokens: list[Token] = []
        self.word: list[str] = []
        self.in_word = False

    def run(self) -> list[Token]:
        text, n = self.text, len(self.text)
        while self.i < n:
            c = text[self.i]
            if c in " \t\r\f\v":
                self._flush()
                self.i += 1
            elif c == "\\":
                if text.startswith("\\\n", self.i):
                    self.i += 2
                    continue
                self._add(text[self.i + 1 : self.i + 2])
                self.i += 2
            elif c == "#" and not self.in_word:
                end = text.find("\n", self.i)
                self.i = n if end < 0 else end
            elif c == "'":
                end = text.find("'", self.i + 1)
                self.ok = self.ok and end >= 0
                end = n if end < 0 else end
                self._add(text[self.i + 1 : end])
                self.i = end + 1
            elif c == '"':
                self._double()
            elif c == "`" or text.startswith(("$(", "<(", ">("), self.i):
                if c in "<>":
                    self._flush()
                self._subst()
            elif text.startswith("$'", self.i):
                self._ansi()
            elif c == "$" and (m := _IFS.match(text, self.i)):
                self._flush()
                self.i = m.end()
            elif c in "<>" or text.startswith("&>", self.i):
                self._redirect()
            elif c in ";&|\n()":
                op = next(o for o in _OPS if text.startswith(o, self.i))
                self._flush()
                self.tokens.append(("o", op))
                self.i += len(op)
            else:
                self._add(c)
                self.i += 1
        self._flush()
        return self.tokens

    def _add(self, text: str) -> None:
        self.word.append(text)
        self.in_word = True

    def _flush(self) -> None:
        if not self.in_word:
            return
        word = "".join(self.word)
        self.word.clear()
        self.in_word = False
        braces = _BRACES.fullmatch(word)
        parts = [p for p in braces.group(1).split(",") if p] if braces else [word]
        self.tokens.extend(("w", part) for part in parts)

    def _double(self) -> None:
        text, n = self.text, len(self.text)
        self.in_word = True
        i = self.i + 1
        while i < n and text[i] != '"':
            if text[i] == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
                self.word.append("" if text[i + 1] == "\n" else text[i + 1])
                i += 2
            elif text[i] == "`" or text.startswith("$(", i):
                self.i = i
                self._subst()
                i = self.i
            else:
                self.word.append(text[i])
                i += 1
        self.ok = self.ok and i < n
        self.i = i + 1

    def _subst(self) -> None:
        text, i = self.text, self.i
        if text[i] == "`":
            j = i + 1
            while j < len(text) and text[j] != "`":
                j += 2 if text[j] == "\\" else 1
            body, kind = text[i + 1 : j].replace("\\`", "`"), "$"
        else:
            j = _find_close(text, i + 2)
            j = len(text) if j < 0 else j
            body, kind = text[i + 2 : j], text[i]
        self.ok = self.ok and j < len(text)
        self._add(self.substitute(kind, body))
        self.i = j + 1

    def _ansi(self) -> None:
        text, n = self.text, len(self.text)
        i, out = self.i + 2, []
        while i < n and text[i] != "'":
            if text[i] != "\\" or i + 1 >= n:
                out.append(text[i])
                i += 1
                continue
            esc = text[i + 1]
            width = {"x": 2, "u": 4, "U": 8}.get(esc, 0)
            hexa = _HEX.match(text, i + 2, i + 2 + width) if width else None
            if hexa:
                code = int(hexa.group(), 16)
                out.append(chr(code) if code <= 0x10FFFF else "?")
                i = hexa.end()
            elif esc in "01234567":
                digits = re.match(r"[0-7]{1,3}", text[i + 1 : i + 4])
                out.append(chr(int(digits.group() if digits else "0", 8) & 0xFF))
                i += 1 + (len(digits.group()) if digits else 1)
            else:
                out.append(_ANSI.get(esc, esc))
                i += 2
        self.ok = self.ok and i < n
        self._add("".join(out))
        self.i = i + 1

    def _redirect(self) -> None:
        if self.in_word and "".join(self.word).isdigit():
            self.word.clear()  # a file descriptor number, as in 2>err.log
            self.in_word = False
        self._flush()
        op = next(o for o in _REDIRS if self.text.startswith(o, self.i))
        self.tokens.append(("r", op))
        self.i += len(op)


def _no_subst(kind: str, body: str) -> str:
    return f"{kind}()"
