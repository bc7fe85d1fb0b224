"""The environment of a shell command: minimal, sandboxed or not (issue 27, finding 4).

A command used to inherit the gateway's whole environment: model keys, bot tokens,
database URLs, anything a ``printenv`` or ``cat /proc/self/environ`` (or a test suite's
``conftest.py``) could read and hand to the model. Now it gets only:

- ``PATH``: the git guard first, then the gateway's absolute ``PATH`` entries outside the
  work directory (an empty or relative entry would look programs up in the directory the
  command is in; the approval check assumes the work directory is not on ``PATH``);
- ``HOME``: the work directory (so ``~`` names nothing of the gateway's user);
- ``LANG`` and ``LC_ALL``: ``C.UTF-8``; ``TERM``: ``dumb``;
- git's settings (``git_guard``);
- the variables ``tools.env`` names, copied from the gateway's environment when set there.

``tools.env`` may not name a variable the runner sets for safety, or one that would change
what programs or the shell do behind the approval check (``check_names``).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from chatgate.agents.tools import git_guard

LOCALE = "C.UTF-8"
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GIT_IDENTITY = frozenset(
    {"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"}
)
_REFUSED: Mapping[str, str] = {
    "HOME": "is the work directory for every command",
    "PATH": "is the gateway's PATH already (its absolute entries outside the work directory)",
    **dict.fromkeys(
        ("CDPATH", "ENV", "BASH_ENV", "IFS", "SHELLOPTS", "BASHOPTS", "PS4", "GCONV_PATH"),
        "changes what the shell does in ways the approval check assumes it does not",
    ),
    **dict.fromkeys(git_guard.ENV, "is set by chatgate so git runs no program its configuration names"),
}
_REFUSED_PREFIXES = {
    "GIT_": "git variables other than the author and committer names and emails change which"
    " repository and configuration git uses",
    "LD_": "loader variables make every program load code the approval check cannot see",
    "BASH_FUNC_": "exported functions replace commands the approval check reads",
}


def check_names(names: Iterable[str]) -> list[str]:
    """The names, checked; ValueError naming the first one ``tools.env`` may not pass on."""
    out: list[str] = []
    for name in names:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f"tools.env: {name!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
        if name in _REFUSED:
            raise ValueError(f"tools.env: {name} cannot be passed to commands: it {_REFUSED[name]}")
        for prefix, why in _REFUSED_PREFIXES.items():
            if name.startswith(prefix) and name not in _GIT_IDENTITY:
                raise ValueError(f"tools.env: {name} cannot be passed to commands: {why}")
        if name not in out:
            out.append(name)
    return out


def search_path(source: str | None, workdir: Path, first: Iterable[str] = ()) -> str:
    """``PATH`` for a command: ``first``, then ``source``'s absolute entries outside ``workdir``."""
    inside = posixpath.normpath(str(workdir)).rstrip("/") + "/"
    entries: list[str] = list(first)
    for raw in (source if source is not None else DEFAULT_PATH).split(":"):
        entry = posixpath.normpath(raw) if raw.startswith("/") else ""
        if entry and not (entry + "/").startswith(inside) and entry not in entries:
            entries.append(entry)
    return ":".join(entries)


def command_env(
    source: Mapping[str, str] | None,
    workdir: Path,
    keep: Iterable[str] = (),
    guard: git_guard.Guard | None = None,
) -> dict[str, str]:
    """The whole environment of one command. ``source`` is the gateway's (None: ``os.environ``)."""
    given = os.environ if source is None else source
    out = {
        "PATH": search_path(given.get("PATH"), workdir, (guard.bin,) if guard is not None else ()),
        "HOME": str(workdir),
        "LANG": LOCALE,
        "LC_ALL": LOCALE,
        "TERM": "dumb",
    }
    for name in check_names(keep):
        if name in given:
            out[name] = given[name]
    out.update(git_guard.env(guard))
    return out
