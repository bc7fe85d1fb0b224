"""The sandbox's seccomp filter: no Unix socket of the host is reachable (issue 27, finding 3).

An approved ``psql -h /run/postgresql`` reached the host's PostgreSQL from inside the
sandbox: a Unix socket is a file, and the sandbox showed the host's files. Hiding the
usual places (``/run``, ``/tmp``, homes) helps, but a socket can live anywhere, and with
``tools.sandbox_network`` the abstract ones (no file at all) are shared too. So bubblewrap
also loads this filter: ``socket(AF_UNIX, ...)`` fails with EACCES, and so does
``io_uring_setup`` (ENOSYS), whose requests could open a socket behind the filter's back.
``socketpair`` stays: it connects a process to its own children, never to the host.

The filter is classic BPF, assembled here (no libseccomp). It knows x86_64, aarch64 and
riscv64; every system call of another ABI (32-bit or x32 programs) fails with EPERM, and
any other machine has no filter, so ``tools.sandbox: bwrap`` refuses to start there.
"""

from __future__ import annotations

import platform
import struct

from chatgate.domain.errors import ChatgateError

_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_EPERM, _EACCES, _ENOSYS = 1, 13, 38
_AF_UNIX = 1
_X32_BIT = 0x40000000
_IO_URING_SETUP = 425  # the same number on every architecture below

_ARCHES: dict[str, tuple[int, int]] = {
    "x86_64": (0xC000003E, 41),  # AUDIT_ARCH_X86_64, __NR_socket
    "aarch64": (0xC00000B7, 198),
    "riscv64": (0xC00000F3, 198),
}
"""Machine (``platform.machine()``) -> (audit architecture, number of ``socket``)."""


class NoFilter(ChatgateError):
    """This machine's architecture has no filter here."""


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def unix_socket_filter(machine: str | None = None) -> bytes:
    """The filter program (an array of ``struct sock_filter``) for ``bwrap --seccomp FD``."""
    name = machine or platform.machine()
    if name not in _ARCHES:
        raise NoFilter(
            f"the sandbox's seccomp filter knows x86_64, aarch64 and riscv64, not {name}; without it a"
            " command could reach the host's Unix sockets, so the sandbox is not used here"
        )
    arch, socket_nr = _ARCHES[name]
    program = [
        _op(_LD_ABS, 4),  # 0: seccomp_data.arch
        _op(_JEQ, arch, jt=1),  # 1: native ABI -> 3
        _op(_RET, _ERRNO | _EPERM),  # 2: another ABI: nothing
        _op(_LD_ABS, 0),  # 3: seccomp_data.nr
        _op(_JGE, _X32_BIT, jt=0, jf=1) if name == "x86_64" else _op(_JEQ, 0xFFFFFFFF, jf=1),  # 4
        _op(_RET, _ERRNO | _EPERM),  # 5: an x32 call
        _op(_JEQ, _IO_URING_SETUP, jt=0, jf=1),  # 6
        _op(_RET, _ERRNO | _ENOSYS),  # 7
        _op(_JEQ, socket_nr, jt=0, jf=3),  # 8: socket() -> 9, else -> 12
        _op(_LD_ABS, 16),  # 9: the low 32 bits of args[0], the domain (little-endian machines)
        _op(_JEQ, _AF_UNIX, jt=0, jf=1),  # 10
        _op(_RET, _ERRNO | _EACCES),  # 11
        _op(_RET, _ALLOW),  # 12
    ]
    return b"".join(program)
