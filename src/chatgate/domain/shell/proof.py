"""Prove a shell command safe to run without a prompt, or say why it cannot be.

The inverse of the danger rules: a command is proven only when ``shell_strict`` can read
every word of it, every program is on the allow-list (``shell_allow``) with options its
entry names, and every path it names is inside the work directory from every directory
it may be in by then. Anything else yields a reason, and the command asks a human. The
canonical form of each command (variables resolved, long options spelled in full) is
returned too, so the danger rules can explain what it does. Pure: no I/O.

A program that runs code from the work directory (``code_runners``) is never proven, and
neither is ``git`` in a pipeline beside a command that writes files (the configuration git
reads could change while it runs).

Assumptions the runner keeps (``agents.tools``): ``/bin/sh -c`` runs the command, in the
work directory, with a minimal environment (no ``CDPATH``, ``ENV``, ``BASH_ENV``, ``IFS``; a
``PATH`` without the work directory), and every ``git`` it runs has the programs its
configuration names turned off (``agents/tools/git_guard.py``).
"""

from __future__ import annotations

import logging
import posixpath
import re

import msgspec

from chatgate.domain.shell import code_runners
from chatgate.domain.shell.allow import AllowList, ProgramSpec
from chatgate.domain.shell.options import parse_options
from chatgate.domain.shell.strict import NotProvable, StrictLexer, Tok, Word, shown

_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_LOCAL_VAR = re.compile(r"[a-z_][a-z0-9_]*")
_SPLITS = re.compile(r"[\s*?\[]")
_MAX_REASONS = 5
_MAX_CWDS = 16
_RUNS_CODE = {
    **dict.fromkeys(("eval", "source", ".", "exec", "command", "builtin", "env", "xargs", "nohup", "nice",
                     "timeout", "sudo", "doas", "su", "setsid", "stdbuf", "time", "watch"),
                    "runs its arguments as a command"),
    **dict.fromkeys(("trap", "alias", "function"), "defines code that runs later"),
    **dict.fromkeys(("set", "shopt", "export", "unset", "read", "readonly", "local", "declare", "typeset",
                     "getopts", "shift", "pushd", "popd"), "changes shell state this check does not follow"),
}  # fmt: skip
_DEVICES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/stdin"})

log = logging.getLogger(__name__)


class Proof(msgspec.Struct, frozen=True):
    """``reasons`` empty: proven. ``views``: each command in canonical form, for the rules."""

    views: tuple[str, ...]
    reasons: tuple[str, ...]

    @property
    def proven(self) -> bool:
        return not self.reasons


class _State(msgspec.Struct):
    workdir: str
    allow: AllowList
    cwds: list[str] = msgspec.field(default_factory=list)
    vars: dict[str, str] = msgspec.field(default_factory=dict)
    views: list[str] = msgspec.field(default_factory=list)
    reasons: list[str] = msgspec.field(default_factory=list)
    git: bool = False
    """The current command runs ``git``."""
    writes: bool = False
    """The current command writes a file (a redirection or a program marked ``writes``)."""

    def refuse(self, reason: str) -> None:
        if reason not in self.reasons and len(self.reasons) < _MAX_REASONS:
            self.reasons.append(reason)


def prove(command: str, workdir: str, allow: AllowList) -> Proof:
    """Whether ``command`` (``/bin/sh -c`` in the absolute ``workdir``) is proven safe."""
    state = _State(posixpath.normpath(workdir), allow, cwds=[posixpath.normpath(workdir)])
    try:
        tokens = StrictLexer(command).run()
    except NotProvable as exc:
        return Proof((), (exc.reason,))
    try:
        _walk(state, tokens)
    except Exception as exc:  # a gap in the analysis is never a proof: fail closed, and say so
        log.error("shell analysis failed on a command; asking a human", exc_info=exc)
        return Proof(tuple(dict.fromkeys(state.views)), ("could not be analysed (an internal error)",))
    return Proof(tuple(dict.fromkeys(state.views)), tuple(state.reasons))


