"""The allow-list: programs the approval check understands, with the options it knows.

A command runs without a prompt only if every program in it is listed here (or in
``approvals.allow``), every option it is given is one its entry names, and every path is
inside the work directory (docs/approvals.md). An entry is data:

- ``options``: each ``-x``, ``--long`` or ``-word``, optionally followed by ``PATH`` or
  ``TEXT`` when it takes an argument (a ``PATH`` argument is checked like an operand);
  ``-NUM`` admits ``-5``-style counts.
- ``operands``: ``paths`` (each must be inside the work directory) or ``text``.
- ``writes``: the program changes the files it names, so none may be inside ``.git``
  (where a write can make a later ``git`` run a command).
- ``asks``: understood (so its options are resolved for the prompt) but always asks,
  because it reaches beyond the work directory.
- ``subcommands``: for ``git``-like programs, an entry per subcommand.

A program that runs code from the work directory (``domain.shell.code_runners``: test
runners, build tools, interpreters, package managers) is never proven safe, sandbox or not:
an entry for one must say ``asks: true``, and the check refuses it either way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

from chatgate.domain.shell.allow_defaults import DEFAULT_TABLE
from chatgate.domain.shell.code_runners import REASON, runs_workdir_code

_OPTION = re.compile(r"(-NUM|--?[A-Za-z0-9][A-Za-z0-9_.-]*|-[A-Za-z0-9?])(?: (PATH|TEXT))?")
_PROGRAM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}|\[")
_FIELDS = frozenset({"options", "operands", "writes", "asks", "subcommands"})


class ProgramSpec(msgspec.Struct, frozen=True):
    """What the analyzer knows about one program (or one subcommand)."""

    options: Mapping[str, str] = msgspec.field(default_factory=dict)
    """Option -> "" (no argument), "PATH" or "TEXT"."""
    operands: str = "paths"
    writes: bool = False
    asks: bool = False
    subcommands: Mapping[str, ProgramSpec] = msgspec.field(default_factory=dict)

    @property
    def numeric(self) -> bool:
        return "-NUM" in self.options


AllowList = Mapping[str, ProgramSpec]


def _spec(item: Any, where: str) -> ProgramSpec:
    """Build one entry from config data; ValueError names ``where`` and the bad field."""
    if not isinstance(item, Mapping):
        raise ValueError(
            f"{where}: expected a mapping with options/operands/writes, got {type(item).__name__}"
        )
    if "needs_sandbox" in item:
        raise ValueError(
            f"{where}.needs_sandbox: removed; a program that runs code from the work directory is never"
            " proven safe, sandbox or not (docs/approvals.md); write asks: true instead"
        )
    unknown = sorted(str(k) for k in item if k not in _FIELDS)
    if unknown:
        raise ValueError(
            f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(_FIELDS))})"
        )
    raw_options = item.get("options", [])
    if isinstance(raw_options, str) or not isinstance(raw_options, list):
        raise ValueError(f"{where}.options: expected a list of strings such as '-n' or '--output PATH'")
    options: dict[str, str] = {}
    for index, raw in enumerate(raw_options):
        m = _OPTION.fullmatch(raw) if isinstance(raw, str) else None
        if m is None:
            raise ValueError(
                f"{where}.options[{index}]: {raw!r} is not '-x', '--long' or '-word', optionally"
                " followed by ' PATH' or ' TEXT'"
            )
        options[m.group(1)] = m.group(2) or ""
    operands = item.get("operands", "paths")
    if operands not in ("paths", "text"):
        raise ValueError(f"{where}.operands: must be 'paths' or 'text', got {operands!r}")
    flags = {}
    for name in ("writes", "asks"):
        value = item.get(name, False)
        if not isinstance(value, bool):
            raise ValueError(f"{where}.{name}: must be true or false, got {value!r}")
        flags[name] = value
    subs = item.get("subcommands", {})
    if not isinstance(subs, Mapping):
        raise ValueError(f"{where}.subcommands: expected a mapping of subcommand name to entry")
    subcommands = {str(name): _spec(sub, f"{where}.subcommands.{name}") for name, sub in subs.items()}
    return ProgramSpec(options, operands, subcommands=subcommands, **flags)


def load_allow(config: Mapping[str, Any] | None, *, defaults: bool = True) -> dict[str, ProgramSpec]:
    """The built-in allow-list changed by ``approvals.allow``: an entry adds or replaces a
    program, ``false`` removes one. Raises ValueError naming the offending key."""
    table = dict(DEFAULT_ALLOW) if defaults else {}
    if config is None:
        return table
    if not isinstance(config, Mapping):
        raise ValueError("approvals.allow must be a mapping of program name to entry (or false)")
    for name, item in config.items():
        where = f"approvals.allow.{name}"
        if not isinstance(name, str) or not _PROGRAM.fullmatch(name):
            raise ValueError(f"{where}: a program name is a plain command name (no '/', no spaces)")
        if item is False:
            table.pop(name, None)
            continue
        spec = _spec(item, where)
        why = runs_workdir_code(name)
        if why is not None and not spec.asks:
            raise ValueError(
                f"{where}: `{name}` {REASON} ({why}), so it can never run without a prompt;"
                " remove the entry, or add asks: true to keep its options understood in the prompt"
            )
        table[name] = spec
    return table


def _default_table() -> dict[str, ProgramSpec]:
    return {name: _spec(item, f"built-in allow-list entry {name}") for name, item in DEFAULT_TABLE.items()}


DEFAULT_ALLOW: Mapping[str, ProgramSpec] = _default_table()
