"""Run the shell tool inside bubblewrap: the work directory writable, secrets and sockets hidden.

With ``tools.sandbox: bwrap`` every command runs as ``bwrap ... /bin/sh -c command``:
the whole file system bound read-only, a private ``/tmp``, fresh ``/dev`` and ``/proc``,
new namespaces (no network unless ``tools.sandbox_network``), and the work directory
bound read-write on top. Issue 27 showed what a read-only view still gives away, so the
sandbox also hides (an empty tmpfs over each):

- ``/run`` and ``/var/run``: the host's sockets (PostgreSQL, Docker, D-Bus, systemd) and
  per-user runtime directories;
- every home directory (``/home``, ``/root`` and any other user's home): keys, tokens,
  shell history, and the gateway user's own;
- the gateway's state directory (its database, its config and secrets files);

and a seccomp filter (``seccomp.py``) refuses any Unix socket, so no host socket is reachable
wherever it lives. The work directory (even inside a hidden directory) and the directory of
the command's git guard (read-only) are bound back. docs/approvals.md, "The sandbox", lists
what stays readable. ``check`` runs a probe at start-up so a missing ``bwrap``, a kernel that
refuses user namespaces or an unknown architecture stops the gateway instead of running
commands unsandboxed (fail closed).
"""

from __future__ import annotations

import os
import posixpath
import pwd
import shutil
import subprocess
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import msgspec

from chatgate.agents.tools.seccomp import NoFilter, unix_socket_filter
from chatgate.domain.errors import StartupError

_PROBE_TIMEOUT_S = 10.0
_SYSTEM_HIDDEN = ("/run", "/var/run", "/home", "/root")
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/etc", "/var", "/opt", "/srv", "/tmp", "/proc", "/dev")
_FIRST_USER_UID = 1000  # Debian's FIRST_UID: people, not system accounts
_NOBODY_UID = 65534


class SandboxUnavailable(StartupError):
    """The configured sandbox cannot run here; the message says what to do."""


class BwrapSandbox(msgspec.Struct, frozen=True):
    workdir: Path
    network: bool = False
    binary: str = "bwrap"
    hide: tuple[Path, ...] = ()
    """Host directories hidden besides the built-in ones: the gateway's state directory."""

    def argv(self, command: str, *, binds: Sequence[str] = (), seccomp_fd: int | None = None) -> list[str]:
        """The argument vector that runs ``command`` with ``/bin/sh -c`` inside the sandbox.

        ``binds`` are host directories shown read-only (the command's git guard);
        ``seccomp_fd`` an open file holding ``seccomp.unix_socket_filter()``. Blocking (it
        looks at the file system): build it in a thread.
        """
        workdir = str(self.workdir)
        hidden = hidden_paths(tuple(str(path) for path in self.hide))
        around = [path for path in hidden if not _inside(path, workdir)]
        within = [path for path in hidden if _inside(path, workdir) and path != _real(workdir)]
        argv = [self.binary, "--ro-bind", "/", "/", "--tmpfs", "/tmp", "--dev", "/dev", "--proc", "/proc"]
        for path in around:
            argv += ["--tmpfs", path]
        if self.network:  # /etc/resolv.conf may point into the hidden /run (systemd-resolved)
            resolv = os.path.realpath("/etc/resolv.conf")
            if _inside(resolv, "/run") and os.path.isfile(resolv):
                argv += ["--ro-bind", resolv, resolv]
        for path in binds:
            argv += ["--ro-bind", path, path]
        argv += ["--bind", workdir, workdir]  # after the tmpfs mounts: a work directory under them stays
        for path in within:
            argv += ["--tmpfs", path]
        argv += ["--unshare-all", *(["--share-net"] if self.network else [])]
        argv += ["--die-with-parent"]  # a killed bwrap takes the sandbox's processes with it
        if seccomp_fd is not None:
            argv += ["--seccomp", str(seccomp_fd)]
        return [*argv, "--chdir", workdir, "/bin/sh", "-c", command]

    def check(self) -> None:
        """Raise ``SandboxUnavailable`` unless a probe command runs inside the sandbox.

        Blocking (a subprocess): called once at start-up, before the event loop serves.
        """
        if shutil.which(self.binary) is None:
            raise SandboxUnavailable(
                f"tools.sandbox: bwrap is configured but {self.binary!r} is not installed; install the"
                " Debian package bubblewrap (apt-get install bubblewrap) or set tools.sandbox: none"
            )
        if not self.workdir.is_dir():
            raise SandboxUnavailable(f"tools.sandbox: the work directory {self.workdir} does not exist")
        try:
            program = unix_socket_filter()
        except NoFilter as exc:
            raise SandboxUnavailable(f"tools.sandbox: {exc}") from exc
        read, write = os.pipe()
        try:
            os.write(write, program)
            os.close(write)
            done = subprocess.run(
                self.argv("exit 0", seccomp_fd=read),
                capture_output=True,
                timeout=_PROBE_TIMEOUT_S,
                check=False,
                pass_fds=(read,),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxUnavailable(f"tools.sandbox: bwrap could not be started ({exc})") from exc
        finally:
            os.close(read)
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip()[:300] or f"exit code {done.returncode}"
            raise SandboxUnavailable(
                f"tools.sandbox: bwrap cannot create its sandbox here ({said}); allow unprivileged user"
                " namespaces (sysctl kernel.unprivileged_userns_clone=1) or run where they are, or set"
                " tools.sandbox: none to run commands unsandboxed on purpose"
            )


def hidden_paths(extra: tuple[str, ...] = ()) -> list[str]:
    """What the sandbox hides that exists here: each a real path, none inside another. Blocking."""
    found: list[str] = []
    for path in sorted({_real(p) for p in (*_SYSTEM_HIDDEN, *other_homes(), *extra)}):
        if os.path.isdir(path) and path != "/" and not any(_inside(path, kept) for kept in found):
            found.append(path)
    return found


@lru_cache(maxsize=1)
def other_homes() -> tuple[str, ...]:
    """People's home directories outside /home (``pwd``; read once). Not a system directory."""
    homes: set[str] = set()
    for entry in pwd.getpwall():
        home = _real(entry.pw_dir or "/")
        if entry.pw_uid < _FIRST_USER_UID or entry.pw_uid == _NOBODY_UID or home == "/":
            continue
        if any(_inside(system, home) for system in _SYSTEM_DIRS):
            continue  # hiding it would hide the system (a home of / or /usr)
        homes.add(home)
    return tuple(sorted(homes))


def _real(path: str) -> str:
    return posixpath.normpath(os.path.realpath(path))


def _inside(path: str, directory: str) -> bool:
    """``path`` is ``directory`` or below it (as real paths)."""
    path, directory = _real(path), _real(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")
