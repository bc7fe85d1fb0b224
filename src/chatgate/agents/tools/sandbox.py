"""Run the shell tool inside bubblewrap: the work directory writable, nothing else.

With ``tools.sandbox: bwrap`` every command runs as ``bwrap ... /bin/sh -c command``:
the whole file system bound read-only, a private ``/tmp``, fresh ``/dev`` and ``/proc``,
new namespaces (no network unless ``tools.sandbox_network``), and the work directory
bound read-write on top. ``check`` runs a probe at start-up so a missing ``bwrap`` or a
kernel that refuses user namespaces stops the gateway instead of running commands
unsandboxed (fail closed).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_PROBE_TIMEOUT_S = 10.0


class SandboxUnavailable(Exception):
    """The configured sandbox cannot run here; the message says what to do."""


@dataclass(frozen=True, slots=True)
class BwrapSandbox:
    workdir: Path
    network: bool = False
    binary: str = "bwrap"

    def argv(self, command: str) -> list[str]:
        """The argument vector that runs ``command`` with ``/bin/sh -c`` inside the sandbox."""
        workdir = str(self.workdir)
        return [
            self.binary,
            "--ro-bind", "/", "/",
            "--tmpfs", "/tmp",
            "--dev", "/dev",
            "--proc", "/proc",
            "--bind", workdir, workdir,  # after /tmp: a work directory under /tmp stays visible
            "--unshare-all",
            *(["--share-net"] if self.network else []),
            "--die-with-parent",  # a killed bwrap takes the sandbox's processes with it
            "--chdir", workdir,
            "/bin/sh", "-c", command,
        ]  # fmt: skip

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
            done = subprocess.run(
                self.argv("exit 0"), capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxUnavailable(f"tools.sandbox: bwrap could not be started ({exc})") from exc
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip()[:300] or f"exit code {done.returncode}"
            raise SandboxUnavailable(
                f"tools.sandbox: bwrap cannot create its sandbox here ({said}); allow unprivileged user"
                " namespaces (sysctl kernel.unprivileged_userns_clone=1) or run where they are, or set"
                " tools.sandbox: none to run commands unsandboxed on purpose"
            )
