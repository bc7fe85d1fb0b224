"""Run ``git`` without the programs a repository's configuration names (issue 27).

``git status`` is allow-listed, yet a repository's configuration can make it run any
program: ``core.fsmonitor``, hooks, clean/smudge filters, external diff and textconv
drivers, a pager, an editor, an ssh command, a ``ext::`` transport, a gpg program. A cloned
repository is enough: an embedded bare repository (``evil/`` holding ``HEAD``, ``config``,
``objects``) is found by ``cd evil && git status``. So every command runs with:

- settings of command-line precedence (``GIT_CONFIG_COUNT``; a repository's own files, and
  the files they include, cannot override them) that turn each such program off and make a
  bare repository usable only when named (``safe.bareRepository=explicit``);
- environment variables that beat any configuration (``GIT_PAGER``, ``GIT_EDITOR``,
  ``GIT_SSH_COMMAND``...), no system configuration and no global one (``HOME`` is the work
  directory, so ``~/.gitconfig`` would be the repository's to write);
- a guard named ``git`` first on ``PATH``: it reads the names of the filter and diff drivers
  the repository's configuration defines (arbitrary names, so no fixed setting can reach
  them), turns each off, adds ``--no-ext-diff --no-textconv`` where the subcommand takes them,
  then runs the real git. ``GIT_EXEC_PATH`` points at a mirror of git's own directory whose
  ``git`` is the guard too, so the git processes git starts (a submodule's status, ``gc
  --auto``) pass through it as well.

Subcommands the guard cannot make safe ask instead (``status -v`` and ``commit -v`` show a
diff through textconv and take no ``--no-textconv``: ``domain/shell/allow_defaults.py``).
An approved command gets the same treatment; ``git -c ...`` on its command line wins over
these settings, so a human who approves one can turn a program back on, visibly.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import msgspec

SETTINGS: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),  # every hook: /dev/null/<hook> never exists
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),  # "cat" is git's own "no pager"
    ("core.editor", ":"),  # ":" is git's own "no editor"
    ("sequence.editor", ":"),
    ("core.sshCommand", "ssh"),
    ("core.askPass", ""),
    ("credential.helper", ""),  # an empty value empties the list of helpers
    ("protocol.ext.allow", "never"),
    ("safe.bareRepository", "explicit"),
    ("diff.external", ""),  # if ever used, an empty program fails instead of running one
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("gpg.program", "/bin/false"),  # %G? in --format verifies signatures with it
    ("gpg.openpgp.program", "/bin/false"),
    ("gpg.x509.program", "/bin/false"),
    ("gpg.ssh.program", "/bin/false"),
)
"""Configuration of command-line precedence for every git a command runs."""

ENV: dict[str, str] = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_EDITOR": ":",
    "GIT_SEQUENCE_EDITOR": ":",
    "GIT_SSH_COMMAND": "ssh",
    "GIT_ASKPASS": "",  # set and empty: no askpass program, not even core.askPass
    "GIT_TERMINAL_PROMPT": "0",
}
"""Environment variables git obeys before any configuration file."""

DRIVERS = (
    r"^(filter\..+\.(clean|smudge|process)|diff\..+\.(command|textconv)|merge\..+\.driver"
    r"|trailer\..+\.(cmd|command)|credential\..+\.helper)$"
)
"""The configuration keys (POSIX ERE, as ``git config --get-regexp`` reads it) whose names
include a driver name the repository chose; the guard empties each it finds."""

_SCRIPT = r"""#!/bin/sh
# chatgate's git guard (src/chatgate/agents/tools/git_guard.py): the programs a repository's
# configuration names are turned off, then the real git runs.
real=@REAL@
n=0; skip=; sub=
for a in "$@"; do
  if [ -n "$skip" ]; then skip=; n=$((n + 1)); continue; fi
  case $a in
    -C|-c|--git-dir|--work-tree|--namespace|--config-env|--super-prefix) skip=1 ;;
    -*) ;;
    *) sub=$a; break ;;
  esac
  n=$((n + 1))
