"""Normalized views of a shell command, for matching danger rules against.

The views undo quoting tricks and peel wrappers the way a shell would (so
``r''m -rf``, ``/bin/rm -rf`` and ``env rm -rf`` all read ``rm -rf``), follow nested
commands, and name the paths a command writes. Pure: no I/O. A parse failure adds
views, it never removes any, so a command the lexer does not understand is never
"safe" for that reason.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Sequence

from chatgate.domain.shell.lex import (
    _COMPACT,
    _FLATTEN,
    _QUOTES,
    _WRITE_REDIRS,
    Token,
    _Lexer,
    _no_subst,
)

SAFE_DEV = r"(?:null|zero|full|stdout|stderr|stdin|tty|random|urandom)"
_SAFE_DEV = SAFE_DEV


def command_views(command: str, workdir: str) -> tuple[str, ...]:
    """Every normalized view of ``command`` that rules are searched in (see the rules doc)."""
    if not isinstance(workdir, str) or not workdir.startswith("/"):
        raise ValueError(f"workdir must be an absolute path, got {workdir!r}")
    analyzer = _Analyzer(_norm(workdir))
    analyzer.parse(command, 0)
    analyzer.add(_COMPACT.sub("", command))
    return tuple(analyzer.views)


# ---------------------------------------------------------------- analysis

_MAX_DEPTH = 12
_MAX_PEEL_VIEWS = 64
_MAX_CWDS = 16
_TOO_DEEP = "analysis:nesting-too-deep"
_SHELL_SYNTAX = re.compile(r"[\s;&|()<>`$'\"\\]")
_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_VAR_REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
_ECHO_SUBST = re.compile(r"\$\((?:echo|printf)(?: -[neE]+)? (\S+)\)")
_REMOTE = re.compile(r"[^/]*:")
_KEYWORDS = frozenset(
    ("!", "{", "}", "[[", "]]", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for",
     "in", "case", "esac", "select", "function", "coproc")
)  # fmt: skip
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "rbash"})
_INTERPRETERS = frozenset({"python", "python2", "python3", "perl", "ruby", "node", "php"})
_GLOB_NAMES = (
    "rm", "dd", "su", "sh", "sudo", "doas", "bash", "find", "chmod", "mkfs", "wipefs", "git", "kill",
    "pkill", "killall", "reboot", "shutdown", "halt", "poweroff", "curl", "wget", "env", "eval",
)  # fmt: skip
_SAFE_DEVICES = frozenset(f"/dev/{d}" for d in _SAFE_DEV[3:-1].split("|"))
# Wrappers run their arguments as a command: name -> (options taking an argument, positionals to skip).
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    name: (frozenset(opts.split()), skip)
    for name, opts, skip in (
        ("sudo", "-u -g -C -D -h -p -r -t -T -U --user --group --chdir --host --prompt --role --type", 0),
        ("doas", "-u -C", 0),
        ("pkexec", "--user", 0),
        ("run0", "-u --user -D --chdir --unit --property --description --slice --nice", 0),
        ("env", "-u -C -S --unset --chdir --split-string", 0),
        ("command", "", 0),
        ("eval", "", 0),
        ("builtin", "", 0),
        ("exec", "-a", 0),
        ("nohup", "", 0),
        ("nice", "-n --adjustment", 0),
        ("ionice", "-c -n -t --class --classdata", 0),
        ("time", "-f -o --format --output", 0),
        ("timeout", "-s -k --signal --kill-after", 1),
        ("stdbuf", "-i -o -e --input --output --error", 0),
        ("chroot", "--userspec --groups", 1),
        ("setsid", "", 0),
        ("flock", "-w -E --timeout --conflict-exit-code", 1),
        ("xargs", "-I -L -n -P -d -E -s -a --max-args --max-procs --delimiter --arg-file", 0),
        ("watch", "-n -d --interval", 0),
        ("strace", "-o -e -p -s -u", 0),
        ("busybox", "", 0),
        ("unbuffer", "", 0),
        ("caffeinate", "", 0),
    )
}
# Commands that write paths: name -> (how the targets are found, options taking an argument).
_WRITERS: dict[str, tuple[str, frozenset[str]]] = {
    name: (how, frozenset(opts.split()))
    for how, opts, names in (
        ("all", "-s -r -d -t -m -n --size --reference --date --mode --iterations",
         "rm rmdir unlink touch mkdir shred truncate mkfifo mv tee"),
        ("last", "-t -S -m -o -g -e -P -i -F -J -c -l --target-directory --suffix --rsh",
         "cp ln install rsync scp"),
        ("after_first", "--from", "chmod chown chgrp"),
    )
    for name in names.split()
}  # fmt: skip


def _norm(path: str) -> str:
    path = posixpath.normpath(path)
    return "/" + path.lstrip("/") if path.startswith("//") else path


def _inside(path: str, workdir: str) -> bool:
    return workdir == "/" or path == workdir or path.startswith(workdir + "/")


def _positionals(args: Sequence[str], with_arg: frozenset[str]) -> list[str]:
    out: list[str] = []
    i, options = 0, True
    while i < len(args):
        arg = args[i]
        if options and arg == "--":
            options = False
        elif options and arg.startswith("-") and arg != "-":
            i += arg in with_arg
        else:
            out.append(arg)
        i += 1
    return out


def _flag_arg(args: Sequence[str], letters: str, longs: tuple[str, ...] = ()) -> str | None:
    """The argument of the first ``-X value`` (X in ``letters``, last of a cluster) or ``--long[=]value``."""
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            for long in longs:
                if arg == long and i + 1 < len(args):
                    return args[i + 1]
                if arg.startswith(long + "="):
                    return arg[len(long) + 1 :]
        elif arg.startswith("-") and len(arg) > 1 and arg[-1] in letters and i + 1 < len(args):
            return args[i + 1]
    return None


def _shell_script(args: Sequence[str]) -> str | None:
    """The command string of ``sh [options] -c 'string'``, if any."""
    i, has_c = 0, False
    while i < len(args) and args[i].startswith(("-", "+")) and args[i] not in ("-", "--"):
        if args[i] in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 1
        elif args[i][0] == "-" and not args[i].startswith("--") and "c" in args[i]:
            has_c = True
        i += 1
    i += i < len(args) and args[i] == "--"
    return args[i] if has_c and i < len(args) else None


def _peel(name: str, args: list[str]) -> list[str]:
    """The command a wrapper runs (``sudo -u x rm -rf y`` -> ``rm -rf y``), or []."""
    spec = _WRAPPERS.get(name)
    if spec is None:
        return []
    with_arg, skip = spec
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if name == "env" and _ASSIGN.match(arg):
            i += 1
        elif arg.startswith("-") and len(arg) > 1:
            i += 2 if arg in with_arg else 1
        else:
            break
    return args[i + skip :]


class _Analyzer:
    """Collects the views of one command; see docs/approvals-rules.md for what they are."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.views: dict[str, None] = {}
        self.cwds: list[str | None] = [workdir]
        self.vars: dict[str, str] = {}
        self.writes = True

    def add(self, view: str) -> None:
        self.views[view] = None

    def parse(self, text: str, depth: int) -> str:
        """Collect the views of ``text``; return its commands as one line, for inlining."""
        if depth > _MAX_DEPTH:  # never silently: the marker view is itself a danger
            self.add(_TOO_DEEP)
            return "" if depth > 2 * _MAX_DEPTH else self._lenient(text, depth, writes=True)
        lexer = _Lexer(text, lambda kind, body: f"{kind}({self.parse(body, depth + 1)})")
        line = self._assemble(lexer.run(), depth)
        if depth == 0 or not lexer.ok:
            self._lenient(text, depth, writes=not lexer.ok)
        return line

    def _lenient(self, text: str, depth: int, *, writes: bool) -> str:
        """Parse with every quote and escape removed and substitutions flattened into commands."""
        saved, self.writes = self.writes, self.writes and writes
        try:
            flat = _FLATTEN.sub("\n", _QUOTES.sub("", text))
            return self._assemble(_Lexer(flat, _no_subst).run(), depth)
        finally:
            self.writes = saved

    def _assemble(self, tokens: list[Token], depth: int) -> str:
        line: list[str] = []
        pipeline: list[str] = []
        words: list[str] = []
        redirs: list[tuple[str, str]] = []
        pending: str | None = None
        for kind, text in [*tokens, ("o", "\n")]:
            if kind == "w" and pending is not None:
                redirs.append((pending, text))
                pending = None
            elif kind == "w":
                words.append(text)
            elif kind == "r":
                pending = text
            else:
                canonical = self._simple(words, redirs, depth) if words or redirs else ""
                words, redirs, pending = [], [], None
                if canonical:
                    pipeline.append(canonical)
                    line.append(canonical)
                if text not in ("|", "|&"):
                    self._pipeline(pipeline, depth)
                    pipeline = []
        return " ; ".join(line)

    def _pipeline(self, stages: list[str], depth: int) -> None:
        if len(stages) < 2:
            return
        self.add("\n| ".join(stages))
        names = [stage.split(" ", 1)[0] for stage in stages]
        if any(name in _SHELLS for name in names[1:]):
            for stage, name in zip(stages, names, strict=True):  # echo 'rm -rf /' | sh
                if name in ("echo", "printf") and " " in stage:
                    self.parse(stage.split(" ", 1)[1], depth + 1)

    def _simple(self, words: list[str], redirs: list[tuple[str, str]], depth: int) -> str:
        """Views of one simple command and of every command its wrappers run; returns the innermost."""
        for op, target in redirs:
            if op in _WRITE_REDIRS and not (op == ">&" and (target.isdigit() or target == "-")):
                self._write(target)
        if words and all(_ASSIGN.match(word) for word in words):
            for word in words:
                name, _, value = word.partition("=")
                self.vars[name.rstrip("+")] = value
        canonical, count = "", 0
        while words:
            while words and (words[0] in _KEYWORDS or _ASSIGN.match(words[0])):
                words = words[1:]
            if not words:
                break
            name, args = self._name(words[0]), words[1:]
            inner = _peel(name, args)
            count += 1
            if count <= _MAX_PEEL_VIEWS or not inner:
                canonical = " ".join((name, *args))
                self.add(canonical)
                self._track(name, args, depth)
            words = inner
        if canonical.split(" ", 1)[0] in _SHELLS:
            for op, target in redirs:
                if op == "<<<":  # bash <<< 'rm -rf /'
                    self.parse(target, depth + 1)
        return canonical

    def _name(self, word: str) -> str:
        """The command a word names: variables and ``$(echo x)`` resolved, path and case dropped."""
        ref = _VAR_REF.fullmatch(word)
        if ref and ref.group(1) in self.vars:
            word = self.vars[ref.group(1)]
        echoed = _ECHO_SUBST.fullmatch(word)
        if echoed:
            word = echoed.group(1)
        if " " in word:
            return word
        name = word.rstrip("/").rsplit("/", 1)[-1].lower() or word
        if any(ch in name for ch in "*?["):
            return next((c for c in _GLOB_NAMES if fnmatch.fnmatchcase(c, name)), name)
        return name

    def _track(self, name: str, args: list[str], depth: int) -> None:
        """Follow what a command does beyond its own view: writes, cd, nested commands."""
        if self.writes:
            self._writes_of(name, args)
        if name in ("cd", "pushd", "popd"):
            self._cd(name, args)
        nested: str | None = None
        if name in _SHELLS:
            nested = _shell_script(args)
        elif name == "eval" and any(_SHELL_SYNTAX.search(arg) for arg in args):
            nested = " ".join(args)  # plain words were already peeled like a wrapper
        elif name in ("su", "runuser", "flock"):
            nested = _flag_arg(args, "c", ("--command",))
        elif name == "env":
            nested = _flag_arg(args, "S", ("--split-string",))
        elif name == "ssh":
            nested = self._ssh_command(args)
        elif name == "find":
            for group in self._find_execs(args):
                self._simple(group, [], depth + 1)
        elif name.rstrip("0123456789.") in _INTERPRETERS:
            code = _flag_arg(args, "ceE", ("--command", "--eval"))
            if code is not None:  # python -c "os.system('rm -rf /')": look for shell words in the code
                self._lenient(code, depth + 1, writes=False)
        if nested is not None:
            self.parse(nested, depth + 1)

    @staticmethod
    def _ssh_command(args: list[str]) -> str | None:
        i = 0
        while i < len(args) and args[i].startswith("-"):
            i += 2 if len(args[i]) == 2 and args[i][1] in "bcDEeFIiJLlmOopQRSWw" else 1
        rest = args[i + 1 :]
        return " ".join(rest) if rest else None

    @staticmethod
    def _find_execs(args: list[str]) -> list[list[str]]:
        groups: list[list[str]] = []
        i = 0
        while i < len(args):
            if args[i] in ("-exec", "-execdir", "-ok", "-okdir"):
                end = next((j for j in range(i + 1, len(args)) if args[j] in (";", "+")), len(args))
                if end > i + 1:
                    groups.append(args[i + 1 : end])
                i = end
            i += 1
        return groups

    def _writes_of(self, name: str, args: list[str]) -> None:
        targets: list[str] = []
        how, with_arg = _WRITERS.get(name, ("", frozenset()))
        if how == "all":
            targets = _positionals(args, with_arg)
        elif how == "last":
            positionals = _positionals(args, with_arg)
            target = _flag_arg(args, "t", ("--target-directory",))
            target = target if target is not None else (positionals[-1] if len(positionals) > 1 else None)
            targets = [target] if target is not None and not _REMOTE.match(target) else []
        elif how == "after_first":
            positionals = _positionals(args, with_arg)
            targets = positionals[1:] if len(positionals) > 1 else positionals
        elif name == "sed" and any(a.startswith("--in-place") or _short_flag(a, "i") for a in args):
            positionals = _positionals(args, frozenset({"-e", "-f", "-l", "--expression", "--file"}))
            given = _flag_arg(args, "ef", ("--expression", "--file")) is not None
            targets = positionals if given else positionals[1:]
        elif name.rstrip("0123456789.") == "perl" and any(_short_flag(a, "i") for a in args):
            targets = _positionals(args, frozenset({"-e", "-E", "-pe", "-ne", "-pie"}))
        elif name == "dd":
            targets = [a[3:] for a in args if a.startswith("of=")]
        elif name in ("curl", "wget"):
            target = _flag_arg(args, "o" if name == "curl" else "OP", ("--output", "--output-document"))
            targets = [target] if target is not None else []
        for target in targets:
            self._write(target)

    def _resolve(self, target: str) -> list[str | None]:
        """Absolute paths ``target`` may name; None when it cannot be known (``~``, ``$VAR``)."""
        if target.startswith(("~", "$")):
            return [None]
        if target.startswith("/"):
            return [_norm(target)]
        return [None if cwd is None else _norm(f"{cwd}/{target}") for cwd in self.cwds]

    def _write(self, target: str) -> None:
        if target in ("", "-"):
            return
        for path in self._resolve(target):
            shown = target if path is None else path
            self.add(f"write:{shown}")
            if path is None or not (_inside(path, self.workdir) or _harmless_device(path)):
                self.add(f"write-outside:{shown}")

    def _cd(self, name: str, args: list[str]) -> None:
        """Every directory ``cd`` may lead to stays a candidate cwd: later writes must be inside from all."""
        targets = [a for a in args if not a.startswith("-")] if name != "popd" else []
        for cwd in self._resolve(targets[0]) if targets else [None]:
            candidate = cwd if len(self.cwds) < _MAX_CWDS else None
            if candidate not in self.cwds:
                self.cwds.append(candidate)


def _harmless_device(path: str) -> bool:
    return path in _SAFE_DEVICES or path.startswith(("/dev/fd/", "/dev/pts/", "/dev/shm/", "/proc/self/fd/"))


def _short_flag(arg: str, letter: str) -> bool:
    """``arg`` is a short-option cluster (``-pi``, ``-i.bak``) holding ``letter``."""
    return arg[:1] == "-" and arg[1:2] not in ("", "-") and letter in arg
