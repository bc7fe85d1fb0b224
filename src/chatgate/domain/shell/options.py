"""Read a program's arguments against its allow-list entry: options, their values, operands.

GNU programs accept any unambiguous prefix of a long option (``rm --recur`` is
``rm --recursive``). The check spells such a prefix in full for the danger rules, and
refuses it all the same: the real program may know options the entry does not, so a
prefix proves nothing about which option it means.
"""

from __future__ import annotations

import re

import msgspec

from chatgate.domain.shell.allow import ProgramSpec
from chatgate.domain.shell.strict import shown

_NUM = re.compile(r"-[0-9]+")


class Options(msgspec.Struct):
    canonical: list[str] = msgspec.field(default_factory=list)
    """The arguments with long-option prefixes spelled in full (up to the stop, if any)."""
    operands: list[str] = msgspec.field(default_factory=list)
    paths: list[str] = msgspec.field(default_factory=list)
    """Values of options that take a ``PATH``."""
    texts: dict[str, list[str]] = msgspec.field(default_factory=dict)
    reasons: list[str] = msgspec.field(default_factory=list)

    def value(self, option: str, kind: str, value: str) -> None:
        if kind == "PATH":
            self.paths.append(value)
        self.texts.setdefault(option, []).append(value)


def parse_options(
    spec: ProgramSpec, args: list[str], label: str, *, stop_at_operand: bool = False
) -> Options:
    """Options and operands of ``args``; with ``stop_at_operand`` the first operand and all
    after it are operands (a subcommand and its arguments)."""
    out = Options()
    i, options = 0, bool(spec.options) or spec.operands == "paths"
    while i < len(args):
        arg = args[i]
        if not options or arg == "-" or not arg.startswith("-"):
            if stop_at_operand:
                out.operands = args[i:]
                return out
            out.operands.append(arg)
            out.canonical.append(arg)
        elif arg == "--":
            options = False
            out.canonical.append(arg)
        elif arg in spec.options or (spec.numeric and _NUM.fullmatch(arg)):
            i = _take(out, spec, args, i, arg, None, label)
        elif arg.startswith("--"):
            i = _long(out, spec, args, i, label)
        else:
            i = _cluster(out, spec, args, i, label)
        i += 1
    return out


def _take(
    out: Options, spec: ProgramSpec, args: list[str], i: int, option: str, value: str | None, label: str
) -> int:
    """Record ``option`` (canonical) and its value, if it takes one; returns the last index used."""
    kind = spec.options.get(option, "")
    if not kind:
        if value is not None:
            out.reasons.append(f"`{label}` option `{option}` takes no value, but was given one")
        out.canonical.append(option)
        return i
    if value is None:
        if i + 1 >= len(args):
            out.reasons.append(f"`{label}` option `{option}` is missing its value")
            out.canonical.append(option)
            return i
        i, value = i + 1, args[i + 1]
        out.canonical.extend((option, value))
    else:
        out.canonical.append(f"{option}={value}")
    out.value(option, kind, value)
    return i


def _long(out: Options, spec: ProgramSpec, args: list[str], i: int, label: str) -> int:
    name, eq, value = args[i].partition("=")
    if name in spec.options:
        return _take(out, spec, args, i, name, value if eq else None, label)
    matches = sorted(o for o in spec.options if o.startswith("--") and o.startswith(name))
    if len(matches) == 1:
        out.reasons.append(
            f"`{label}` option `{shown(name)}` abbreviates `{matches[0]}`; write options in full"
        )
        return _take(out, spec, args, i, matches[0], value if eq else None, label)
    if matches:
        out.reasons.append(f"`{label}` option `{shown(name)}` is ambiguous ({', '.join(matches[:4])})")
    else:
        out.reasons.append(f"`{label}` option `{shown(name)}` is not one the allow-list knows")
    out.canonical.append(args[i])
    return i


def _cluster(out: Options, spec: ProgramSpec, args: list[str], i: int, label: str) -> int:
    """``-rf``, ``-n5``, ``-C dir``: letters in turn; one that takes a value ends the cluster."""
    arg = args[i]
    out.canonical.append(arg)
    for j in range(1, len(arg)):
        option = f"-{arg[j]}"
        kind = spec.options.get(option)
        if kind is None:
            shown_as = f"`{shown(arg)}`" if j == 1 else f"`{option}` (in `{shown(arg)}`)"
            out.reasons.append(f"`{label}` option {shown_as} is not one the allow-list knows")
            return i
        if kind:
            rest = arg[j + 1 :]
            if rest:
                out.value(option, kind, rest)
                return i
            if i + 1 >= len(args):
                out.reasons.append(f"`{label}` option `{option}` is missing its value")
                return i
            out.canonical.append(args[i + 1])
            out.value(option, kind, args[i + 1])
            return i + 1
    return i