def _walk(state: _State, tokens: list[Tok]) -> None:
    words: list[Word] = []
    redirs: list[tuple[Tok, Word]] = []
    pending: Tok | None = None
    before = ""  # the operator before the current command
    stages: list[tuple[bool, bool]] = []  # (runs git, writes) of each command of the current pipeline
    for tok in [*tokens, Tok("o", op="\n")]:
        if tok.kind == "w" and pending is not None:
            redirs.append((pending, tok.word))
            pending = None
        elif tok.kind == "w":
            words.append(tok.word)
        elif tok.kind == "r":
            if pending is not None:
                state.refuse(f"has a redirection `{pending.op}` without a target")
            pending = tok
        else:
            if pending is not None:
                state.refuse(f"has a redirection `{pending.op}` without a target")
            pending = None
            if words or redirs:
                conditional = before in ("&&", "||", "|") or tok.op == "|"
                state.git = state.writes = False
                _command(state, words, redirs, conditional=conditional)
                stages.append((state.git, state.writes))
            elif tok.op in ("&&", "||", "|"):
                state.refuse(f"has `{tok.op}` without a command before it")
            if tok.op != "|":
                _pipeline(state, stages)
                stages = []
            words, redirs, before = [], [], tok.op


def _pipeline(state: _State, stages: list[tuple[bool, bool]]) -> None:
    """``git`` runs at the same time as the other commands of its pipeline: none may write a file,
    or the configuration git reads (a file it includes may be in the work directory) could change
    between the runner's guard reading it and git reading it."""
    for index, (git, _) in enumerate(stages):
        if git and any(writes for other, (_, writes) in enumerate(stages) if other != index):
            state.refuse(
                "runs `git` in a pipeline beside a command that writes files, which could change"
                " git's configuration while it runs"
            )
            return


def _expand(state: _State, word: Word) -> str | None:
    """The word's text with resolved variables, or None (with a reason) if it cannot be known."""
    out: list[str] = []
    for kind, text in word:
        if kind in ("u", "q"):
            out.append(text)
            continue
        value = state.vars.get(text)
        if value is None:
            state.refuse(
                f"cannot tell what `${text}` holds (only variables set earlier in the command are known)"
            )
            return None
        if kind == "vu" and (not value or _SPLITS.search(value)):
            state.refuse(f"`${text}` unquoted would be split or globbed ({shown(value)!r})")
            return None
        out.append(value)
    return "".join(out)


def _command(state: _State, words: list[Word], redirs: list[tuple[Tok, Word]], *, conditional: bool) -> None:
    texts = [_expand(state, word) for word in words]
    assigns: list[tuple[str, str]] = []
    while (
        words
        and words[0]
        and texts[0] is not None
        and words[0][0][0] == "u"
        and _ASSIGN.match(words[0][0][1])
    ):
        name, _, value = texts[0].partition("=")
        assigns.append((name, value))
        words, texts = words[1:], texts[1:]
    for tok, target in redirs:
        _redirect(state, tok, target)
    if not words:
        _assign(state, assigns, conditional=conditional)
        return
    if assigns:
        state.refuse(
            f"sets `{assigns[0][0]}` in the environment of the command, which can change what it does"
        )
    if any(text is None for text in texts):
        return
    args = [text for text in texts if text is not None]
    _program(state, args[0], args[1:])


def _assign(state: _State, assigns: list[tuple[str, str]], *, conditional: bool) -> None:
    for name, value in assigns:
        if not _LOCAL_VAR.fullmatch(name):
            state.refuse(f"sets `{name}`, a variable that can change what the shell or later commands do")
        elif conditional:
            state.refuse(f"sets `{name}` only on some paths (after `&&`, `||` or in a pipeline)")
        else:
            state.vars[name] = value


def _redirect(state: _State, tok: Tok, target: Word) -> None:
    path = _expand(state, target)
    if path is None:
        return
    if tok.op not in ("<", ">&", "<&") and path not in _DEVICES:
        state.writes = True
    if tok.op in (">&", "<&"):
        if not (path.isdigit() or path == "-"):
            state.refuse(f"redirects with `{tok.op}{shown(path)}`, which this check does not analyse")
        return
    _path(state, path, write=tok.op != "<", what="a redirection")


