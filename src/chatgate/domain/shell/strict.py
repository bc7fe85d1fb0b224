"""A strict shell lexer: the small subset of ``sh`` whose meaning can be read off the text.

``shell_lex`` is forgiving (it feeds the danger rules, which must see through tricks);
this one is the opposite: it accepts only words made of literal text, quotes, escapes
and plain ``$name`` references, the operators ``;``, ``&&``, ``||``, ``|``, newline, and
the simple redirections, and refuses everything else with a reason a person can read
("cannot tell what `$(…)` runs"). What it accepts means the same in dash and bash.
"""

from __future__ import annotations

import re

import msgspec

from chatgate.domain.errors import ChatgateError

# A word is a tuple of parts: (kind, text); kind "u" unquoted literal, "q" quoted literal,
# "vu" unquoted $name, "vq" quoted "$name".
Part = tuple[str, str]
Word = tuple[Part, ...]


class Tok(msgspec.Struct, frozen=True):
    kind: str  # "w" word, "o" operator, "r" redirection
    word: Word = ()
    op: str = ""
    fd: str = ""  # the file descriptor digits before a redirection ("2" of 2>)


class NotProvable(ChatgateError):
    """The command uses shell syntax this lexer does not analyse; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,+@%^-]}~")
_OPS = ("&&", "||", ";", "|", "\n")
_REFUSED_OPS = {
    ";;": "uses `;;` outside a case statement",
    "|&": "pipes standard error with `|&`",
    "&": "runs something in the background with `&`",
    "(": "opens a subshell or defines a function with `(`",
    ")": "uses `)` outside a subshell",
}
_REDIRS = (">>", ">|", ">&", "<&", ">", "<")
_REFUSED_REDIRS = ("<<<", "<<", "<>", "&>>", "&>", "<(", ">(")
_MAX_SHOWN = 40


def shown(text: str) -> str:
    """A snippet of the command for a reason: bounded, one line."""
    text = text.replace("\n", "\\n")
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


class StrictLexer:
    """One pass over the text; ``run`` returns the tokens or raises ``NotProvable``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.tokens: list[Tok] = []
        self.parts: list[Part] = []
        self.in_word = False

    def run(self) -> list[Tok]:
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c in " \t":
                self._flush()
                self.i += 1
            elif c == "#" and not self.in_word:
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
            elif c == "'":
                self._single()
            elif c == '"':
                self._double()
            elif c == "\\":
                self._escape()
            elif c == "$":
                self._var(quoted=False)
            elif c == "`":
                raise NotProvable("cannot tell what a `…` command substitution runs")
            elif text.startswith(_REFUSED_REDIRS, self.i):
                op = next(o for o in _REFUSED_REDIRS if text.startswith(o, self.i))
                raise NotProvable(f"uses `{op}`, which this check does not analyse")
            elif c in "<>":
                self._redirect()
            elif c in ";&|\n()":
                self._operator()
            else:
                self._literal(c)
        self._flush()
        return self.tokens

    def _add(self, kind: str, text: str) -> None:
        if kind in ("u", "q") and self.parts and self.parts[-1][0] == kind:
            self.parts[-1] = (kind, self.parts[-1][1] + text)
        else:
            self.parts.append((kind, text))
        self.in_word = True

    def _flush(self) -> None:
        if self.in_word:
            self.tokens.append(Tok("w", tuple(self.parts)))
        self.parts = []
        self.in_word = False

    def _literal(self, c: str) -> None:
        if c == "~" and (not self.in_word or self._last_char() in "=:"):
            raise NotProvable("uses `~`, which expands to a home directory")
        if (
            (c == "[" and self._lone_bracket())
            or c in _SAFE
            or (ord(c) > 127 and c.isprintable() and not c.isspace())
        ):
            self._add("u", c)
        elif c in "*?[":
            raise NotProvable(
                f"cannot tell which files the pattern `{shown(self._word_at())}` names (quote it)"
            )
        elif (
            c == "{" and not self.in_word and self.text.startswith("{}", self.i) and self._ends_at(self.i + 2)
        ):
            self._add("u", "{}")
            self.i += 1
        elif c == "{":
            raise NotProvable(f"uses `{{` (a brace group or brace expansion) in `{shown(self._word_at())}`")
        else:
            raise NotProvable(f"uses the character {c!r} unquoted, which this check does not analyse")
        self.i += 1

    def _last_char(self) -> str:
        for kind, text in reversed(self.parts):
            if text:
                return text[-1] if kind == "u" else ""
        return ""

    def _lone_bracket(self) -> bool:
        """``[`` as a whole word is the ``test`` command, not a pattern."""
        return not self.in_word and self._ends_at(self.i + 1)

    def _ends_at(self, i: int) -> bool:
        return self.text[i : i + 1] in ("", " ", "\t", "\n", ";")

    def _word_at(self) -> str:
        start = self.i
        while start > 0 and self.text[start - 1] not in " \t\n;|&":
            start -= 1
        end = self.i
        while end < len(self.text) and self.text[end] not in " \t\n;|&":
            end += 1
        return self.text[start:end]

    def _single(self) -> None:
        end = self.text.find("'", self.i + 1)
        if end < 0:
            raise NotProvable("has an unterminated ' quote")
        self._add("q", self.text[self.i + 1 : end])
        self.i = end + 1

    def _double(self) -> None:
        text, i = self.text, self.i + 1
        self.in_word = True
        while i < len(text) and text[i] != '"':
            c = text[i]
            if c == "\\" and text[i + 1 : i + 2] in ("$", "`", '"', "\\"):
                self._add("q", text[i + 1])
                i += 2
            elif c == "\\" and text[i + 1 : i + 2] == "\n":
                i += 2
            elif c == "$":
                self.i = i
                self._var(quoted=True)
                i = self.i
            elif c == "`":
                raise NotProvable("cannot tell what a `…` command substitution runs")
            else:
                self._add("q", c)
                i += 1
        if i >= len(text):
            raise NotProvable('has an unterminated " quote')
        self.i = i + 1

    def _escape(self) -> None:
        nxt = self.text[self.i + 1 : self.i + 2]
        if nxt == "":
            raise NotProvable("ends with a lone backslash")
        if nxt != "\n":
            self._add("q", nxt)
        self.i += 2

    def _var(self, *, quoted: bool) -> None:
        text, i = self.text, self.i
        braced = text.startswith("${", i)
        m = _NAME.match(text, i + 2 if braced else i + 1)
        end = m.end() if m else i + 1
        if m and braced and text[end : end + 1] == "}":
            end += 1
        elif braced or not m:
            snippet = self._expansion_at(i)
            if snippet.startswith(("$(", "$[")):
                raise NotProvable(f"cannot tell what `{shown(snippet)}` runs")
            raise NotProvable(f"cannot tell what `{shown(snippet)}` expands to")
        self._add("vq" if quoted else "vu", m.group())
        self.i = end

    def _expansion_at(self, i: int) -> str:
        text = self.text
        if text.startswith(("${", "$(", "$["), i):
            close = {"{": "}", "(": ")", "[": "]"}[text[i + 1]]
            end = text.find(close, i)
            return text[i : end + 1] if end > 0 else text[i:]
        return text[i : i + 2]

    def _redirect(self) -> None:
        fd = ""
        if self.in_word and all(k == "u" and t.isdigit() for k, t in self.parts):
            fd = "".join(t for _, t in self.parts)
            self.parts, self.in_word = [], False
        self._flush()
        op = next(o for o in _REDIRS if self.text.startswith(o, self.i))
        self.tokens.append(Tok("r", op=op, fd=fd))
        self.i += len(op)

    def _operator(self) -> None:
        self._flush()
        for op in (*_OPS[:2], *_REFUSED_OPS, *_OPS[2:]):
            if self.text.startswith(op, self.i):
                if op in _REFUSED_OPS:
                    raise NotProvable(_REFUSED_OPS[op])
                self.tokens.append(Tok("o", op=op))
                self.i += len(op)
                return
