"""Process locks: one gateway per state directory, one process per credential.

A lock is an OS advisory lock (``flock``) on a file that also holds a record of
its owner (pid, process start time, command line, version). The kernel drops
the lock when the owner dies, however it dies, so a lock can never be stale
and a recycled pid can never keep one alive; the record is for humans, for
``chatgate status`` and for ``--replace``. The file is never deleted (deleting
a locked file would let a second process lock a new file at the same path).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec.structs import asdict

from chatgate import __version__
from chatgate.app.proc_start import SAME_START, own_start_time, runs
from chatgate.domain.errors import StartupError

if TYPE_CHECKING:
    import psutil


class LockRecord(msgspec.Struct, frozen=True):
    pid: int
    start_time: float
    cmdline: list[str]
    version: str
    started_at: float
    extra: dict[str, Any] = msgspec.field(default_factory=dict)

    @classmethod
    def for_this_process(cls, **extra: Any) -> LockRecord:
        return cls(
            pid=os.getpid(),
            start_time=own_start_time(),
            cmdline=list(sys.argv),
            version=__version__,
            started_at=time.time(),
            extra=dict(extra),
        )

    @classmethod
    def parse(cls, text: str) -> LockRecord | None:
        try:
            data = json.loads(text)
            return cls(
                pid=int(data["pid"]),
                start_time=float(data["start_time"]),
                cmdline=[str(a) for a in data.get("cmdline", [])],
                version=str(data.get("version", "?")),
                started_at=float(data.get("started_at", 0.0)),
                extra=dict(data.get("extra", {})),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def alive(self) -> bool:
        """Whether the process this record names still runs (not if its pid was reused, nor a zombie)."""
        return runs(self.pid, self.start_time)

    def process(self) -> psutil.Process | None:
        """The live process this record names, to signal it; ``None`` if it is gone."""
        import psutil  # only to signal a gateway (``replace.py``): about 0.6 MB a gateway would keep

        if not self.alive():
            return None
        try:
            proc = psutil.Process(self.pid)
            # The pid may have been reused since ``alive``: psutil's own guard holds this start.
            return proc if abs(proc.create_time() - self.start_time) <= SAME_START else None
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None


class LockHeld(StartupError):
    def __init__(self, path: Path, record: LockRecord | None) -> None:
        owner = f"pid {record.pid} (chatgate {record.version})" if record else "another process"
        super().__init__(f"{path} is locked by {owner}")
        self.path = path
        self.record = record


class LockUnavailable(StartupError):
    """The lock file cannot be opened or written; the message says what to do."""


def _read(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def read_record(path: Path, attempts: int = 5) -> LockRecord | None:
    """The record at ``path``, or ``None``. A read can overlap the holder's rewrite (a read is
    not atomic with a write), so an unreadable record is read again a few times first."""
    for attempt in range(attempts):
        try:
            record = LockRecord.parse(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            return None
        if record is not None or attempt == attempts - 1:
            return record
        time.sleep(0.002)
    return None


def is_held(path: Path) -> bool:
    """Whether some live process holds the lock at ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except PermissionError:
        return True  # another user's lock: assume it is live
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


class FileLock:
    def __init__(self, path: Path, purpose: str) -> None:
        self.path = path
        self.purpose = purpose
        self._fd: int | None = None
        self.previous: LockRecord | None = None
        """The record a dead owner left behind, if any (a takeover)."""

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, record: LockRecord) -> None:
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                text = _read(fd)
                os.close(fd)
                raise LockHeld(self.path, LockRecord.parse(text)) from None
            if self._same_file(fd):
                break
            os.close(fd)  # the file was replaced under us; lock the new one
        self.previous = LockRecord.parse(_read(fd))
        self._fd = fd
        self.update(record)

    def _open(self) -> int:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except PermissionError as exc:
            owner = "another user"
            with contextlib.suppress(OSError):
                owner = f"uid {self.path.stat().st_uid}"
            raise LockUnavailable(
                f"cannot open the {self.purpose} lock {self.path} ({exc.strerror}); it belongs to {owner}."
                f" If no gateway is running, remove it as its owner (for example: sudo rm {self.path};"
                " if it is marked immutable, sudo chattr -i it first), or use another state directory."
            ) from exc
        except OSError as exc:
            raise LockUnavailable(f"cannot open the {self.purpose} lock {self.path}: {exc.strerror}") from exc

    def _same_file(self, fd: int) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    def update(self, record: LockRecord) -> None:
        assert self._fd is not None
        data = json.dumps(asdict(record), indent=1).encode()
        # One write over the old record, padded with spaces (still valid JSON) to its
        # length: truncating first left a moment in which `status`, `--replace` or a
        # test read an empty file and found no owner.
        size = os.fstat(self._fd).st_size
        os.pwrite(self._fd, data.ljust(size), 0)
        os.fsync(self._fd)

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)  # closing drops the flock
        self._fd = None


def runtime_lock(state_dir: Path) -> FileLock:
    return FileLock(state_dir / "gateway.lock", "gateway")


def credential_lock(lock_dir: Path, kind: str, credential: str) -> FileLock:
    """A machine-wide lock named by a hash of the credential (never the credential itself)."""
    digest = hashlib.sha256(f"{kind}\0{credential}".encode()).hexdigest()[:32]
    return FileLock(lock_dir / f"{kind}-{digest}.lock", f"{kind} credential")


def default_credential_dir() -> Path:
    import tempfile

    return Path(tempfile.gettempdir()) / "chatgate-locks"


def ensure_shared_dir(path: Path) -> None:
    """The credential lock directory is shared by every user, like /tmp itself."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        if path.stat().st_uid == os.getuid():
            path.chmod(0o1777)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EACCES):
            raise