done
drivers() {
  k=$1; shift; i=0; total=$#
  for a in "$@"; do
    if [ "$i" -lt "$k" ]; then set -- "$@" "$a"; fi
    i=$((i + 1))
  done
  shift "$total"
  "$real" "$@" config --name-only --get-regexp @DRIVERS@
}
if [ -n "$sub" ]; then
  keys=$(drivers "$n" "$@")
  case $? in
    0|1) ;;
    *) echo "chatgate: could not read git's configuration to turn off the programs it names;" \
         "git was not run" >&2
       exit 128 ;;
  esac
  c=${GIT_CONFIG_COUNT:-0}
  case $c in
    ''|*[!0-9]*) echo "chatgate: GIT_CONFIG_COUNT is not a number; git was not run" >&2; exit 128 ;;
  esac
  while IFS= read -r key; do
    [ -n "$key" ] || continue
    export "GIT_CONFIG_KEY_$c=$key" "GIT_CONFIG_VALUE_$c="
    c=$((c + 1))
    case $key in
      filter.*) export "GIT_CONFIG_KEY_$c=${key%.*}.required" "GIT_CONFIG_VALUE_$c=false"; c=$((c + 1)) ;;
    esac
  done <<CHATGATE_KEYS
$keys
CHATGATE_KEYS
  export GIT_CONFIG_COUNT="$c"
fi
i=0; total=$#
for a in "$@"; do
  set -- "$@" "$a"
  if [ "$i" -eq "$n" ]; then
    case $a in
      diff|log|show) set -- "$@" --no-ext-diff --no-textconv ;;
      blame) set -- "$@" --no-textconv ;;
    esac
  fi
  i=$((i + 1))
done
shift "$total"
exec "$real" "$@"
"""


class GitInstall(msgspec.Struct, frozen=True):
    """The real git and the directory of its own programs (``git --exec-path``)."""

    git: str
    exec_path: str


@lru_cache(maxsize=8)
def find_git(path: str) -> GitInstall | None:
    """The git ``path`` (a ``PATH`` value) finds, or None. Blocking: call it in a thread."""
    found = shutil.which("git", path=path)
    if found is None:
        return None
    try:
        done = subprocess.run(
            [found, "--exec-path"],
            capture_output=True,
            env={"PATH": path, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"},
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    exec_path = os.path.realpath(done.stdout.decode("utf-8", "replace").strip())
    inner = os.path.join(exec_path, "git")
    real = inner if os.access(inner, os.X_OK) else os.path.realpath(found)
    return GitInstall(real, exec_path)


class Guard(msgspec.Struct, frozen=True):
    """One command's guard directory: ``bin/git`` (the guard) and ``libexec`` (the mirror)."""

    root: Path

    @property
    def bin(self) -> str:
        return str(self.root / "bin")

    @property
    def exec_path(self) -> str:
        return str(self.root / "libexec")

    @classmethod
    def build(cls, parent: Path, install: GitInstall) -> Guard:
        """A fresh guard directory under ``parent`` (private: mode 0700). Blocking."""
        root = Path(tempfile.mkdtemp(prefix="chatgate-git-", dir=parent))
        try:
            bin_dir, libexec = root / "bin", root / "libexec"
            bin_dir.mkdir()
            libexec.mkdir()
            script = _SCRIPT.replace("@REAL@", shlex.quote(install.git)).replace(
                "@DRIVERS@", shlex.quote(DRIVERS)
            )
            guard = bin_dir / "git"
            guard.write_text(script)
            guard.chmod(0o555)
            for entry in os.scandir(install.exec_path):
                target = "../bin/git" if entry.name == "git" else entry.path
                (libexec / entry.name).symlink_to(target)
            bin_dir.chmod(0o555)
            libexec.chmod(0o555)
        except BaseException:
            remove(root)
            raise
        return cls(root)

    def remove(self) -> None:
        remove(self.root)


def remove(root: Path) -> None:
    """Delete a guard directory (its parts are read-only). Blocking."""
    for part in (root / "bin", root / "libexec"):
        if part.is_dir() and not part.is_symlink():
            part.chmod(0o755)
    shutil.rmtree(root, ignore_errors=True)


def env(guard: Guard | None) -> dict[str, str]:
    """The variables every command gets for git, with ``GIT_EXEC_PATH`` when there is a guard."""
    out = dict(ENV)
    out["GIT_CONFIG_COUNT"] = str(len(SETTINGS))
    for index, (key, value) in enumerate(SETTINGS):
        out[f"GIT_CONFIG_KEY_{index}"] = key
        out[f"GIT_CONFIG_VALUE_{index}"] = value
    if guard is not None:
        out["GIT_EXEC_PATH"] = guard.exec_path
    return out
