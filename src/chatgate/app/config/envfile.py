"""The secrets file ``<state dir>/chatgate.env``: ``NAME=value`` lines every command loads.

The config names each secret by variable (``token_env: TELEGRAM_BOT_TOKEN``); the value
lives in the environment, or here. ``chatgate init`` writes what the user pastes; ``run``,
the systemd unit (``EnvironmentFile=``) and every other command read it. A variable already
set in the environment wins over the file. The file must be private (mode 0600): a looser
one is refused with the ``chmod`` that fixes it, since anyone who can read it holds the bots.

Parsed by python-dotenv without ``${...}`` expansion, the same reading systemd gives it;
written with values bare or single-quoted, which both read alike.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from chatgate.domain.errors import ConfigError

FILE_NAME = "chatgate.env"
_BARE = re.compile(r"[A-Za-z0-9_\-.:/+=@,~%^]*")
"""Characters a value may hold unquoted (neither dotenv nor systemd reads them specially)."""


def env_file_path(state_dir: Path) -> Path:
    return state_dir / FILE_NAME


def check_private(path: Path) -> None:
    """Refuse a secrets file others can read or write: the message names the fix."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise ConfigError(
            f"the secrets file {path} has mode {mode:03o}, so other users can read or change it;"
            f" make it private with: chmod 600 {path}"
        )


def read_env_file(path: Path, *, private: bool = True) -> dict[str, str]:
    """The file's variables (none when it does not exist); ``ConfigError`` when it is not private
    (``private=False``: read it anyway, for ``doctor``, which reports the mode itself)."""
    if not path.exists():
        return {}
    if private:
        check_private(path)
    from dotenv import dotenv_values  # only where a secrets file exists

    try:
        values = dotenv_values(path, interpolate=False, encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the secrets file {path}: {exc}") from None
    return {name: value for name, value in values.items() if value is not None}


def load_env_file(path: Path, environ: MutableMapping[str, str]) -> list[str]:
    """Set each variable of the file that ``environ`` does not already hold; the names set."""
    loaded = []
    for name, value in read_env_file(path).items():
        if name not in environ:
            environ[name] = value
            loaded.append(name)
    return loaded


def _line(name: str, value: str) -> str:
    if "\n" in value or "\r" in value or "\0" in value:
        raise ValueError(f"the value of {name} spans lines; a secret is one line")
    if _BARE.fullmatch(value):
        return f"{name}={value}\n"
    if "'" in value or "\\" in value:
        raise ValueError(f"the value of {name} holds a quote or a backslash; put it in the file by hand")
    return f"{name}='{value}'\n"


def save_secrets(path: Path, values: Mapping[str, str]) -> None:
    """Write ``values`` into the file, keeping its other lines; atomic, mode 0600 from the start."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True) if path.exists() else []
    pending = dict(values)
    kept: list[str] = []
    for line in lines:
        name = line.split("=", 1)[0].strip().removeprefix("export ").strip()
        if "=" in line and name in pending:
            kept.append(_line(name, pending.pop(name)))
        else:
            kept.append(line if line.endswith("\n") else line + "\n")
    if not lines:
        kept.append("# chatgate's secrets (NAME=value), read by every chatgate command; keep it mode 0600\n")
    kept.extend(_line(name, value) for name, value in pending.items())
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".chatgate.env.", dir=path.parent)  # mkstemp: mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write("".join(kept))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