def _program(state: _State, name: str, args: list[str]) -> None:
    state.views.append(" ".join((name, *args)))
    if "/" in name:
        state.refuse(f"runs `{shown(name)}`, a program named by a path, not one on the allow-list")
        return
    why_code = code_runners.runs_workdir_code(name)
    if why_code is not None:  # whatever approvals.allow says
        state.refuse(code_runners.reason(shown(name), why_code))
        return
    state.git = state.git or name == "git"
    spec = state.allow.get(name)
    if spec is None:
        why = _RUNS_CODE.get(name)
        detail = f" (it {why})" if why else ""
        state.refuse(f"`{shown(name)}` is not on the allow-list{detail}; see approvals.allow")
        return
    if not spec.subcommands:
        _checked(state, spec, name, args, prefix=(name,))
        return
    opts = parse_options(spec, args, name, stop_at_operand=True)
    for reason in opts.reasons:
        state.refuse(reason)
    if not opts.operands:
        return
    sub, rest = opts.operands[0], opts.operands[1:]
    label, sub_spec = f"{name} {sub}", spec.subcommands.get(sub)
    if sub_spec is None:
        state.views.append(" ".join((name, *opts.canonical, sub, *rest)))
        state.refuse(f"`{shown(label)}` is not on the allow-list; see approvals.allow")
        return
    _checked(state, sub_spec, label, rest, prefix=(name, *opts.canonical, sub))


def _checked(state: _State, spec: ProgramSpec, label: str, args: list[str], prefix: tuple[str, ...]) -> None:
    opts = parse_options(spec, args, label)
    state.views.append(" ".join((*prefix, *opts.canonical)))
    for reason in opts.reasons:
        state.refuse(reason)
    if spec.asks:
        state.refuse(f"`{label}` reaches beyond the work directory, so it always asks")
    operands = opts.operands
    if label == "sed":
        given = opts.texts.get("-e", []) + opts.texts.get("--expression", [])
        _sed(state, given or operands[:1])
        operands = operands if given else operands[1:]
    if spec.writes and (opts.paths or (spec.operands == "paths" and operands)):
        state.writes = True  # it may write a path it names (`sort` alone only filters a pipe)
    for value in opts.paths:
        _path(state, value, write=spec.writes, what=f"`{label}`")
    if spec.operands == "paths":
        for value in operands:
            _path(state, value, write=spec.writes, what=f"`{label}`")
    if label == "cd":
        _cd(state, opts.operands)
    if label == "date" and any(not value.startswith("+") for value in operands):
        state.refuse("`date` with an operand other than +FORMAT sets the clock")


def _cd(state: _State, operands: list[str]) -> None:
    if len(operands) != 1 or operands[0] in ("", "-"):
        state.refuse("`cd` without exactly one directory goes to $HOME or $OLDPWD")
        return
    for cwd in list(state.cwds):
        target = posixpath.normpath(posixpath.join(cwd, operands[0]))
        if target not in state.cwds:
            state.cwds.append(target)
    if len(state.cwds) > _MAX_CWDS:
        state.refuse("changes directory more often than this check follows")


def _path(state: _State, value: str, *, write: bool, what: str) -> None:
    """Every path must be inside the work directory from each directory the command may be in."""
    if value in ("", "-") or value in _DEVICES:
        return
    parts = value.split("/")
    if ".." in parts:
        state.refuse(f"{what} names `{shown(value)}`; a `..` may leave the work directory")
        return
    if write and ".git" in parts:
        state.refuse(f"{what} writes `{shown(value)}` inside .git, which can make git run commands")
    for cwd in state.cwds:
        path = posixpath.normpath(posixpath.join(cwd, value))
        if path != state.workdir and not path.startswith(state.workdir.rstrip("/") + "/"):
            state.refuse(f"{what} names `{shown(value)}`, outside the work directory")
            return


_SED_CMD = re.compile(
    r"\s*(?:(?:\d+|\$|/(?:[^/\\\n]|\\.)*/)(?:\s*,\s*(?:\d+|\$|/(?:[^/\\\n]|\\.)*/))?\s*!?\s*)?"
    r"(?:[pdqPDnN=gGhHx]|s(?P<d>[^\s\\\n])(?:(?!(?P=d))[^\\\n]|\\.)*(?P=d)(?:(?!(?P=d))[^\\\n]|\\.)*(?P=d)[gpiI0-9]*"
    r"|y(?P<y>[^\s\\\n])(?:(?!(?P=y))[^\\\n])*(?P=y)(?:(?!(?P=y))[^\\\n])*(?P=y))?\s*"
)


def _sed(state: _State, scripts: list[str]) -> None:
    """Only sed commands that print, delete, substitute or transliterate: no ``e``, ``w``, ``r``."""
    for script in scripts:
        for command in re.split(r"[;\n]", script):
            if not _SED_CMD.fullmatch(command):
                state.refuse(f"the sed script `{shown(command)}` uses a command this check does not allow")
                return
